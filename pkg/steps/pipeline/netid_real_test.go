//go:build conversion

package pipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// tcg keeps libguestfs' appliance under TCG: its kernel does not run on
// every /dev/kvm of these machines.
var tcg = []string{"LIBGUESTFS_BACKEND=direct", "LIBGUESTFS_BACKEND_SETTINGS=force_tcg"}

// TestRealV2VReadsTheNetworkIdentity: the installed virt-v2v-in-place
// reads every NIC of the rendered domain XML (MAC, network, model) and
// takes the rendered --mac arguments of a Windows guest's static
// addresses (it refuses, for example, an empty gateway).
func TestRealV2VReadsTheNetworkIdentity(t *testing.T) {
	_, err := exec.LookPath("virt-v2v-in-place")
	require.NoError(t, err, "virt-v2v-in-place is not installed: run hack/install-conversion-deps.sh")
	m := windowsEFI()
	dom, err := RenderDomainXML(m, nil)
	require.NoError(t, err)
	staged := t.TempDir()
	for i, d := range m.Status.Disks {
		img := filepath.Join(staged, diskNameAt(d, i), ImageFile)
		require.NoError(t, os.MkdirAll(filepath.Dir(img), 0o755))
		require.NoError(t, os.WriteFile(img, nil, 0o644))
		require.NoError(t, os.Truncate(img, 1<<20))
	}
	domain := filepath.Join(t.TempDir(), DomainXMLKey)
	require.NoError(t, os.WriteFile(domain, []byte(strings.ReplaceAll(string(dom), disksRoot+"/", staged+"/")), 0o644))

	extra, err := v2vArgs(m)
	require.NoError(t, err)
	args := append(extra, "-i", "libvirtxml", domain, "--print-source")
	cmd := exec.Command("virt-v2v-in-place", args...)
	cmd.Env = append(os.Environ(), tcg...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "virt-v2v-in-place %s:\n%s", strings.Join(args, " "), out)
	t.Logf("virt-v2v-in-place --print-source:\n%s", out)
	assert.Contains(t, string(out), `Network "Prod-VLAN20" mac: 00:50:56:9a:01:02 [vmxnet3]`)
	assert.Contains(t, string(out), `Network "Backup" mac: 00:50:56:9a:01:03 [e1000e]`)
}

// TestRealGuestNetworkPinning runs the conversion script's guest network
// step with the real guestfish inside a copy of the Debian BIOS guest
// (hack/build-guest-images.sh), its /etc/network/interfaces as a VMware
// guest's (ens192 static, ens224 on DHCP), after a replayed successful
// virt-v2v: the names are found and pinned with .link files, and the
// checksum is that of the disk as left (pinned).
func TestRealGuestNetworkPinning(t *testing.T) {
	_, err := exec.LookPath("guestfish")
	require.NoError(t, err, "guestfish is not installed: run hack/install-conversion-deps.sh")
	dir := os.Getenv("GUEST_IMAGES")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "_output", "guests")
	}
	src := filepath.Join(dir, "bios.img")
	_, err = os.Stat(src)
	require.NoError(t, err, "no guest image (run hack/build-guest-images.sh, or set GUEST_IMAGES)")
	disk := filepath.Join(t.TempDir(), "disk-0", ImageFile)
	require.NoError(t, os.MkdirAll(filepath.Dir(disk), 0o755))
	out, err := exec.Command("cp", "--sparse=always", src, disk).CombinedOutput()
	require.NoError(t, err, "copying the guest image: %s", out)
	require.NoError(t, os.Chmod(disk, 0o644))
	guestfish(t, disk, true, "mkdir-p /etc/network\nwrite /etc/network/interfaces \""+strings.ReplaceAll(debianInterfaces, "\n", "\\n")+"\"\n")

	runs, err := filepath.Abs(v2vFixtures)
	require.NoError(t, err)
	conf := "mode pin\nnic 00:50:56:aa:bb:01 192.168.10.21 ens192\nnic 00:50:56:aa:bb:02 - ens224\nnic 00:50:56:aa:bb:03 10.1.1.1 -\n"
	domain := `<domain type="kvm"><name>web-01</name><devices><disk type="file" device="disk"><driver name="qemu" type="raw"></driver>` +
		`<source file="` + disk + `"></source><target dev="sda" bus="scsi"></target></disk></devices></domain>`
	run := runConvertScriptWith(t, fakeV2VOnly(t), map[string]string{DomainXMLKey: domain, NetworkConfKey: conf,
		GuestNetworkScriptKey: guestNetworkScript},
		append(tcg, "FAKE_V2V_RUN="+filepath.Join(runs, "debian-bios"), "FAKE_V2V_VERSION=2.2")...)
	require.Equal(t, 0, run.exitCode, "the conversion script:\n%s", run.output)
	got := run.observe()
	assert.Equal(t, []v1alpha1.InterfacePin{
		{MAC: "00:50:56:aa:bb:01", Name: "ens192", Source: v1alpha1.PinSourceAddress, Pinned: true, StaticAddresses: []string{"192.168.10.21"}},
		{MAC: "00:50:56:aa:bb:02", Name: "ens224", Source: v1alpha1.PinSourcePCISlot, Pinned: true},
		{MAC: "00:50:56:aa:bb:03", Message: "no network configuration in the guest names this NIC"},
	}, got.Interfaces, "termination message %q", run.termination)

	links := guestfish(t, disk, false, "cat /etc/systemd/network/10-vm-migration-005056aabb01.link\n"+
		"cat /etc/systemd/network/10-vm-migration-005056aabb02.link\n-is-file /tmp/vm-migration-network.sh\n")
	t.Logf("in the guest:\n%s", links)
	assert.Contains(t, links, "MACAddress=00:50:56:aa:bb:01\n\n[Link]\nName=ens192\n")
	assert.Contains(t, links, "MACAddress=00:50:56:aa:bb:02\n\n[Link]\nName=ens224\n")
	assert.True(t, strings.HasSuffix(strings.TrimSpace(links), "false"), "the script is gone from the guest")

	f, err := os.Open(disk)
	require.NoError(t, err)
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	require.NoError(t, err)
	require.Len(t, got.Checksums, 1)
	assert.Equal(t, hex.EncodeToString(h.Sum(nil)), got.Checksums[0].SHA256, "the checksum is taken after the pinning")
	assert.Equal(t, n, got.Checksums[0].Size)
}

// fakeV2VOnly is a PATH directory with the virt-v2v-in-place double only:
// guestfish is the installed one.
func fakeV2VOnly(t *testing.T) string {
	t.Helper()
	bin := fakeV2VBin(t)
	return bin + ":/usr/bin:/bin"
}

// guestfish runs a guestfish script on the guest disk (inspected and
// mounted, read-write with rw: mounting so changes the disk's bytes) and
// returns its output.
func guestfish(t *testing.T, disk string, rw bool, script string) string {
	t.Helper()
	mode := "--ro"
	if rw {
		mode = "--rw"
	}
	cmd := exec.Command("guestfish", mode, "--format=raw", "-a", disk, "-i")
	cmd.Stdin = strings.NewReader(script)
	cmd.Env = append(os.Environ(), tcg...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "guestfish:\n%s", out)
	return string(out)
}
