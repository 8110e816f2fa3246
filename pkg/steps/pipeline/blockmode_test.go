package pipeline

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/pkg/transfer/wire"
	"platform.example/vm-migration/test/builders"
	"platform.example/vm-migration/test/fakes"
)

// onePass is m with its disks written in place (the one-pass path).
func onePass(m *v1alpha1.VirtualMachineMigration) *v1alpha1.VirtualMachineMigration {
	builders.InPlace(m)
	return m
}

// wantDisk is where the transfer and conversion pods see one disk.
type wantDisk struct {
	block bool
	// transfer is the transfer's destination, conversion the path in
	// the conversion pod and the domain XML.
	transfer, conversion string
}

// TestBlockClaimsRendering: a claim in Block volume mode is attached to
// the transfer and conversion pods as a device, which the transfer spec
// writes to and the domain XML names as a block disk; a Filesystem claim
// is mounted, its image the file disk.img at its root, as it always was.
func TestBlockClaimsRendering(t *testing.T) {
	tests := map[string]struct {
		m     *v1alpha1.VirtualMachineMigration
		block func(*v1alpha1.VirtualMachineMigration) map[string]bool
		want  []wantDisk
	}{
		"filesystem, no map": {
			m:     linuxBIOS(),
			block: func(*v1alpha1.VirtualMachineMigration) map[string]bool { return nil },
			want:  []wantDisk{{transfer: "/staging/2000/disk.img", conversion: "/mnt/disks/disk-0/disk.img"}},
		},
		"filesystem, the claim named not Block": {
			m: onePass(linuxBIOS()),
			block: func(m *v1alpha1.VirtualMachineMigration) map[string]bool {
				return map[string]bool{m.Status.Disks[0].StagingClaim: false}
			},
			want: []wantDisk{{transfer: "/staging/2000/disk.img", conversion: "/mnt/disks/disk-0/disk.img"}},
		},
		"block": {
			m: onePass(linuxBIOS()),
			block: func(m *v1alpha1.VirtualMachineMigration) map[string]bool {
				return map[string]bool{m.Status.Disks[0].StagingClaim: true}
			},
			want: []wantDisk{{block: true, transfer: "/staging/2000.dev", conversion: "/mnt/disks/disk-0.dev"}},
		},
		"a mix, the modes the mapping gives": {
			m:     onePass(windowsEFI()),
			block: mappedBlockClaims,
			want: []wantDisk{
				{block: true, transfer: "/staging/2000.dev", conversion: "/mnt/disks/disk-0.dev"},
				{transfer: "/staging/2001/disk.img", conversion: "/mnt/disks/disk-1/disk.img"},
				{transfer: "/staging/16000/disk.img", conversion: "/mnt/disks/disk-2/disk.img"},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m, block := tc.m, tc.block(tc.m)
			require.Len(t, m.Status.Disks, len(tc.want))

			cm, err := RenderTransferConfigMap(m, 1, block)
			require.NoError(t, err)
			var js wire.JobSpec
			require.NoError(t, json.Unmarshal([]byte(cm.Data[TransferSpecKey]), &js))
			tjob, err := RenderTransferJob(m, 1, testConfig, block)
			require.NoError(t, err)
			dom, err := RenderDomainXML(m, block)
			require.NoError(t, err)
			var parsed domainXML
			require.NoError(t, xml.Unmarshal(dom, &parsed), "the domain XML:\n%s", dom)
			ccm, err := RenderConversionConfigMap(m, 1, block)
			require.NoError(t, err)
			assert.Equal(t, string(dom), ccm.Data[DomainXMLKey], "the ConfigMap holds the domain XML")
			cjob, err := RenderConversionJob(m, 1, testConfig, block)
			require.NoError(t, err)

			require.Len(t, js.Disks, len(tc.want))
			require.Len(t, parsed.Devices.Disks, len(tc.want))
			for i, want := range tc.want {
				d := m.Status.Disks[i]
				vol := stagingVolumeName(d.Key)
				assert.Equal(t, want.transfer, js.Disks[i].Destination, "disk %d: the transfer's destination", d.Key)
				assert.Empty(t, js.Disks[i].Checkpoint, "disk %d: vm-transfer picks the checkpoint (none on a device)", d.Key)
				assertClaimAttached(t, tjob, vol, d.StagingClaim, want.block, want.transfer, filepath.Join(stagingRoot, fmt.Sprint(d.Key)))
				assertClaimAttached(t, cjob, vol, d.StagingClaim, want.block, want.conversion, filepath.Dir(want.conversion))

				// virt-v2v converts the disk's qcow2 overlay, backed by
				// the image or device (the disks list names which).
				x := parsed.Devices.Disks[i]
				assert.Equal(t, "disk", x.Device)
				assert.Equal(t, "qcow2", x.Driver.Type, "disk %d: its overlay", d.Key)
				assert.Equal(t, "file", x.Type, "disk %d: the overlay is a file", d.Key)
				assert.Equal(t, overlayPath(diskNameAt(d, i)), x.Source.File)
				assert.Empty(t, x.Source.Dev)
				assert.Contains(t, ccm.Data[DisksListKey], fmt.Sprintf("%s %s %s ", diskNameAt(d, i), want.conversion, overlayPath(diskNameAt(d, i))),
					"disk %d: the overlay's backing image", d.Key)
			}
		})
	}
}

// assertClaimAttached checks that the Job's pod has the claim as volume
// vol, attached as the device at path when block, else mounted at dir,
// never both.
func assertClaimAttached(t *testing.T, job *batchv1.Job, vol, claim string, block bool, path, dir string) {
	t.Helper()
	pod := job.Spec.Template.Spec
	var source *corev1.PersistentVolumeClaimVolumeSource
	for _, v := range pod.Volumes {
		if v.Name == vol {
			source = v.PersistentVolumeClaim
		}
	}
	require.NotNil(t, source, "%s: volume %s is the claim", job.Name, vol)
	assert.Equal(t, claim, source.ClaimName, "%s: volume %s", job.Name, vol)
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	var mounts []string
	for _, vm := range c.VolumeMounts {
		if vm.Name == vol {
			mounts = append(mounts, vm.MountPath)
		}
	}
	var devices []string
	for _, vd := range c.VolumeDevices {
		if vd.Name == vol {
			devices = append(devices, vd.DevicePath)
		}
	}
	if block {
		assert.Equal(t, []string{path}, devices, "%s: the Block claim %s as a device", job.Name, claim)
		assert.Empty(t, mounts, "%s: the Block claim %s is not mounted", job.Name, claim)
	} else {
		assert.Equal(t, []string{dir}, mounts, "%s: the Filesystem claim %s mounted", job.Name, claim)
		assert.Empty(t, devices, "%s: the Filesystem claim %s is no device", job.Name, claim)
	}
}

// TestFilesystemRenderingUnchanged: a map that names no claim Block
// renders the Jobs as no map does (the golden files').
func TestFilesystemRenderingUnchanged(t *testing.T) {
	m := onePass(windowsEFI())
	none := map[string]bool{}
	for _, d := range m.Status.Disks {
		none[d.StagingClaim] = false
	}
	for _, block := range []map[string]bool{{}, none} {
		tjob, err := RenderTransferJob(m, 1, testConfig, block)
		require.NoError(t, err)
		want, err := RenderTransferJob(m, 1, testConfig, nil)
		require.NoError(t, err)
		assert.Equal(t, want, tjob)
		assert.Nil(t, tjob.Spec.Template.Spec.Containers[0].VolumeDevices)
		cjob, err := RenderConversionJob(m, 1, testConfig, block)
		require.NoError(t, err)
		want, err = RenderConversionJob(m, 1, testConfig, nil)
		require.NoError(t, err)
		assert.Equal(t, want, cjob)
		dom, err := RenderDomainXML(m, block)
		require.NoError(t, err)
		wantDom, err := RenderDomainXML(m, nil)
		require.NoError(t, err)
		assert.Equal(t, string(wantDom), string(dom))
		assert.NotContains(t, string(dom), "dev=\"/", "no block disk")
	}
}

// TestMappedBlockClaims: the claims the storage mapping puts in Block
// mode are the DataVolumes' (a disk written in place: its claim); a
// staging claim of the clone path stays Filesystem.
func TestMappedBlockClaims(t *testing.T) {
	in := onePass(windowsEFI())
	assert.Equal(t, map[string]bool{in.Status.Disks[0].DataVolume: true}, mappedBlockClaims(in))
	clone := windowsEFI()
	assert.Equal(t, map[string]bool{clone.Status.Disks[0].DataVolume: true}, mappedBlockClaims(clone))
	assert.NotContains(t, mappedBlockClaims(clone), clone.Status.Disks[0].StagingClaim)
	assert.Empty(t, mappedBlockClaims(linuxBIOS()), "no mapping names Block")
	unnamed := windowsEFI()
	for i := range unnamed.Status.Disks {
		unnamed.Status.Disks[i].DataVolume = ""
	}
	assert.Empty(t, mappedBlockClaims(unnamed), "no DataVolume named yet")
}

// TestPlanBlockClaims: the plan, made before any claim exists, attaches
// the claim of a disk the mapping puts in Block mode as a device.
func TestPlanBlockClaims(t *testing.T) {
	m := windowsEFI()
	m.Status.Disks = nil // planned before the transfer names them
	objs, err := RenderPlan(m, testConfig)
	require.NoError(t, err)
	planned := map[string]*batchv1.Job{}
	for _, o := range objs {
		if job, ok := o.(*batchv1.Job); ok {
			planned[job.Labels[v1alpha1.LabelComponent]] = job
		}
	}
	for _, component := range []string{v1alpha1.ComponentTransfer, v1alpha1.ComponentConversion} {
		job := planned[component]
		require.NotNil(t, job, "the plan's %s Job", component)
		c := job.Spec.Template.Spec.Containers[0]
		require.Len(t, c.VolumeDevices, 1, "the %s Job attaches the disk mapped Block", component)
		assert.Equal(t, stagingVolumeName(2000), c.VolumeDevices[0].Name)
	}
	cm, err := RenderPlanConfigMap(m, testConfig)
	require.NoError(t, err)
	assert.Contains(t, cm.Data[v1alpha1.PlanKeyDomain], `<source file="/var/tmp/overlays/disk-0.qcow2"></source>`, "the overlay of the disk mapped Block")
}

// TestCreateJobsVolumeModes: the transfer and conversion Jobs attach a
// claim as its own volume mode says, read from the cache; a claim the
// cache lacks takes the mode the mapping gives; a status recorded before
// the one-pass path (no DataVolume named before the import) keeps its
// Filesystem staging claims. None of it reads the API server.
func TestCreateJobsVolumeModes(t *testing.T) {
	ctx := context.Background()
	claimOf := func(m *v1alpha1.VirtualMachineMigration, mode corev1.PersistentVolumeMode) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: m.Status.Disks[0].StagingClaim, Namespace: m.Namespace,
			Labels: map[string]string{v1alpha1.LabelMigrationUID: string(m.UID)}}, Spec: corev1.PersistentVolumeClaimSpec{VolumeMode: &mode}}
	}
	legacy := linuxBIOS()
	legacy.Status.Disks[0].DataVolume = ""
	tests := map[string]struct {
		m *v1alpha1.VirtualMachineMigration
		// claimMode is the mode of the claim of the first disk; cached
		// says whether the cache has it already.
		claimMode  corev1.PersistentVolumeMode
		cached     bool
		wantDevice bool
	}{
		"a Block claim (its storage profile's mode)": {m: onePass(linuxBIOS()), claimMode: corev1.PersistentVolumeBlock, cached: true, wantDevice: true},
		"a Filesystem claim":                         {m: onePass(linuxBIOS()), claimMode: corev1.PersistentVolumeFilesystem, cached: true},
		"a Filesystem claim the mapping puts in Block mode": {m: onePass(windowsEFI()), claimMode: corev1.PersistentVolumeFilesystem,
			cached: true},
		"a claim the cache lacks, mapped Block":    {m: onePass(windowsEFI()), claimMode: corev1.PersistentVolumeBlock, wantDevice: true},
		"a staging claim before the one-pass path": {m: legacy, claimMode: corev1.PersistentVolumeFilesystem, cached: true},
		"a staging claim the cache lacks, legacy":  {m: legacy, claimMode: corev1.PersistentVolumeFilesystem},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := tc.m
			f := newFakeStep(t)
			claim := claimOf(m, tc.claimMode)
			_, err := f.Kube.CoreV1().PersistentVolumeClaims(m.Namespace).Create(ctx, claim, metav1.CreateOptions{})
			require.NoError(t, err)
			if tc.cached {
				f.sync()
			}
			f.Clear()
			require.NoError(t, f.step.CreateTransferJob(ctx, m, 1))
			require.NoError(t, f.step.CreateConversionJob(ctx, m, 1))
			reads, _ := fakes.Calls(f.Actions())
			assert.Empty(t, reads, "the modes come from the cache and the mapping")

			want := wantDisk{transfer: "/staging/2000/disk.img", conversion: "/mnt/disks/disk-0/disk.img"}
			if tc.wantDevice {
				want = wantDisk{block: true, transfer: "/staging/2000.dev", conversion: "/mnt/disks/disk-0.dev"}
			}
			cm, err := f.Kube.CoreV1().ConfigMaps(m.Namespace).Get(ctx, naming.TransferSpecConfigMap(m.Name, 1), metav1.GetOptions{})
			require.NoError(t, err)
			var js wire.JobSpec
			require.NoError(t, json.Unmarshal([]byte(cm.Data[TransferSpecKey]), &js))
			assert.Equal(t, want.transfer, js.Disks[0].Destination)
			tjob, err := f.Kube.BatchV1().Jobs(m.Namespace).Get(ctx, naming.TransferJob(m.Name, 1), metav1.GetOptions{})
			require.NoError(t, err)
			d := m.Status.Disks[0]
			assertClaimAttached(t, tjob, stagingVolumeName(d.Key), d.StagingClaim, want.block, want.transfer, "/staging/2000")
			ccm, err := f.Kube.CoreV1().ConfigMaps(m.Namespace).Get(ctx, naming.ConversionConfigMap(m.Name, 1), metav1.GetOptions{})
			require.NoError(t, err)
			assert.Contains(t, ccm.Data[DisksListKey], " "+want.conversion+" ", "the overlay's backing image or device")
			cjob, err := f.Kube.BatchV1().Jobs(m.Namespace).Get(ctx, naming.ConversionJob(m.Name, 1), metav1.GetOptions{})
			require.NoError(t, err)
			assertClaimAttached(t, cjob, stagingVolumeName(d.Key), d.StagingClaim, want.block, want.conversion, "/mnt/disks/disk-0")
		})
	}
}

// TestConvertScriptListsBlockDisks: the conversion's domain names every
// disk's overlay, in order; the disks list names what each overlay is
// backed by (a block disk's device, the file disks' images), with the
// tree file of each image ("-" for the device, which has none).
func TestConvertScriptListsBlockDisks(t *testing.T) {
	m := onePass(windowsEFI())
	dom, err := RenderDomainXML(m, mappedBlockClaims(m))
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, DomainXMLKey), dom, 0o644))
	script := convertScriptReplacer(dir, dir, filepath.Join(dir, "term"), "/vm-transfer").Replace(convertScriptTemplate)
	start := strings.Index(script, "\ndisks() {")
	require.GreaterOrEqual(t, start, 0, "the script defines disks")
	end := strings.Index(script[start:], "\n}\n")
	require.Greater(t, end, 0)
	out, err := exec.Command("/bin/sh", "-c", script[start:start+end+3]+"disks\n").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, "/var/tmp/overlays/disk-0.qcow2\n/var/tmp/overlays/disk-1.qcow2\n/var/tmp/overlays/disk-2.qcow2\n", string(out))
	list, err := disksList(m, mappedBlockClaims(m))
	require.NoError(t, err)
	var want strings.Builder
	for i, d := range m.Status.Disks {
		image, tree := fmt.Sprintf("/mnt/disks/disk-%d/disk.img", i), fmt.Sprintf("/mnt/disks/disk-%d/disk.img.tree", i)
		if i == 0 {
			image, tree = "/mnt/disks/disk-0.dev", "-"
		}
		fmt.Fprintf(&want, "disk-%d %s /var/tmp/overlays/disk-%d.qcow2 %d %s\n", i, image, i, d.CapacityBytes, tree)
	}
	assert.Equal(t, want.String(), list)
}

// TestConvertScriptBlockDisk: a disk without a tree file (a device) is
// hashed whole once converted (vm-transfer checksum), the others
// re-hashed where the conversion wrote; guestfish opens every overlay, in
// the domain's order. A file stands in for the device (a test makes no
// block device): the list names no tree for it, as for a device.
func TestConvertScriptBlockDisk(t *testing.T) {
	runs, err := filepath.Abs(v2vFixtures)
	require.NoError(t, err)
	f := newChainFixture(t, 2)
	f.block[1] = true
	f.guestFile(t, "etc/network/interfaces", debianInterfaces)
	run := runConvertScriptWith(t, f.bin, f.config(map[string]string{
		NetworkConfKey: "mode inspect\nnic 00:50:56:aa:bb:01 192.168.10.21 ens192\n", GuestNetworkScriptKey: guestNetworkScript}),
		f.env(filepath.Join(runs, "debian-bios"))...)
	require.Equal(t, 0, run.exitCode, "the conversion script's output:\n%s", run.output)

	got := run.observe()
	require.Len(t, got.Checksums, 2, "termination message %q", run.termination)
	for i, c := range got.Checksums {
		assert.Equal(t, treeOf(t, f.disks[i]).Root(), c.SHA256, "disk %d", i)
	}
	assert.Equal(t, f.sizes[1], got.Checksums[1].Rehashed, "the device without a tree: read whole")
	args, err := os.ReadFile(f.guestfishArgs)
	require.NoError(t, err)
	assert.Equal(t, "--rw --format=qcow2 -a "+f.overlays[0]+" --format=qcow2 -a "+f.overlays[1]+" -i\n", string(args),
		"guestfish opens the overlays, in the domain's order")
}
