//go:build conversion

package podcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/pkg/steps/pipeline"
	"platform.example/vm-migration/test/bootcheck"
	"platform.example/vm-migration/test/builders"
)

// Where the inputs are by default: what make conversion-image and
// hack/build-guest-images.sh link into _output.
const (
	defaultLayout = "../../../_output/conversion-image/oci"
	defaultImage  = "platform.example/vm-migration-conversion:dev"
	defaultGuests = "../../../_output/guests"
)

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// check is one run of the conversion pod's container.
type check struct {
	t        *testing.T
	work     string
	rootfs   string
	image    string
	cfg      v1.Config
	pod      corev1.PodSpec
	cm       map[string]string
	claims   map[string]string
	kvm      bool
	report   []string
	migrated *v1alpha1.VirtualMachineMigration
}

// TestConversionPod runs the conversion image's root file system as the
// conversion pod the controller renders would run (podcheck's bundle from
// the pod spec: uid/gid 107, fsGroup, read-only root, no capabilities, no
// new privileges, the pod's volumes, its limits as a cgroup), with
// /dev/kvm offered as the test node's "kvm" RuntimeClass offers it where
// the machine has one: first its own view of itself, then the image's
// self-check with an appliance boot, then the real conversion of the BIOS
// Debian guest with the pod's own script and domain XML, read back as
// the controller reads it, then a boot of the converted disk.
func TestConversionPod(t *testing.T) {
	for _, tool := range []string{"runc", "tar", "qemu-system-x86_64"} {
		_, err := exec.LookPath(tool)
		require.NoError(t, err, "%s is needed (apt-get install -y runc)", tool)
	}
	require.Equal(t, 0, os.Getuid(), "runc needs root")
	c := newCheck(t)
	c.podView()
	c.selfCheck()
	c.convert()
	c.boot()
	if p := os.Getenv("PODCHECK_REPORT"); p != "" {
		require.NoError(t, os.WriteFile(p, []byte(strings.Join(c.report, "\n")+"\n"), 0o644), "writing the report")
	}
}

// newCheck unpacks the image and renders the BIOS guest's conversion pod.
func newCheck(t *testing.T) *check {
	layoutDir, ref := envOr("CONVERSION_IMAGE_LAYOUT", defaultLayout), envOr("CONVERSION_IMAGE", defaultImage)
	c := &check{t: t, work: t.TempDir(), image: ref}
	c.rootfs = filepath.Join(c.work, "rootfs")
	start := time.Now()
	cfg, err := Unpack(layoutDir, ref, c.rootfs)
	require.NoError(t, err, "unpacking %s from %s (make conversion-image builds it)", ref, layoutDir)
	c.cfg = cfg.Config
	c.addReport("image %s unpacked in %s", ref, time.Since(start).Round(time.Second))
	_, err = os.Stat("/dev/kvm")
	c.kvm = err == nil
	m := biosGuest()
	conf := pipeline.Config{ConversionImage: ref}
	if c.kvm {
		conf.ConversionRuntimeClass = "kvm"
	}
	cm, err := pipeline.RenderConversionConfigMap(m, 1, nil)
	require.NoError(t, err, "rendering the conversion ConfigMap")
	job, err := pipeline.RenderConversionJob(m, 1, conf, nil)
	require.NoError(t, err, "rendering the conversion Job")
	c.pod, c.cm, c.migrated = job.Spec.Template.Spec, cm.Data, m
	c.claims = map[string]string{m.Status.Disks[0].StagingClaim: c.stageDisk()}
	return c
}

// biosGuest is a migration of the BIOS guest of hack/build-guest-images.sh
// that reached Converting: one 1.5 GiB disk on SCSI, 1 GiB, one vCPU.
func biosGuest() *v1alpha1.VirtualMachineMigration {
	inv := builders.LinuxBIOSInventory()
	inv.Name, inv.MemoryMiB, inv.CPU = "bios-guest", 1024, v1alpha1.CPUTopology{Sockets: 1, CoresPerSocket: 1}
	inv.Disks[0].CapacityBytes = 1536 << 20
	m := builders.Migration(builders.Named("bios-guest"), builders.WithUID("0b5c7e1a-2f3d-4c5e-8a9b-1c2d3e4f5a6b"),
		builders.SourceVM(inv.Name), builders.DefaultStorage("local"), builders.Networks(builders.PodNetwork("VM Network")))
	m.Status.Phase = v1alpha1.PhaseConverting
	m.Status.Source = inv
	m.Status.Target = &v1alpha1.TargetStatus{Name: naming.DNS1123Label(inv.Name)}
	m.Status.Disks = builders.Disks(m.Name, inv)
	m.Status.Disks[0].DataVolume = naming.DataVolume(m.Status.Target.Name, 0)
	m.Status.AppliedSpec = m.Spec.DeepCopy()
	return m
}

// stageDisk copies the BIOS guest's image into a staging volume as the
// transfer leaves it: disk.img owned by 107.
func (c *check) stageDisk() string {
	guests := envOr("GUEST_IMAGES", defaultGuests)
	src := filepath.Join(guests, "bios.img")
	_, err := os.Stat(src)
	require.NoError(c.t, err, "the BIOS guest image (hack/build-guest-images.sh builds it)")
	dir := filepath.Join(c.work, "claims", "staging")
	require.NoError(c.t, os.MkdirAll(dir, 0o755))
	dst := filepath.Join(dir, pipeline.ImageFile)
	out, err := exec.Command("cp", "--sparse=always", src, dst).CombinedOutput()
	require.NoError(c.t, err, "copying the guest image: %s", out)
	require.NoError(c.t, os.Chmod(dst, 0o640))
	id := int(pipeline.StagingUID)
	require.NoError(c.t, os.Chown(dir, id, id))
	require.NoError(c.t, os.Chown(dst, id, id))
	return dir
}

func (c *check) addReport(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	c.t.Log(line)
	c.report = append(c.report, line)
}

// run runs the pod's container (with args instead of its command when
// given) in a fresh bundle and cgroup, and returns its exit code, output,
// termination message and peak memory.
func (c *check) run(name string, timeout time.Duration, args ...string) (int, string, string, int64) {
	c.t.Helper()
	cg, err := NewCgroup(fmt.Sprintf("vmm-podcheck-%d-%s", os.Getpid(), name))
	require.NoError(c.t, err, "making the cgroup")
	defer cg.Remove()
	b, err := Write(Options{
		Dir: filepath.Join(c.work, "bundle-"+name), Rootfs: c.rootfs, Image: c.cfg, Pod: c.pod,
		ConfigMaps: map[string]map[string]string{naming.ConversionConfigMap(c.migrated.Name, 1): c.cm},
		Claims:     c.claims, KVM: c.kvm && c.pod.RuntimeClassName != nil, CgroupParent: cg.Path, Args: args,
	})
	require.NoError(c.t, err, "writing the bundle")
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out bytes.Buffer
	code, err := Run(ctx, filepath.Join(c.work, "runc-state"), b, fmt.Sprintf("podcheck-%d-%s", os.Getpid(), name), &out)
	require.NoError(c.t, err, "running %s:\n%s", name, out.String())
	term, _ := os.ReadFile(b.TerminationLog)
	peak, err := cg.PeakMemory()
	require.NoError(c.t, err, "reading the peak memory")
	return code, out.String(), string(term), peak
}

// podView: the container's own view of itself.
func (c *check) podView() {
	script := `id; grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status
touch /root-write-probe 2>&1 || true
touch /tmp/w /var/tmp/w /mnt/disks/disk-0/w && rm /mnt/disks/disk-0/w && echo "tmp, var/tmp and the staging volume writable"
ls -ln /dev/kvm 2>&1 || true
unshare -U true 2>&1 || true`
	code, out, _, _ := c.run("view", time.Minute, "/bin/sh", "-c", script)
	require.Equal(c.t, 0, code, "the pod's view of itself:\n%s", out)
	for _, want := range []string{"uid=107(v2v) gid=107(v2v) groups=107(v2v)", "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000",
		"NoNewPrivs:\t1", "Seccomp:\t2", "Read-only file system", "writable", "unshare failed: Operation not permitted"} {
		assert.Contains(c.t, out, want, "the pod's view of itself")
	}
	c.addReport("pod view:\n%s", indent(out))
}

// selfCheck runs the image's self-check with an appliance boot.
func (c *check) selfCheck() {
	start := time.Now()
	code, out, _, _ := c.run("self-check", 10*time.Minute, "/usr/local/bin/v2v-self-check", "--boot")
	line := strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:])
	var got struct {
		VirtV2V         string `json:"virtV2V"`
		OutputXMLOption bool   `json:"outputXMLOption"`
		Appliance       struct{ Readable, KernelReadable bool }
		UID, GID        int
		KVM             string `json:"kvm"`
		TCGBoot         struct{ Result string }
		KVMBoot         struct{ Result string }
		OK              bool `json:"ok"`
	}
	require.NoError(c.t, json.Unmarshal([]byte(line), &got), "the self-check prints one JSON line:\n%s", out)
	assert.Equal(c.t, 0, code, "the self-check's exit code:\n%s", out)
	assert.True(c.t, got.OK && got.Appliance.Readable && got.Appliance.KernelReadable, "the self-check: %s", line)
	assert.Equal(c.t, 107, got.UID, "the self-check's uid")
	assert.Equal(c.t, "2.2.0", got.VirtV2V, "the image's virt-v2v")
	assert.True(c.t, got.TCGBoot.Result == "ok" || got.KVMBoot.Result == "ok", "the appliance booted: %s", line)
	c.addReport("self-check (%s): %s", time.Since(start).Round(time.Second), line)
}

// convert runs the conversion pod's own command on the staged guest and
// reads its end as the controller does.
func (c *check) convert() {
	start := time.Now()
	code, out, term, peak := c.run("convert", 45*time.Minute)
	elapsed := time.Since(start).Round(time.Second)
	logPath := filepath.Join(c.work, "conversion.log")
	_ = os.WriteFile(logPath, []byte(out), 0o644)
	if dir := os.Getenv("PODCHECK_ARTIFACTS"); dir != "" {
		_ = os.MkdirAll(dir, 0o755)
		_ = os.WriteFile(filepath.Join(dir, "conversion.log"), []byte(out), 0o644)
	}
	require.Equal(c.t, 0, code, "the conversion's exit code; its termination message:\n%s\nthe end of its log:\n%s", term, tail(out, 40))
	o := pipeline.ObserveJob(completedJob(c.migrated, code), []corev1.Pod{terminatedPod(c.migrated, code, term)}, nil)
	assert.True(c.t, o.Succeeded, "the controller reads a success: %+v", o)
	assert.True(c.t, strings.HasPrefix(o.OperatingSystem, "debian 12"), "the inspected OS the controller records: %q", o.OperatingSystem)
	for _, want := range []string{"conversion accelerator: ", "i_distro = debian", "i_firmware = BIOS", "to run on KVM"} {
		assert.Contains(c.t, out, want, "the conversion log")
	}
	c.addReport("conversion: exit %d in %s, peak memory %d MiB (limit %s), OS %q; log lines:\n%s", code, elapsed, peak>>20,
		c.pod.Containers[0].Resources.Limits.Memory().String(), o.OperatingSystem, indent(evidence(out)))
}

// boot boots the converted disk as the VM the controller renders and
// checks the guest reports what a conversion leaves behind.
func (c *check) boot() {
	vm, err := pipeline.RenderVirtualMachine(c.migrated)
	require.NoError(c.t, err, "rendering the VirtualMachine")
	images := map[string]string{}
	for _, v := range vm.Spec.Template.Spec.Volumes {
		images[v.Name] = filepath.Join(c.claims[c.migrated.Status.Disks[0].StagingClaim], pipeline.ImageFile)
	}
	res, err := bootcheck.Boot(context.Background(), vm, bootcheck.Options{Images: images, WorkDir: filepath.Join(c.work, "boot"), Timeout: 20 * time.Minute})
	require.NoError(c.t, err, "booting the converted guest")
	// No "firstboot": virt-v2v installs its first-boot service only to
	// install the guest agent, which the test guests have.
	for k, v := range map[string]string{"firmware": "bios", "rootdriver": "virtio_blk", "openvmtools": "absent", "initrdvirtio": "yes"} {
		assert.Equal(c.t, v, res.Fields[k], "the converted guest reports %s", k)
	}
	n, _ := strconv.Atoi(res.Fields["prev2v"])
	assert.GreaterOrEqual(c.t, n, 1, "the converted guest reports prev2v=%q, want the initrd virt-v2v kept", res.Fields["prev2v"])
	c.addReport("boot of the converted disk: marker after %s: %s", res.Elapsed.Round(time.Second), res.Line)
}

func completedJob(m *v1alpha1.VirtualMachineMigration, code int) *batchv1.Job {
	job := &batchv1.Job{}
	job.Name = naming.ConversionJob(m.Name, 1)
	job.Labels = map[string]string{v1alpha1.LabelComponent: v1alpha1.ComponentConversion}
	cond := batchv1.JobComplete
	if code != 0 {
		cond = batchv1.JobFailed
	}
	job.Status.Conditions = []batchv1.JobCondition{{Type: cond, Status: corev1.ConditionTrue}}
	return job
}

func terminatedPod(m *v1alpha1.VirtualMachineMigration, code int, term string) corev1.Pod {
	var pod corev1.Pod
	pod.Status.Phase = corev1.PodSucceeded
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: pipeline.ConversionContainer, State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: int32(code), Message: term}}}}
	return pod
}

// evidenceLine matches the log lines that show what ran: the
// accelerator, virt-v2v's steps (with one decimal, not the appliance
// kernel's), the inspection, the qemu accelerator libguestfs used.
var evidenceLine = regexp.MustCompile(`^(conversion accelerator: |\[ *[0-9]+\.[0-9]\] |i_(distro|osinfo|product_name|firmware) = |\s*-machine accel=)`)

func evidence(log string) string {
	var keep []string
	for _, l := range strings.Split(log, "\n") {
		if evidenceLine.MatchString(l) {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n    ")
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
