package pipeline

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/blocktree"
	"platform.example/vm-migration/pkg/statemachine"
)

// chainFixture is a conversion's inputs for the chain tests: staged disks
// with known bytes and the block trees the transfer left beside them,
// the domain XML naming their overlays, the disks list, a fake guestfish
// beside the fake virt-v2v, and a guest tree for it.
type chainFixture struct {
	bin, root, guestfishArgs string
	disks, overlays          []string
	sizes                    []int64
	// block marks the disks given as devices: without a tree file.
	block map[int]bool
}

func newChainFixture(t *testing.T, disks int) *chainFixture {
	t.Helper()
	requireQemuImg(t)
	f := &chainFixture{bin: fakeV2VBin(t), root: t.TempDir(), guestfishArgs: filepath.Join(t.TempDir(), "guestfish-args"), block: map[int]bool{}}
	fake, err := filepath.Abs(filepath.Join(v2vFixtures, "fake-guestfish"))
	require.NoError(t, err)
	require.NoError(t, os.Symlink(fake, filepath.Join(f.bin, "guestfish")), "putting the guestfish double on the PATH")
	staging, overlays := t.TempDir(), t.TempDir()
	for i := range disks {
		dir := filepath.Join(staging, fmt.Sprintf("disk-%d", i))
		require.NoError(t, os.MkdirAll(dir, 0o755))
		// Whole sectors, as a disk is: 64 KiB and i more 512-byte ones.
		data := []byte(strings.Repeat(fmt.Sprintf("disk %04d;", i), (64<<10+512*i)/10+1))[:64<<10+512*i]
		img := filepath.Join(dir, ImageFile)
		require.NoError(t, os.WriteFile(img, data, 0o644))
		writeTree(t, img)
		f.disks, f.sizes = append(f.disks, img), append(f.sizes, int64(len(data)))
		f.overlays = append(f.overlays, filepath.Join(overlays, fmt.Sprintf("disk-%d.qcow2", i)))
	}
	return f
}

// writeTree writes the block tree of the image at path beside it, as the
// transfer leaves it.
func writeTree(t *testing.T, path string) {
	t.Helper()
	tree := treeOf(t, path)
	out, err := os.Create(path + TreeSuffix)
	require.NoError(t, err)
	_, err = tree.WriteTo(out)
	require.NoError(t, err)
	require.NoError(t, out.Close())
}

// treeOf is the block tree of the file at path.
func treeOf(t *testing.T, path string) *blocktree.Tree {
	t.Helper()
	img, err := os.Open(path)
	require.NoError(t, err)
	defer img.Close()
	info, err := img.Stat()
	require.NoError(t, err)
	tree, _, err := blocktree.Compute(context.Background(), img, info.Size(), blocktree.Options{})
	require.NoError(t, err)
	return tree
}

// domain is a domain XML naming the fixture's overlays, as RenderDomainXML
// writes them (double quotes).
func (f *chainFixture) domain() string {
	var b strings.Builder
	b.WriteString(`<domain type="kvm"><name>web-01</name><devices>`)
	for i, o := range f.overlays {
		fmt.Fprintf(&b, "\n  <disk type=\"file\" device=\"disk\"><driver name=\"qemu\" type=\"qcow2\"></driver><source file=\"%s\"></source><target dev=\"sd%c\" bus=\"scsi\"></target></disk>", o, 'a'+i)
	}
	b.WriteString("\n</devices></domain>\n")
	return b.String()
}

// list is the disks list (DisksListKey) of the fixture's disks.
func (f *chainFixture) list() string {
	var b strings.Builder
	for i, d := range f.disks {
		tree := d + TreeSuffix
		if f.block[i] {
			tree = "-"
		}
		fmt.Fprintf(&b, "disk-%d %s %s %d %s\n", i, d, f.overlays[i], f.sizes[i], tree)
	}
	return b.String()
}

// config is the conversion ConfigMap's files: the domain, the disks list
// and those given.
func (f *chainFixture) config(files map[string]string) map[string]string {
	out := map[string]string{DomainXMLKey: f.domain(), DisksListKey: f.list()}
	for k, v := range files {
		out[k] = v
	}
	return out
}

// guestFile writes a file of the guest tree.
func (f *chainFixture) guestFile(t *testing.T, name, data string) {
	t.Helper()
	p := filepath.Join(f.root, name)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(data), 0o644))
}

func (f *chainFixture) env(run string, extra ...string) []string {
	return append([]string{"FAKE_V2V_RUN=" + run, "FAKE_V2V_VERSION=2.2",
		"FAKE_GUEST_ROOT=" + f.root, "FAKE_GUESTFISH_ARGS=" + f.guestfishArgs,
		// The conversion's writes: 4 KiB of 0x5a at 4096 in the first disk.
		"FAKE_V2V_WRITE=" + f.overlays[0] + ":4096:4096"}, extra...)
}

const debianInterfaces = `auto lo
iface lo inet loopback

auto ens192
iface ens192 inet static
    address 192.168.10.21/24
    gateway 192.168.10.1

allow-hotplug ens224
iface ens224 inet dhcp
`

// TestConvertScriptChain: once virt-v2v succeeded, the conversion script
// looks the NICs up in the guest (guestfish), pins their names, hashes
// every converted disk, and the controller reads both back from the
// termination message, in front of the inspection and the warnings.
func TestConvertScriptChain(t *testing.T) {
	runs, err := filepath.Abs(v2vFixtures)
	require.NoError(t, err)
	f := newChainFixture(t, 3)
	f.guestFile(t, "etc/network/interfaces", debianInterfaces)
	conf := "mode pin\nnic 00:50:56:aa:bb:01 192.168.10.21 ens192\nnic 00:50:56:aa:bb:02 - ens224\nnic 00:50:56:aa:bb:03 10.9.9.9 -\n"
	before := treeOf(t, f.disks[1])
	run := runConvertScriptWith(t, f.bin, f.config(map[string]string{
		NetworkConfKey: conf, GuestNetworkScriptKey: guestNetworkScript,
		V2VArgsKey: "--mac=00:50:56:aa:bb:01:ip:192.168.10.21,192.168.10.1,24\n",
	}), f.env(filepath.Join(runs, "debian-bios"))...)
	require.Equal(t, 0, run.exitCode, "the conversion script's output:\n%s", run.output)
	assert.Contains(t, run.args, "-v --mac=00:50:56:aa:bb:01:ip:192.168.10.21,192.168.10.1,24", "virt-v2v.args reach virt-v2v-in-place")

	got := run.observe()
	assert.Equal(t, "debian 12.15", got.OperatingSystem, "the inspection still reads after the chain lines")
	assert.Equal(t, []string{grubWarning}, got.Warnings)
	require.Len(t, got.Checksums, 3, "termination message %q", run.termination)
	for i, c := range got.Checksums {
		after := treeOf(t, f.disks[i])
		rehashed := int64(0)
		if i == 0 {
			rehashed = f.sizes[0] // the block the conversion wrote into: the whole small disk
			data, err := os.ReadFile(f.disks[0])
			require.NoError(t, err)
			assert.Equal(t, strings.Repeat("\x5a", 4096), string(data[4096:8192]), "the overlay committed into the image")
		}
		assert.Equal(t, statemachine.ImageChecksum{Disk: fmt.Sprintf("disk-%d", i), Bytes: f.sizes[i], Size: f.sizes[i], SHA256: after.Root(), Rehashed: rehashed}, c,
			"disk %d: the root of the converted image, re-hashed where the conversion wrote", i)
		stored, err := os.ReadFile(f.disks[i] + TreeSuffix)
		require.NoError(t, err)
		assert.Contains(t, string(stored), "root="+after.Root(), "disk %d: the tree beside the image is the converted one", i)
		_, err = os.Stat(f.overlays[i])
		assert.True(t, os.IsNotExist(err), "disk %d: the overlay is gone once committed", i)
	}
	assert.Equal(t, before.Root(), got.Checksums[1].SHA256, "a disk the conversion did not write keeps its transferred root")
	assert.Equal(t, []v1alpha1.InterfacePin{
		{MAC: "00:50:56:aa:bb:01", Name: "ens192", Source: v1alpha1.PinSourceAddress, Pinned: true, StaticAddresses: []string{"192.168.10.21"}},
		{MAC: "00:50:56:aa:bb:02", Name: "ens224", Source: v1alpha1.PinSourcePCISlot, Pinned: true},
		{MAC: "00:50:56:aa:bb:03", Message: "no network configuration in the guest names this NIC"},
	}, got.Interfaces)
	link, err := os.ReadFile(filepath.Join(f.root, "etc/systemd/network/10-vm-migration-005056aabb01.link"))
	require.NoError(t, err, "the .link file in the guest")
	assert.Contains(t, string(link), "[Match]\nMACAddress=00:50:56:aa:bb:01\n\n[Link]\nName=ens192\n")
	_, err = os.Stat(filepath.Join(f.root, "tmp/vm-migration-network.sh"))
	assert.True(t, os.IsNotExist(err), "the script is removed from the guest")

	args, err := os.ReadFile(f.guestfishArgs)
	require.NoError(t, err)
	want := "--rw"
	for _, o := range f.overlays {
		want += " --format=qcow2 -a " + o
	}
	assert.Equal(t, want+" -i\n", string(args), "guestfish opens every disk of the domain, read-write, and inspects the guest")
}

// TestConvertScriptChainFallbacks: with pinning off the guest is only
// looked at; a guest guestfish cannot open is said per NIC; a failed
// conversion hashes nothing and runs no guestfish.
func TestConvertScriptChainFallbacks(t *testing.T) {
	runs, err := filepath.Abs(v2vFixtures)
	require.NoError(t, err)
	conf := "nic 00:50:56:aa:bb:01 192.168.10.21 ens192\n"

	t.Run("inspect only", func(t *testing.T) {
		f := newChainFixture(t, 1)
		f.guestFile(t, "etc/network/interfaces", debianInterfaces)
		run := runConvertScriptWith(t, f.bin, f.config(map[string]string{
			NetworkConfKey: "mode inspect\n" + conf, GuestNetworkScriptKey: guestNetworkScript}), f.env(filepath.Join(runs, "debian-bios"))...)
		got := run.observe()
		assert.Equal(t, []v1alpha1.InterfacePin{{MAC: "00:50:56:aa:bb:01", Name: "ens192", Source: v1alpha1.PinSourceAddress,
			StaticAddresses: []string{"192.168.10.21"}}}, got.Interfaces)
		_, err := os.Stat(filepath.Join(f.root, "etc/systemd/network"))
		assert.True(t, os.IsNotExist(err), "nothing written into the guest")
		assert.Len(t, got.Checksums, 1)
	})
	t.Run("guestfish cannot open the guest", func(t *testing.T) {
		f := newChainFixture(t, 1)
		run := runConvertScriptWith(t, f.bin, f.config(map[string]string{
			NetworkConfKey: "mode pin\n" + conf, GuestNetworkScriptKey: guestNetworkScript}),
			f.env(filepath.Join(runs, "debian-bios"), "FAKE_GUESTFISH_FAIL=guestfish: no operating system was found on this disk")...)
		require.Equal(t, 0, run.exitCode, "the conversion itself succeeded")
		got := run.observe()
		assert.Equal(t, []v1alpha1.InterfacePin{{MAC: "00:50:56:aa:bb:01", GuestUnreadable: true,
			Message: "guestfish could not look into the guest: guestfish: no operating system was found on this disk"}}, got.Interfaces)
		assert.Len(t, got.Checksums, 1, "the disks are hashed all the same")
	})
	t.Run("a failed conversion", func(t *testing.T) {
		f := newChainFixture(t, 1)
		run := runConvertScriptWith(t, f.bin, f.config(map[string]string{
			NetworkConfKey: "mode pin\n" + conf, GuestNetworkScriptKey: guestNetworkScript}), f.env(filepath.Join(runs, "blank"))...)
		require.Equal(t, 1, run.exitCode)
		assert.NotContains(t, run.termination, "tree ")
		assert.NotContains(t, run.termination, "nic ")
		_, err := os.Stat(f.guestfishArgs)
		assert.True(t, os.IsNotExist(err), "guestfish never ran")
		assert.Equal(t, statemachine.ConversionInspectionFailed, run.observe().Reason)
	})
}

// TestConversionChainOverflow: the first maxConvertedChecksums disks are
// hashed; with them, NICs, inspection and warnings, the message stays
// within the kubelet's 4 KiB for the NICs a VM has.
func TestConversionChainOverflow(t *testing.T) {
	runs, err := filepath.Abs(v2vFixtures)
	require.NoError(t, err)
	f := newChainFixture(t, maxConvertedChecksums+2)
	var conf strings.Builder
	conf.WriteString("mode pin\n")
	for i := range 10 {
		fmt.Fprintf(&conf, "nic 00:50:56:aa:bb:%02x 10.0.%d.5 -\n", i, i)
	}
	run := runConvertScriptWith(t, f.bin, f.config(map[string]string{NetworkConfKey: conf.String(),
		GuestNetworkScriptKey: guestNetworkScript}), f.env(filepath.Join(runs, "debian-bios"))...)
	got := run.observe()
	assert.Len(t, got.Checksums, maxConvertedChecksums)
	assert.Len(t, got.Interfaces, 10)
	assert.LessOrEqual(t, len(run.termination), 4096, "the termination message the kubelet keeps whole")
	assert.Equal(t, "debian 12.15", got.OperatingSystem)
}
