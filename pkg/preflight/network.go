package preflight

import (
	"fmt"
	"strings"

	"platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// Reasons of the network identity rules.
const (
	// ReasonGuestNetworkUnknown: VMware Tools reported no address of the
	// VM's NICs (not running, or the VM is off): its static addresses can
	// be neither looked up in the guest nor checked after the migration.
	ReasonGuestNetworkUnknown = "GuestNetworkUnknown"
	// ReasonStaticAddressOnPodNetwork: a NIC whose guest has an address
	// that may be static lands on the pod network, where KubeVirt's
	// masquerade gives the guest a private address.
	ReasonStaticAddressOnPodNetwork = "StaticAddressOnPodNetwork"
	// ReasonGuestAddressRejected: VMware Tools reported, from inside the
	// guest, values of its network that are not addresses the controller
	// writes anywhere (status.source.guestNetworkRejected): a guest that
	// says so is misconfigured or hostile, and the migration is refused.
	ReasonGuestAddressRejected = "GuestAddressRejected"
	// ReasonStaticIPsNeedMACs: spec.target.preserveStaticIPs pins the
	// guest's interface names to the source MACs, which
	// preserveMACAddresses false gives away.
	ReasonStaticIPsNeedMACs = "StaticIPsNeedMACs"
)

// VMware's states the guest network rule reads.
const (
	toolsRunning = "guestToolsRunning"
	poweredOff   = "poweredOff"
)

// guestNetwork warns, as Forklift does, when the guest's addresses are
// unknown because VMware Tools do not run (or the VM is off), and when
// they cannot be kept as mapped.
func (c *checker) guestNetwork() {
	if len(c.inv.NICs) == 0 {
		return
	}
	if c.guestAddressRejected() {
		// VMware Tools did report addresses, refused: "reported no
		// address" would contradict it, and nothing else of the guest's
		// network matters to a migration that stops here.
		return
	}
	toolsDown := c.inv.ToolsRunningStatus != "" && c.inv.ToolsRunningStatus != toolsRunning
	if !c.inv.GuestNetworkReported() && (toolsDown || c.inv.PowerState == poweredOff) {
		c.add(warning(ReasonGuestNetworkUnknown, fmt.Sprintf("VMware Tools reported no address of the VM's NICs (tools %s, VM %s): "+
			"the guest's static addresses cannot be looked up, nor the network identity checked after the migration; "+
			"start the VM with VMware Tools running before migrating it to keep them", orUnknown(c.inv.ToolsRunningStatus), orUnknown(c.inv.PowerState))))
		return
	}
	var candidates []string
	for _, nic := range c.inv.NICs {
		addrs := candidateIPs(nic)
		if len(addrs) == 0 {
			continue
		}
		candidates = append(candidates, addrs...)
		if m, ok := c.mapping(nic.Network); ok && m.Type == v1alpha1.NetworkTypePod {
			c.add(warning(ReasonStaticAddressOnPodNetwork, fmt.Sprintf("%s (MAC %s) has %s, which the guest may set statically, and maps to the pod network: "+
				"KubeVirt's masquerade gives the guest a private address by DHCP and the VM is reached at the pod's address; "+
				"map network %q to a Multus network (bridge) to keep the address", nicName(nic), nic.MAC, strings.Join(addrs, ", "), nic.Network)))
		}
	}
	if len(candidates) > 0 && c.spec.Target.PreserveStaticIPsEnabled() && !c.spec.Target.PreserveMACs() {
		why := "spec.target.preserveMACAddresses false gives away"
		if c.spec.Target.SecondCopy {
			why = "a second copy (spec.target.secondCopy) never keeps"
		}
		c.add(warning(ReasonStaticIPsNeedMACs, "spec.target.preserveStaticIPs keeps the guest's interface names by the source MAC addresses, "+
			"which "+why+": the names, and the static addresses configured on them, will not be kept"))
	}
}

// guestAddressRejected blocks a migration whose guest reported values of
// its network the inventory refused (and reports whether it did): the
// guest's report decides what the conversion configures (a Windows
// guest's static addresses) and what the network identity check expects,
// and a report with a zone, control characters or a prefix length no
// address has cannot be taken in part.
func (c *checker) guestAddressRejected() bool {
	if len(c.inv.GuestNetworkRejected) == 0 {
		return false
	}
	c.add(blocking(ReasonGuestAddressRejected, fmt.Sprintf("VMware Tools reported, from inside the guest, values of its network that are not IP addresses "+
		"the migration could hand to the conversion: %s. None of them was kept, and the migration stops here with the source untouched. "+
		"Check the guest (its network configuration, its VMware Tools) and correct what it reports, then create the migration again; "+
		"a VM migrated powered off reports no addresses at all (GuestNetworkUnknown)", strings.Join(c.inv.GuestNetworkRejected, "; "))))
	return true
}

// candidateIPs are a NIC's addresses that may be static.
func candidateIPs(nic v1alpha1.SourceNIC) []string {
	var out []string
	for _, a := range nic.CandidateAddresses() {
		out = append(out, a.IP)
	}
	return out
}

// mapping finds the mapping of a source network.
func (c *checker) mapping(network string) (v1alpha1.NetworkMapping, bool) {
	for _, n := range c.spec.Target.Networks {
		if n.Source == network {
			return n, true
		}
	}
	return v1alpha1.NetworkMapping{}, false
}

func nicName(nic v1alpha1.SourceNIC) string {
	if nic.Label != "" {
		return nic.Label
	}
	return fmt.Sprintf("NIC %d", nic.Key)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
