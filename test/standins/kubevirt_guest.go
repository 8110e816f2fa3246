package standins

import (
	"net"
	"slices"
	"strings"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"platform.example/vm-migration/test/images/launcher"
)

// What virt-handler reports of a running guest, from what the launcher
// read (KubeVirt v1.9.0: pkg/virt-launcher/virtwrap/agent-poller
// agent_poller.go for the agent's answers, pkg/network/controllers
// netstat.go for status.interfaces, pkg/network/vmispec infosource.go for
// the sources' names).

// Interface information sources (vmispec/infosource.go).
const (
	infoSourceDomain      = "domain"
	infoSourceGuestAgent  = "guest-agent"
	infoSourceDomainAndGA = infoSourceDomain + ", " + infoSourceGuestAgent
)

// guestOSInfo is the agent's guest-get-osinfo as status.guestOSInfo
// (agent_poller.go, convertToOSInfo).
func guestOSInfo(a launcher.AgentStatus) kubevirtv1.VirtualMachineInstanceGuestOSInfo {
	if !a.Connected || a.OSInfo == nil {
		return kubevirtv1.VirtualMachineInstanceGuestOSInfo{}
	}
	o := a.OSInfo
	return kubevirtv1.VirtualMachineInstanceGuestOSInfo{
		Name: o.Name, KernelRelease: o.KernelRelease, Version: o.Version, PrettyName: o.PrettyName,
		VersionID: o.VersionID, KernelVersion: o.KernelVersion, Machine: o.Machine, ID: o.ID,
	}
}

// networkStatus is status.interfaces as netstat.go's UpdateStatus makes
// it: one entry per domain interface (the instance's interfaces, with the
// MACs the launcher's QEMU has), the pod's IPs on the pod network's; then
// the agent's interfaces (loopback left out) merged by MAC: the guest's
// name of it, its addresses where the pod gave none of that family, and
// the source "domain, guest-agent"; an agent interface of no domain MAC
// is added with the source "guest-agent"; the pod network's entry first.
func networkStatus(spec *kubevirtv1.VirtualMachineInstanceSpec, domain []launcher.DomainInterface, podIPs []string, agent launcher.AgentStatus) []kubevirtv1.VirtualMachineInstanceNetworkInterface {
	podNetwork := ""
	for _, n := range spec.Networks {
		if n.Pod != nil {
			podNetwork = n.Name
		}
	}
	var out []kubevirtv1.VirtualMachineInstanceNetworkInterface
	for _, d := range domain {
		st := kubevirtv1.VirtualMachineInstanceNetworkInterface{Name: d.Name, MAC: d.MAC, InfoSource: infoSourceDomain, QueueCount: 1, LinkState: "up"}
		if d.Name == podNetwork && len(podIPs) > 0 {
			st.IP, st.IPs = podIPs[0], slices.Clone(podIPs)
		}
		out = append(out, st)
	}
	if agent.Connected {
		out = mergeAgentInterfaces(out, agent.Interfaces)
	}
	if i := slices.IndexFunc(out, func(st kubevirtv1.VirtualMachineInstanceNetworkInterface) bool { return st.Name == podNetwork }); i > 0 {
		primary := out[i]
		out = append([]kubevirtv1.VirtualMachineInstanceNetworkInterface{primary}, slices.Delete(out, i, i+1)...)
	}
	return out
}

// mergeAgentInterfaces is netstat.go's ifacesStatusFromGuestAgent, with
// agent_poller.go's convertToInterfaces (no loopback; the first IPv4
// address is the interface's address, else the first one).
func mergeAgentInterfaces(out []kubevirtv1.VirtualMachineInstanceNetworkInterface, ifaces []launcher.GuestInterface) []kubevirtv1.VirtualMachineInstanceNetworkInterface {
	for _, ga := range ifaces {
		if ga.Name == "lo" {
			continue
		}
		var ips []string
		for _, a := range ga.IPAddresses {
			ips = append(ips, a.Address)
		}
		mac := strings.ToLower(ga.HardwareAddress)
		i := slices.IndexFunc(out, func(st kubevirtv1.VirtualMachineInstanceNetworkInterface) bool {
			return st.InfoSource != infoSourceGuestAgent && st.MAC == mac
		})
		if i < 0 {
			st := kubevirtv1.VirtualMachineInstanceNetworkInterface{MAC: mac, InterfaceName: ga.Name, IPs: ips, InfoSource: infoSourceGuestAgent}
			st.IP = primaryIP(ips)
			out = append(out, st)
			continue
		}
		st := &out[i]
		st.InterfaceName, st.InfoSource = ga.Name, infoSourceDomainAndGA
		// Addresses the pod gave win over the guest's, per family; a
		// family the guest has none of is cleared.
		podV4, podV6 := splitFamilies(st.IPs)
		gaV4, gaV6 := splitFamilies(ips)
		if len(podV4) == 0 || len(gaV4) == 0 {
			podV4 = gaV4
		}
		if len(podV6) == 0 || len(gaV6) == 0 {
			podV6 = gaV6
		}
		st.IPs = append(podV4, podV6...)
		st.IP = ""
		if len(st.IPs) > 0 {
			st.IP = st.IPs[0]
		}
	}
	return out
}

// primaryIP is the first IPv4 address, else the first address.
func primaryIP(ips []string) string {
	for _, ip := range ips {
		if p := net.ParseIP(ip); p != nil && p.To4() != nil {
			return ip
		}
	}
	if len(ips) > 0 {
		return ips[0]
	}
	return ""
}

// splitFamilies splits addresses into IPv4 and IPv6 ones.
func splitFamilies(ips []string) (v4, v6 []string) {
	for _, ip := range ips {
		p := net.ParseIP(ip)
		switch {
		case p == nil:
		case p.To4() != nil:
			v4 = append(v4, ip)
		default:
			v6 = append(v6, ip)
		}
	}
	return v4, v6
}
