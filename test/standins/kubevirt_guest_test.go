package standins

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"platform.example/vm-migration/test/images/launcher"
)

// twoNICs is an instance with a Multus (bridge) interface net-0 and a pod
// network (masquerade) interface net-1, as the controller renders a
// two-NIC VM.
func twoNICs() *kubevirtv1.VirtualMachineInstanceSpec {
	return &kubevirtv1.VirtualMachineInstanceSpec{
		Networks: []kubevirtv1.Network{
			{Name: "net-0", NetworkSource: kubevirtv1.NetworkSource{Multus: &kubevirtv1.MultusNetwork{NetworkName: "default/vlan"}}},
			{Name: "net-1", NetworkSource: kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}}},
		},
	}
}

var domainNICs = []launcher.DomainInterface{{Name: "net-0", MAC: "00:50:56:2a:0b:0c"}, {Name: "net-1", MAC: "00:50:56:2a:0b:0d"}}

func TestNetworkStatus(t *testing.T) {
	ens192 := launcher.GuestInterface{Name: "ens192", HardwareAddress: "00:50:56:2A:0B:0C", IPAddresses: []launcher.GuestIPAddress{
		{Type: "ipv4", Address: "192.168.122.10", Prefix: 24}, {Type: "ipv6", Address: "fe80::250:56ff:fe2a:b0c", Prefix: 64}}}
	ens224 := launcher.GuestInterface{Name: "ens224", HardwareAddress: "00:50:56:2a:0b:0d", IPAddresses: []launcher.GuestIPAddress{
		{Type: "ipv4", Address: "10.0.2.2", Prefix: 24}, {Type: "ipv6", Address: "fe80::250:56ff:fe2a:b0d", Prefix: 64}}}
	lo := launcher.GuestInterface{Name: "lo", HardwareAddress: "00:00:00:00:00:00", IPAddresses: []launcher.GuestIPAddress{{Type: "ipv4", Address: "127.0.0.1", Prefix: 8}}}
	extra := launcher.GuestInterface{Name: "docker0", HardwareAddress: "02:42:ac:11:00:01", IPAddresses: []launcher.GuestIPAddress{{Type: "ipv6", Address: "fd00::1", Prefix: 64}, {Type: "ipv4", Address: "172.17.0.1", Prefix: 16}}}
	tests := map[string]struct {
		agent launcher.AgentStatus
		want  []kubevirtv1.VirtualMachineInstanceNetworkInterface
	}{
		"no agent: the domain's interfaces, the pod's IP on the pod network's, first": {
			want: []kubevirtv1.VirtualMachineInstanceNetworkInterface{
				{Name: "net-1", MAC: "00:50:56:2a:0b:0d", IP: "198.19.3.7", IPs: []string{"198.19.3.7"}, InfoSource: "domain", QueueCount: 1, LinkState: "up"},
				{Name: "net-0", MAC: "00:50:56:2a:0b:0c", InfoSource: "domain", QueueCount: 1, LinkState: "up"},
			},
		},
		"agent: names and addresses merged by MAC; the pod's IPv4 wins on the pod network; no loopback; an interface of no domain MAC": {
			agent: launcher.AgentStatus{Connected: true, Interfaces: []launcher.GuestInterface{lo, ens192, ens224, extra}},
			want: []kubevirtv1.VirtualMachineInstanceNetworkInterface{
				{Name: "net-1", MAC: "00:50:56:2a:0b:0d", InterfaceName: "ens224", IP: "198.19.3.7", IPs: []string{"198.19.3.7", "fe80::250:56ff:fe2a:b0d"},
					InfoSource: "domain, guest-agent", QueueCount: 1, LinkState: "up"},
				{Name: "net-0", MAC: "00:50:56:2a:0b:0c", InterfaceName: "ens192", IP: "192.168.122.10", IPs: []string{"192.168.122.10", "fe80::250:56ff:fe2a:b0c"},
					InfoSource: "domain, guest-agent", QueueCount: 1, LinkState: "up"},
				{MAC: "02:42:ac:11:00:01", InterfaceName: "docker0", IP: "172.17.0.1", IPs: []string{"fd00::1", "172.17.0.1"}, InfoSource: "guest-agent"},
			},
		},
		"agent: a guest that named its NICs otherwise and configured none (no static address applied)": {
			agent: launcher.AgentStatus{Connected: true, Interfaces: []launcher.GuestInterface{
				{Name: "enp1s0", HardwareAddress: "00:50:56:2a:0b:0c"}, {Name: "enp2s0", HardwareAddress: "00:50:56:2a:0b:0d"}}},
			want: []kubevirtv1.VirtualMachineInstanceNetworkInterface{
				{Name: "net-1", MAC: "00:50:56:2a:0b:0d", InterfaceName: "enp2s0", InfoSource: "domain, guest-agent", QueueCount: 1, LinkState: "up"},
				{Name: "net-0", MAC: "00:50:56:2a:0b:0c", InterfaceName: "enp1s0", InfoSource: "domain, guest-agent", QueueCount: 1, LinkState: "up"},
			},
		},
		"an agent that disconnected is not heard": {
			agent: launcher.AgentStatus{Connected: false, Interfaces: []launcher.GuestInterface{ens192}},
			want: []kubevirtv1.VirtualMachineInstanceNetworkInterface{
				{Name: "net-1", MAC: "00:50:56:2a:0b:0d", IP: "198.19.3.7", IPs: []string{"198.19.3.7"}, InfoSource: "domain", QueueCount: 1, LinkState: "up"},
				{Name: "net-0", MAC: "00:50:56:2a:0b:0c", InfoSource: "domain", QueueCount: 1, LinkState: "up"},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := networkStatus(twoNICs(), domainNICs, []string{"198.19.3.7"}, tc.agent)
			assert.Equal(t, tc.want, got, "status.interfaces")
		})
	}
}

func TestGuestOSInfo(t *testing.T) {
	osInfo := &launcher.GuestOSInfo{ID: "debian", Name: "Debian GNU/Linux", PrettyName: "Debian GNU/Linux 12 (bookworm)", Version: "12 (bookworm)",
		VersionID: "12", KernelRelease: "6.1.0-41-amd64", KernelVersion: "#1 SMP PREEMPT_DYNAMIC Debian 6.1.158-1", Machine: "x86_64"}
	assert.Equal(t, kubevirtv1.VirtualMachineInstanceGuestOSInfo{ID: "debian", Name: "Debian GNU/Linux", PrettyName: "Debian GNU/Linux 12 (bookworm)",
		Version: "12 (bookworm)", VersionID: "12", KernelRelease: "6.1.0-41-amd64", KernelVersion: "#1 SMP PREEMPT_DYNAMIC Debian 6.1.158-1", Machine: "x86_64"},
		guestOSInfo(launcher.AgentStatus{Connected: true, OSInfo: osInfo}), "status.guestOSInfo of a connected agent")
	assert.Zero(t, guestOSInfo(launcher.AgentStatus{OSInfo: osInfo}), "no guestOSInfo without a connected agent")
}

// TestGuestStatusKeepsVirtControllersPodInterfaceNames: beside the real
// virt-controller, which names each interface's pod interface (eth0, a
// Multus hash), the guest's report keeps those names.
func TestGuestStatusKeepsVirtControllersPodInterfaceNames(t *testing.T) {
	st := &kubevirtv1.VirtualMachineInstanceStatus{Interfaces: []kubevirtv1.VirtualMachineInstanceNetworkInterface{
		{Name: "net-1", PodInterfaceName: "eth0"}, {Name: "net-0", PodInterfaceName: "pod16477688c0e"}}}
	pod := &corev1.Pod{Status: corev1.PodStatus{PodIPs: []corev1.PodIP{{IP: "198.19.3.7"}}}}
	setGuestStatus(st, twoNICs(), pod, &launcher.Status{QEMU: launcher.QEMUStatus{Interfaces: domainNICs}})
	assert.Equal(t, []kubevirtv1.VirtualMachineInstanceNetworkInterface{
		{Name: "net-1", MAC: "00:50:56:2a:0b:0d", IP: "198.19.3.7", IPs: []string{"198.19.3.7"}, InfoSource: "domain", QueueCount: 1, LinkState: "up", PodInterfaceName: "eth0"},
		{Name: "net-0", MAC: "00:50:56:2a:0b:0c", InfoSource: "domain", QueueCount: 1, LinkState: "up", PodInterfaceName: "pod16477688c0e"},
	}, st.Interfaces)
	assert.Len(t, st.Conditions, 1, "AgentConnected")
	assert.Equal(t, kubevirtv1.VirtualMachineInstanceAgentConnected, st.Conditions[0].Type)
}
