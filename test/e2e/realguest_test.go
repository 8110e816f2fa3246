//go:build e2e && conversion

package e2e

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/steps/pipeline"
	"platform.example/vm-migration/test/bootcheck"
	"platform.example/vm-migration/test/framework"
	"platform.example/vm-migration/test/standins"
	"platform.example/vm-migration/test/vcsimlocal"
)

// Environment of the real-guest scenarios (make test-conversion sets them).
const (
	// envGuests is the directory of hack/build-guest-images.sh's images;
	// default _output/guests.
	envGuests = "GUEST_IMAGES"
	// envReport names a file that receives one summary line per guest.
	envReport = "REAL_GUEST_REPORT"
	// envArtifacts names a directory that receives each guest's conversion
	// log and serial console.
	envArtifacts = "REAL_GUEST_ARTIFACTS"
	// envGuestList names the guests TestRealGuest migrates, "bios efi" by
	// default.
	envGuestList = "GUESTS"
)

// guestImages is the built guest images' directory and its guest.env.
func guestImages(t *testing.T) (string, map[string]string) {
	t.Helper()
	if missing := standins.MissingConversionTools(); len(missing) > 0 {
		t.Fatalf("the real conversion needs %s: run hack/install-conversion-deps.sh (make test-conversion does)", strings.Join(missing, ", "))
	}
	dir := os.Getenv(envGuests)
	if dir == "" {
		dir = framework.RepoPath("_output/guests")
	}
	f, err := os.Open(filepath.Join(dir, "guest.env"))
	if err != nil {
		t.Fatalf("no guest images (run hack/build-guest-images.sh, or make test-conversion): %v", err)
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			env[k] = v
		}
	}
	return dir, env
}

// realGuestStack is a stack whose stand-in root the conversion's non-root
// user can reach (t.TempDir makes its directories 0700).
func realGuestStack(t *testing.T) *stack {
	t.Helper()
	s := newStack(t, stackOptions{})
	for _, d := range []string{filepath.Dir(s.standins.Root), s.standins.Root} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// realGuestMigration migrates vm with the real conversion image.
func (s *stack) realGuestMigration(name, vm string) *v1alpha1.VirtualMachineMigration {
	m := s.newMigration(name, vm)
	m.Spec.Conversion.Image = realConversionImage
	return m
}

// TestRealGuest migrates the real Debian guests end to end: vcsim serves
// the image as the VM's disk (descriptor + flat extent), the real
// vm-transfer moves it, the real virt-v2v-in-place converts it (run by
// the kubelet stand-in as uid 107), the CDI stand-in clones it, and the
// target disk boots in QEMU with the VirtualMachine's hardware to the
// guest's marker, which must show the conversion's traces.
func TestRealGuest(t *testing.T) {
	dir, env := guestImages(t)
	guests := strings.Fields(os.Getenv(envGuestList))
	if len(guests) == 0 {
		guests = []string{"bios", "efi"}
	}
	for _, fw := range guests {
		t.Run(fw, func(t *testing.T) {
			testRealGuest(t, fw, filepath.Join(dir, fw+".img"), env)
		})
	}
}

func testRealGuest(t *testing.T, firmware, image string, env map[string]string) {
	s := realGuestStack(t)
	disk, err := vcsimlocal.ImageDisk(image)
	if err != nil {
		t.Fatal(err)
	}
	name := firmware + "-guest"
	const mac = "00:50:56:2a:0b:0c"
	src, err := s.vc.AddVM(s.ctx, vcsimlocal.VMSpec{
		Name: name, Sockets: 1, CoresPerSocket: 1, MemoryMiB: 1024,
		Firmware: firmware, SecureBoot: firmware == "efi",
		Disks: []vcsimlocal.DiskSpec{disk}, NICs: []vcsimlocal.NICSpec{{Network: vcsimlocal.NetworkVM, MAC: mac}},
		PoweredOn: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	m := s.create(s.realGuestMigration(name, name))
	m = s.waitPhase(m.Name, v1alpha1.PhaseSucceeded, 45*time.Minute)
	t.Logf("migration of the %s guest succeeded in %s", firmware, time.Since(start).Round(time.Second))

	if d := m.Status.Disks[0]; d.SHA256 != src.Disks[0].SHA256 {
		t.Errorf("transferred sha256 %s, the image's %s", d.SHA256, src.Disks[0].SHA256)
	}
	wantOS := env["GUEST_DISTRO"] + " " + env["GUEST_VERSION"]
	if os := m.Status.Conversion.OperatingSystem; os != wantOS {
		t.Errorf("inspected OS in status %q, want %q (the guest's /etc/debian_version)", os, wantOS)
	}
	converted := phaseDuration(t, m, v1alpha1.PhaseTransferringDisks, v1alpha1.PhaseConverting)
	logPath := standins.PodLogPath(s.standins, s.ns, conversionPodName(t, s, m), pipeline.ConversionContainer)
	excerpt := conversionExcerpt(t, logPath)
	t.Logf("conversion (%s, status.conversion.operatingSystem=%q), log excerpt:\n%s", converted, m.Status.Conversion.OperatingSystem, excerpt)
	for _, want := range []string{"Converting " + env["GUEST_VERSION"] + " to run on KVM", "This guest has virtio drivers installed.",
		"dpkg --purge open-vm-tools", ".pre-v2v", "update-initramfs"} {
		if !strings.Contains(excerpt, want) {
			t.Errorf("the conversion log lacks %q", want)
		}
	}

	res := s.bootTarget(t, name)
	t.Logf("boot check: marker after %s: %s", res.Elapsed.Round(time.Second), res.Line)
	checkMarker(t, res.Fields, firmware, mac)
	saveArtifacts(t, firmware, logPath, res.SerialLog)
	report(t, fmt.Sprintf("real guest: firmware=%s os=%s converted=%ds booted=%ds",
		firmware, m.Status.Conversion.OperatingSystem, int(converted.Seconds()), int(res.Elapsed.Seconds())))
}

// phaseDuration is the time from one checkpoint's evidence to the next's.
func phaseDuration(t *testing.T, m *v1alpha1.VirtualMachineMigration, from, to v1alpha1.Phase) time.Duration {
	t.Helper()
	at := map[v1alpha1.Phase]time.Time{}
	for _, e := range m.Status.Evidence {
		at[e.Phase] = e.ReachedAt.Time
	}
	if at[from].IsZero() || at[to].IsZero() {
		t.Fatalf("no evidence of %s and %s in status: %+v", from, to, m.Status.Evidence)
	}
	return at[to].Sub(at[from])
}

// conversionPodName is the pod the kubelet stand-in ran for the
// migration's conversion Job (it may be gone: its log stays).
func conversionPodName(t *testing.T, s *stack, m *v1alpha1.VirtualMachineMigration) string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(s.standins.Root, "logs"))
	if err != nil {
		t.Fatalf("no conversion log kept by the stand-in: %v", err)
	}
	prefix := s.ns + "_" + m.Status.Conversion.JobName + "-"
	for _, e := range entries {
		if n := e.Name(); strings.HasPrefix(n, prefix) {
			return strings.TrimSuffix(strings.TrimPrefix(n, s.ns+"_"), "_"+pipeline.ConversionContainer+".log")
		}
	}
	t.Fatalf("no log of a pod of job %s among %v", m.Status.Conversion.JobName, entries)
	return ""
}

// excerptLine matches the lines of a conversion log that say what
// virt-v2v did: its progress ("[  88.9] Converting 12.15 to run on KVM"),
// its warnings and notes, the inspection (with -v) and the commands that
// changed the guest (packages purged, the initrd moved and rebuilt).
var excerptLine = regexp.MustCompile(`^(\[ *[0-9]+\.[0-9]\] |virt-v2v-in-place: |i_(type|distro|osinfo|major_version|minor_version|product_name|firmware) = |commandrvf: (dpkg --purge|rpm -e|mv |/usr/sbin/update-initramfs|/usr/bin/dracut))`)

// conversionExcerpt keeps the excerptLine lines of a conversion log.
func conversionExcerpt(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var keep []string
	for line := range strings.SplitSeq(string(data), "\n") {
		if excerptLine.MatchString(line) {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, "\n")
}

// bootTarget boots the migrated VirtualMachine's disks (the clones the CDI
// stand-in made) with its hardware.
func (s *stack) bootTarget(t *testing.T, name string) *bootcheck.Result {
	t.Helper()
	vm, err := s.kv.KubevirtV1().VirtualMachines(s.ns).Get(s.ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	images := map[string]string{}
	for _, v := range vm.Spec.Template.Spec.Volumes {
		claim := ""
		switch {
		case v.DataVolume != nil:
			claim = v.DataVolume.Name
		case v.PersistentVolumeClaim != nil:
			claim = v.PersistentVolumeClaim.ClaimName
		default:
			continue
		}
		dir, err := standins.ClaimDir(s.ctx, s.standins, s.ns, claim)
		if err != nil {
			t.Fatal(err)
		}
		images[v.Name] = filepath.Join(dir, pipeline.ImageFile)
	}
	res, err := bootcheck.Boot(s.ctx, vm, bootcheck.Options{Images: images, WorkDir: t.TempDir(), Timeout: 20 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// checkMarker checks what the booted guest reports: the firmware it booted
// with, root on virtio, and the traces of the conversion (VMware Tools
// gone, the old initrd kept as *.pre-v2v and the new one with virtio,
// virt-v2v's first-boot service), with the VM's MAC.
func checkMarker(t *testing.T, f map[string]string, firmware, mac string) {
	t.Helper()
	want := map[string]string{
		"firmware": firmware, "rootdriver": "virtio_blk", "openvmtools": "absent",
		"firstboot": "present", "initrdvirtio": "yes",
	}
	if firmware == "efi" {
		want["secureboot"] = "1"
	}
	for k, v := range want {
		if f[k] != v {
			t.Errorf("guest reports %s=%q, want %q", k, f[k], v)
		}
	}
	if n, _ := strconv.Atoi(f["prev2v"]); n < 1 {
		t.Errorf("guest reports prev2v=%q, want the initrd virt-v2v kept", f["prev2v"])
	}
	if !strings.Contains(f["macs"], mac) {
		t.Errorf("guest reports MACs %q, want %s", f["macs"], mac)
	}
}

// saveArtifacts copies a guest's conversion log and serial console into
// $REAL_GUEST_ARTIFACTS/<firmware>/, when set.
func saveArtifacts(t *testing.T, firmware string, files ...string) {
	t.Helper()
	dir := os.Getenv(envArtifacts)
	if dir == "" {
		return
	}
	dir = filepath.Join(dir, firmware)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// report logs a summary line and appends it to $REAL_GUEST_REPORT, when set.
func report(t *testing.T, line string) {
	t.Helper()
	t.Log(line)
	path := os.Getenv(envReport)
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := fmt.Fprintln(f, line); err != nil {
		t.Fatal(err)
	}
}

// TestRealGuestBlankDisk migrates a VM whose disk holds no operating
// system: the real virt-v2v fails inspection, the migration ends Failed in
// the conversion-failure class with virt-v2v's own message in status, at
// the first attempt (converting again cannot help), and the source VM is
// powered on again.
func TestRealGuestBlankDisk(t *testing.T) {
	guestImages(t)
	s := realGuestStack(t)
	image := filepath.Join(t.TempDir(), "blank.img")
	if err := os.WriteFile(image, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(image, 256*vcsimlocal.MiB); err != nil {
		t.Fatal(err)
	}
	disk, err := vcsimlocal.ImageDisk(image)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.vc.AddVM(s.ctx, vcsimlocal.VMSpec{
		Name: "blank", Sockets: 1, CoresPerSocket: 1, MemoryMiB: 512, Firmware: "bios",
		Disks: []vcsimlocal.DiskSpec{disk}, PoweredOn: true,
	}); err != nil {
		t.Fatal(err)
	}
	m := s.create(s.realGuestMigration("blank", "blank"))
	m = s.waitPhase(m.Name, v1alpha1.PhaseFailed, 20*time.Minute)
	le := m.Status.LastError
	if le == nil || le.Phase != v1alpha1.PhaseConverting || le.Reason != statemachine.ReasonConversionFailed {
		t.Fatalf("last error %+v, want a conversion failure", le)
	}
	t.Logf("status.lastError: reason=%s message=%q", le.Reason, le.Message)
	for _, want := range []string{
		"virt-v2v: inspection could not detect the source guest (or physical machine).",
		"No root device found in this operating system image.",
		statemachine.ConversionInspectionFailed + ": converting again cannot help",
	} {
		if !strings.Contains(le.Message, want) {
			t.Errorf("last error message lacks %q", want)
		}
	}
	if m.Status.Retries != 0 || m.Status.Conversion == nil || m.Status.Conversion.Attempt != 1 {
		t.Errorf("retries %d, conversion %+v: want one attempt, no retry", m.Status.Retries, m.Status.Conversion)
	}
	if st := s.powerState("blank"); st != "poweredOn" {
		t.Errorf("source %s after the failure, want poweredOn (as found)", st)
	}
	if sc := m.Status.SourceControl; sc == nil || sc.RestoredAt == nil {
		t.Errorf("source control %+v, want a restore recorded", sc)
	}
	if _, err := s.kv.KubevirtV1().VirtualMachines(s.ns).Get(s.ctx, "blank", metav1.GetOptions{}); err == nil {
		t.Error("a target VM exists after a failed conversion")
	}
}
