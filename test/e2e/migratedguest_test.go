//go:build e2e && conversion

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/test/bootcheck"
	"platform.example/vm-migration/test/builders"
	"platform.example/vm-migration/test/framework"
	"platform.example/vm-migration/test/vcsimlocal"
)

// The test guests' network as VMware has it (hack/guest; the netid
// helper's vcsim reports the same as VMware Tools would): the first NIC,
// ens192 in the guest, holds a static address; the second, ens224, asks
// DHCP.
const (
	guestStaticMAC  = "00:50:56:2a:0b:0c"
	guestDHCPMAC    = "00:50:56:2a:0b:0d"
	guestStaticNIC  = "ens192"
	guestStaticAddr = "192.168.122.10"
	guestGateway    = "192.168.122.1"
	// guestLeasedAddr is the second NIC's DHCP lease on VMware, as
	// VMware Tools would report it: not the guest's to keep.
	guestLeasedAddr = "172.16.40.23"
	// guestMarker starts the line the guests print on their serial
	// console once up (hack/guest/v2v-guest-marker).
	guestMarker = "V2V-GUEST-UP"
)

// guestVariant is a test guest image and the network stack it runs;
// unpinned migrates it with spec.target.preserveStaticIPs false; podOnly
// gives the source VM its static NIC alone, mapped to the pod network.
type guestVariant struct {
	name, firmware, netstack string
	unpinned                 bool
	podOnly                  bool
}

// guestVariants are hack/build-guest-images.sh's guests.
var guestVariants = []guestVariant{
	{name: "bios-ifupdown", firmware: "bios", netstack: "ifupdown"},
	{name: "efi-networkd", firmware: "efi", netstack: "networkd"},
	// Without pinning the guest names its static NIC enp1s0 under
	// KubeVirt, its ens192 configuration applies to nothing, and the
	// check must say the address moved.
	{name: "bios-ifupdown-unpinned", firmware: "bios", netstack: "ifupdown", unpinned: true},
	// Under KubeVirt's own virt-handler (realKubeVirtNode) the NICs are
	// on the pod network alone: its bridge binding, which a Multus NIC
	// gets, needs the dummy link type this machine's kernel lacks
	// (test/integration/kubevirt TestMultusNICUnderKubeVirt). The static
	// NIC is then the VM's only one, on the pod network, where the guest
	// keeps its name of it (pinned) but KubeVirt reports the pod's
	// address: NetworkIdentityPreserved is False, by design.
	{name: "bios-pod", firmware: "bios", netstack: "ifupdown", podOnly: true},
	{name: "efi-pod", firmware: "efi", netstack: "networkd", podOnly: true},
}

// skipReason says why variant g does not run in this suite ("" when it
// does): under KubeVirt's own virt-handler only the pod-network variants
// run, and under the stand-in only the others.
func (g guestVariant) skipReason() string {
	switch {
	case realKubeVirtNode() && !g.podOnly:
		return "KubeVirt's virt-handler runs the guests ($KUBEVIRT_NODE_DIR): a Multus NIC needs its bridge binding, which needs the dummy link type this kernel lacks"
	case !realKubeVirtNode() && g.podOnly:
		return "the pod-network variant runs under KubeVirt's own virt-handler ($KUBEVIRT_NODE_DIR) only"
	}
	return ""
}

// TestMigratedGuestRuns migrates the real Debian guests from vcsim
// through a real transfer pod and a real conversion pod (virt-v2v) to the
// guest running in a launcher pod on the node: the instance Running with
// its guest agent connected (the controller waits for it:
// waitForGuestAgent), status.guestOSInfo naming Debian and its version,
// status.interfaces holding both source MACs as the guest names them, the
// guest's boot marker in the launcher pod's log showing the conversion's
// traces. The first NIC is on a Multus (bridge) network, where a static
// address stays the guest's own; the second on the pod network.
func TestMigratedGuestRuns(t *testing.T) {
	dir, env := guestImages(t)
	wanted := strings.Fields(os.Getenv(envGuestList))
	for _, g := range guestVariants {
		if len(wanted) > 0 && !slices.Contains(wanted, g.firmware) && !slices.Contains(wanted, g.name) {
			continue
		}
		t.Run(g.name, func(t *testing.T) {
			if why := g.skipReason(); why != "" {
				t.Skip(why)
			}
			testMigratedGuest(t, g, filepath.Join(dir, g.firmware+".img"), env)
		})
	}
}

func testMigratedGuest(t *testing.T, g guestVariant, image string, env map[string]string) {
	probeImage := filepath.Join(filepath.Dir(image), "bios.img")
	s := realGuestStack(t, launcherAccelerator(t, framework.Env(t), probeImage))
	disk, err := vcsimlocal.ImageDisk(image)
	require.NoError(t, err, "the guest image %s as a vcsim disk", image)
	name := g.name
	// NetworkDVPG maps to Multus (bridge), NetworkVM to the pod network.
	// VMware Tools reports both NICs' addresses as open-vm-tools on Linux
	// does, without an origin: only the guest's own configuration (read
	// by the conversion) tells static from leased.
	static := vcsimlocal.NICSpec{Network: vcsimlocal.NetworkDVPG, MAC: guestStaticMAC, PCISlot: 192, Guest: &vcsimlocal.GuestNIC{
		Addresses: []vcsimlocal.GuestAddress{{CIDR: guestStaticAddr + "/24"}}, Gateway: guestGateway, DNS: []string{guestGateway}}}
	nics := []vcsimlocal.NICSpec{static, {Network: vcsimlocal.NetworkVM, MAC: guestDHCPMAC, PCISlot: 224, Guest: &vcsimlocal.GuestNIC{
		Addresses: []vcsimlocal.GuestAddress{{CIDR: guestLeasedAddr + "/24"}}}}}
	if g.podOnly {
		static.Network = vcsimlocal.NetworkVM
		nics = []vcsimlocal.NICSpec{static}
	}
	src, err := s.vc.AddVM(s.ctx, vcsimlocal.VMSpec{
		Name: name, Sockets: 1, CoresPerSocket: 1, MemoryMiB: 1024,
		Firmware: g.firmware, SecureBoot: g.firmware == "efi",
		Disks:     []vcsimlocal.DiskSpec{disk},
		NICs:      nics,
		PoweredOn: true,
	})
	require.NoError(t, err, "adding VM %s to vcsim", name)
	start := time.Now()
	m := s.realGuestMigration(name, name)
	builders.WaitForAgent(m)
	if g.unpinned {
		m.Spec.Target.PreserveStaticIPs = ptr.To(false)
	}
	m = s.create(m)
	conv := s.followConversion(t, m, t.TempDir())
	checkSelfView(t, conv.selfView)
	m = s.waitPhase(m.Name, v1alpha1.PhaseSucceeded, 45*time.Minute)
	conv.wait(t)
	t.Logf("migration of the %s guest succeeded in %s", name, time.Since(start).Round(time.Second))
	converted, osName, convAccel := checkConversion(t, m, src, conv.logPath, env)

	vmi := s.waitInstance(name, 10*time.Minute, "Running with its guest agent's OS and interfaces", func(vmi *kubevirtv1.VirtualMachineInstance) bool {
		return vmi.Status.Phase == kubevirtv1.Running && instanceCondition(vmi, kubevirtv1.VirtualMachineInstanceAgentConnected) &&
			vmi.Status.GuestOSInfo.ID != "" && agentNamedInterfaces(vmi) == len(src.MACs)
	})
	boot := s.waitGuestMarker(t, s.launcherPod(vmi), 15*time.Minute)
	t.Logf("launcher pod %s: QEMU (accel %s) to the guest's marker in %s: %s", boot.pod, boot.accel, boot.booted, boot.marker)
	t.Logf("launcher's QEMU command line: %s", boot.qemuLine)
	if !g.unpinned {
		checkGuestMarker(t, boot.fields, g, src.MACs)
	}
	checkGuestAgent(t, vmi, env, src.MACs)
	saveArtifacts(t, g.firmware, conv.logPath, boot.logPath)

	var network string
	switch {
	case g.unpinned:
		network = checkNetworkIdentityLost(t, m, vmi)
	case g.podOnly:
		network = checkNetworkIdentityOnPodNetwork(t, m, vmi)
	default:
		network = checkNetworkIdentity(t, m, vmi)
	}
	chain := checkChecksumChain(t, m)
	t.Logf("conversion ran under %s", convAccel)
	report(t, fmt.Sprintf("real guest: firmware=%s os=%s converted=%ds booted=%ds accel=%s network=%s chain=%s rehashed=%s",
		g.firmware, osName, int(converted.Seconds()), int(boot.booted.Seconds()), boot.accel, network, chain, rehashed(m)))
}

// checkConversion checks the conversion's outcome as TestRealGuest did:
// the transferred bytes, the inspected OS, virt-v2v's steps and warnings.
// It returns the conversion's duration, the OS and the conversion's
// accelerator.
func checkConversion(t *testing.T, m *v1alpha1.VirtualMachineMigration, src *vcsimlocal.VM, logPath string, env map[string]string) (time.Duration, string, string) {
	t.Helper()
	require.NotEmpty(t, m.Status.Disks, "disks in the status of the succeeded migration")
	require.NotNil(t, m.Status.Conversion, "conversion status of the succeeded migration")
	assert.Equal(t, src.Disks[0].SHA256, m.Status.Disks[0].SHA256, "transferred sha256, want the image's")
	wantOS := env["GUEST_DISTRO"] + " " + env["GUEST_VERSION"]
	assert.Equal(t, wantOS, m.Status.Conversion.OperatingSystem, "inspected OS in status, want the guest's /etc/debian_version")
	converted := phaseDuration(t, m, v1alpha1.PhaseTransferringDisks, v1alpha1.PhaseConverting)
	excerpt := conversionExcerpt(t, logPath)
	t.Logf("conversion (%s, status.conversion.operatingSystem=%q), log excerpt:\n%s", converted, m.Status.Conversion.OperatingSystem, excerpt)
	for _, want := range []string{"Converting " + env["GUEST_VERSION"] + " to run on KVM", "This guest has virtio drivers installed.",
		"dpkg --purge open-vm-tools", ".pre-v2v", "update-initramfs"} {
		assert.True(t, strings.Contains(excerpt, want), "the conversion log (excerpt above) lacks %q", want)
	}
	checkWarnings(t, m, logPath)
	return converted, m.Status.Conversion.OperatingSystem, accelerator(t, excerpt)
}

// agentNamedInterfaces counts the instance's interfaces the guest agent
// named.
func agentNamedInterfaces(vmi *kubevirtv1.VirtualMachineInstance) int {
	n := 0
	for _, i := range vmi.Status.Interfaces {
		if i.InfoSource == "domain, guest-agent" && i.InterfaceName != "" {
			n++
		}
	}
	return n
}

// guestBoot is what a launcher pod's log says of the guest's boot.
type guestBoot struct {
	pod, accel, qemuLine, marker string
	fields                       map[string]string
	// booted is the time from QEMU's start to the marker, by the log's
	// timestamps.
	booted  time.Duration
	logPath string
}

// waitGuestMarker polls the launcher pod's log (with the kubelet's
// timestamps) until the guest's marker line is in it, and keeps the log.
func (s *stack) waitGuestMarker(t *testing.T, pod *corev1.Pod, timeout time.Duration) *guestBoot {
	t.Helper()
	var b *guestBoot
	var last string
	// The launcher image of test/images prints the serial console in
	// its own log; KubeVirt's virt-launcher has virt-tail print it in the
	// guest-console-log container's.
	container := pod.Spec.Containers[0].Name
	if realKubeVirtNode() {
		container = "guest-console-log"
	}
	err := wait.PollUntilContextTimeout(s.ctx, 2*time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		raw, err := s.kube.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{
			Container: container, Timestamps: true}).DoRaw(ctx)
		if err != nil {
			return false, nil
		}
		last = string(raw)
		b = parseLauncherLog(last, realKubeVirtNode())
		return b.marker != "", nil
	})
	require.NoError(t, err, "no %s line in launcher pod %s's log within %s; its end:\n%s", guestMarker, pod.Name, timeout, tail(last, 3000))
	b.pod, b.logPath = pod.Name, filepath.Join(t.TempDir(), "launcher.log")
	require.NoError(t, os.WriteFile(b.logPath, []byte(last), 0o644), "keeping the launcher's log")
	return b
}

// parseLauncherLog finds QEMU's start and the guest's marker in a
// launcher log with timestamps. A serial console log of KubeVirt's
// (console true) has no line of QEMU's: its first line, the firmware's
// first output, stands for QEMU's start, and the accelerator is TCG (the
// KubeVirt CR's useEmulation; the node offers no /dev/kvm).
func parseLauncherLog(log string, console bool) *guestBoot {
	b := &guestBoot{}
	var started time.Time
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		ts, line, _ := strings.Cut(sc.Text(), " ")
		at, _ := time.Parse(time.RFC3339Nano, ts)
		if console && started.IsZero() && !at.IsZero() {
			started, b.accel = at, "tcg"
			b.qemuLine = "(KubeVirt's virt-launcher: libvirt's QEMU command line is in its compute container's log)"
		}
		if rest, ok := strings.CutPrefix(line, "launcher: qemu started (pid "); ok && started.IsZero() {
			started = at
			b.qemuLine = line
			if _, after, ok := strings.Cut(rest, "accel "); ok {
				b.accel, _, _ = strings.Cut(after, ")")
			}
		}
		if i := strings.Index(line, guestMarker); i >= 0 && b.marker == "" {
			b.marker = strings.TrimRight(line[i:], "\r")
			b.fields = bootcheck.ParseMarker(b.marker, guestMarker)
			b.booted = at.Sub(started)
		}
	}
	return b
}

// checkGuestMarker checks what the booted guest reports: the firmware it
// booted with, root on virtio, the traces of the conversion (VMware Tools
// gone, the old initrd kept as *.pre-v2v and the new one with virtio), the
// source MACs, its network stack and its guest agent. (virt-v2v installs
// its first-boot service only to install the guest agent at first boot:
// these guests have it, so there is none.)
func checkGuestMarker(t *testing.T, f map[string]string, g guestVariant, macs []string) {
	t.Helper()
	want := map[string]string{
		"firmware": g.firmware, "rootdriver": "virtio_blk", "openvmtools": "absent",
		"initrdvirtio": "yes", "netstack": g.netstack, "agent": "installed",
	}
	if g.firmware == "efi" {
		want["secureboot"] = "1"
	}
	for k, v := range want {
		assert.Equal(t, v, f[k], "guest reports %s", k)
	}
	n, _ := strconv.Atoi(f["prev2v"])
	assert.GreaterOrEqual(t, n, 1, "guest reports prev2v=%q, want the initrd virt-v2v kept", f["prev2v"])
	for _, mac := range macs {
		assert.Contains(t, f["macs"], mac, "guest reports MACs, want the VM's")
	}
	t.Logf("the guest's names of its NICs: %s", f["ifaces"])
}

// checkGuestAgent checks what the instance reports from the guest agent:
// Debian and its version, each source MAC as a guest interface.
func checkGuestAgent(t *testing.T, vmi *kubevirtv1.VirtualMachineInstance, env map[string]string, macs []string) {
	t.Helper()
	osInfo := vmi.Status.GuestOSInfo
	t.Logf("status.guestOSInfo: %+v", osInfo)
	assert.Equal(t, "debian", osInfo.ID, "the guest OS's id")
	assert.Contains(t, osInfo.Name, "Debian", "the guest OS's name")
	major, _, _ := strings.Cut(env["GUEST_VERSION"], ".")
	assert.Equal(t, major, osInfo.VersionID, "the guest OS's version, want /etc/debian_version's major")
	for _, i := range vmi.Status.Interfaces {
		t.Logf("status.interfaces: name=%s interfaceName=%s mac=%s ipAddress=%s ipAddresses=%v infoSource=%q",
			i.Name, i.InterfaceName, i.MAC, i.IP, i.IPs, i.InfoSource)
	}
	byMAC := map[string]kubevirtv1.VirtualMachineInstanceNetworkInterface{}
	for _, i := range vmi.Status.Interfaces {
		byMAC[i.MAC] = i
	}
	for _, mac := range macs {
		i, ok := byMAC[mac]
		if assert.True(t, ok, "status.interfaces lacks the source MAC %s", mac) {
			assert.Equal(t, "domain, guest-agent", i.InfoSource, "interface %s: seen by the domain and the agent", mac)
			assert.NotEmpty(t, i.InterfaceName, "interface %s: the guest's name of it", mac)
			assert.NotEmpty(t, i.Name, "interface %s: the VM's interface of it", mac)
		}
	}
}

// checkNetworkIdentity checks that the conversion pinned the static NIC
// to its VMware name and that the running guest holds its static address
// there again: NetworkIdentityPreserved True, the guest agent reporting
// ens192 with 192.168.122.10 on the Multus interface, the leased address
// of the second NIC not asked for. It returns the verdict for the report.
func checkNetworkIdentity(t *testing.T, m *v1alpha1.VirtualMachineMigration, vmi *kubevirtv1.VirtualMachineInstance) string {
	t.Helper()
	require.NotNil(t, m.Status.Conversion, "conversion status")
	pins := map[string]v1alpha1.InterfacePin{}
	for _, p := range m.Status.Conversion.Interfaces {
		pins[strings.ToLower(p.MAC)] = p
	}
	static := pins[guestStaticMAC]
	assert.Equal(t, guestStaticNIC, static.Name, "the static NIC's name in the guest (status.conversion.interfaces): %+v", static)
	assert.True(t, static.Pinned, "the static NIC pinned to its name: %+v", static)
	assert.Contains(t, static.StaticAddresses, guestStaticAddr, "the guest's configuration read as static: %+v", static)
	assert.NotContains(t, pins[guestDHCPMAC].StaticAddresses, guestLeasedAddr, "the DHCP NIC's lease is not static: %+v", pins[guestDHCPMAC])
	c := condition(m, statemachine.ConditionNetworkIdentityPreserved)
	require.NotNil(t, c, "condition %s on the succeeded migration", statemachine.ConditionNetworkIdentityPreserved)
	t.Logf("%s=%s (%s): %s", c.Type, c.Status, c.Reason, c.Message)
	assert.Equal(t, metav1.ConditionTrue, c.Status, "%s: %s", c.Reason, c.Message)
	assert.Contains(t, c.Message, guestStaticAddr)
	found := false
	for _, i := range vmi.Status.Interfaces {
		if strings.EqualFold(i.MAC, guestStaticMAC) {
			found = true
			assert.Equal(t, guestStaticNIC, i.InterfaceName, "the guest's name of the static NIC under KubeVirt")
			assert.Contains(t, i.IPs, guestStaticAddr, "the static NIC's addresses under KubeVirt")
		}
	}
	assert.True(t, found, "status.interfaces lacks %s", guestStaticMAC)
	if c.Status != metav1.ConditionTrue {
		return "lost"
	}
	return "preserved"
}

// checkNetworkIdentityOnPodNetwork checks the pod-network variant, whose
// static NIC is its only one, on the pod network: the conversion pinned it
// (the guest names it ens192 under KubeVirt, as virt-handler reports from
// the guest agent), but virt-handler reports the pod's address on a pod
// network interface, not the guest's (KubeVirt's netstat: the pod's
// addresses win over the agent's, per family; the guest sits behind
// masquerade), so NetworkIdentityPreserved is False, naming the static
// address and the pod network. This is what the real virt-handler
// reported on this machine; the stand-in's networkStatus does the same.
func checkNetworkIdentityOnPodNetwork(t *testing.T, m *v1alpha1.VirtualMachineMigration, vmi *kubevirtv1.VirtualMachineInstance) string {
	t.Helper()
	require.NotNil(t, m.Status.Conversion, "conversion status")
	var static v1alpha1.InterfacePin
	for _, p := range m.Status.Conversion.Interfaces {
		if strings.EqualFold(p.MAC, guestStaticMAC) {
			static = p
		}
	}
	assert.Equal(t, guestStaticNIC, static.Name, "the static NIC's name in the guest (status.conversion.interfaces): %+v", static)
	assert.True(t, static.Pinned, "the static NIC pinned to its name: %+v", static)
	assert.Contains(t, static.StaticAddresses, guestStaticAddr, "the guest's configuration read as static: %+v", static)
	found := false
	for _, i := range vmi.Status.Interfaces {
		if strings.EqualFold(i.MAC, guestStaticMAC) {
			found = true
			assert.Equal(t, guestStaticNIC, i.InterfaceName, "the guest's name of the static NIC under KubeVirt (pinned)")
			assert.Equal(t, "domain, guest-agent", i.InfoSource, "the static NIC seen by the domain and the agent")
			assert.NotContains(t, i.IPs, guestStaticAddr, "a pod network interface's addresses are the pod's")
		}
	}
	assert.True(t, found, "status.interfaces lacks %s", guestStaticMAC)
	c := condition(m, statemachine.ConditionNetworkIdentityPreserved)
	require.NotNil(t, c, "condition %s on the succeeded migration", statemachine.ConditionNetworkIdentityPreserved)
	t.Logf("%s=%s (%s): %s", c.Type, c.Status, c.Reason, c.Message)
	assert.Equal(t, metav1.ConditionFalse, c.Status, "a static address on the pod network does not stay the VM's: %s", c.Message)
	assert.Equal(t, statemachine.ReasonAddressesMoved, c.Reason)
	assert.Contains(t, c.Message, guestStaticAddr)
	assert.Contains(t, c.Message, "on the pod network")
	return "lost"
}

// checkNetworkIdentityLost checks the migration without pinning: the
// conversion only looked (the static NIC found as ens192, not pinned),
// the guest names the NIC otherwise under KubeVirt and has no address
// on it, and NetworkIdentityPreserved is False naming the address that
// moved. It returns the verdict for the report.
func checkNetworkIdentityLost(t *testing.T, m *v1alpha1.VirtualMachineMigration, vmi *kubevirtv1.VirtualMachineInstance) string {
	t.Helper()
	require.NotNil(t, m.Status.Conversion, "conversion status")
	for _, p := range m.Status.Conversion.Interfaces {
		assert.False(t, p.Pinned, "nothing pinned with preserveStaticIPs false: %+v", p)
		if strings.EqualFold(p.MAC, guestStaticMAC) {
			assert.Equal(t, guestStaticNIC, p.Name, "the static NIC's name, as the conversion found it")
			assert.Contains(t, p.StaticAddresses, guestStaticAddr, "the guest's configuration read as static")
		}
	}
	for _, i := range vmi.Status.Interfaces {
		if strings.EqualFold(i.MAC, guestStaticMAC) {
			assert.NotEqual(t, guestStaticNIC, i.InterfaceName, "unpinned, the guest names the NIC as KubeVirt's bus gives it")
			assert.NotContains(t, i.IPs, guestStaticAddr)
		}
	}
	c := condition(m, statemachine.ConditionNetworkIdentityPreserved)
	require.NotNil(t, c, "condition %s on the succeeded migration", statemachine.ConditionNetworkIdentityPreserved)
	t.Logf("%s=%s (%s): %s", c.Type, c.Status, c.Reason, c.Message)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, statemachine.ReasonAddressesMoved, c.Reason)
	assert.Contains(t, c.Message, guestStaticAddr+" (ens192 on VMware, MAC "+guestStaticMAC+")")
	if c.Status == metav1.ConditionFalse {
		return "lost"
	}
	return "preserved"
}

// checkChecksumChain checks every disk's chain: the converted image
// hashed by the conversion pod, the target claim read back by the
// verification pod, equal and verified before the VM started. It returns
// the outcome for the report.
func checkChecksumChain(t *testing.T, m *v1alpha1.VirtualMachineMigration) string {
	t.Helper()
	require.NotEmpty(t, m.Status.Disks)
	ok := true
	for _, d := range m.Status.Disks {
		c := d.Checksums
		if !assert.NotNil(t, c, "disk %s: no checksums", d.Name) {
			return "missing"
		}
		t.Logf("disk %s: transferred %s, converted %s (%d bytes, %d re-hashed), target %s (%d bytes), compared %s", d.Name, d.SHA256, c.Converted, c.ConvertedBytes, c.RehashedBytes, c.Target, c.TargetBytes, c.Compared)
		ok = assert.NotEmpty(t, c.Converted, "disk %s: converted checksum", d.Name) && ok
		ok = assert.NotEqual(t, d.SHA256, c.Converted, "disk %s: the real conversion changes the guest's disk", d.Name) && ok
		ok = assert.Equal(t, c.Converted, c.Target, "disk %s: target checksum, want the converted one", d.Name) && ok
		ok = assert.NotNil(t, c.VerifiedAt, "disk %s: verified before the start", d.Name) && ok
	}
	if !ok {
		return "broken"
	}
	return "verified"
}

// rehashed is what the conversion read again to give each disk its
// converted checksum, in MiB and as a share of the disk ("0=12.0MiB/0.6%"):
// only the blocks it wrote, not the whole image.
func rehashed(m *v1alpha1.VirtualMachineMigration) string {
	var parts []string
	for i, d := range m.Status.Disks {
		if d.Checksums == nil || d.Checksums.ConvertedBytes == 0 {
			parts = append(parts, fmt.Sprintf("%d=unknown", i))
			continue
		}
		c := d.Checksums
		parts = append(parts, fmt.Sprintf("%d=%.1fMiB/%.1f%%", i, float64(c.RehashedBytes)/(1<<20), 100*float64(c.RehashedBytes)/float64(c.ConvertedBytes)))
	}
	return strings.Join(parts, ",")
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
