package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"k8s.io/cli-runtime/pkg/printers"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// describeNetwork shows each source NIC's network identity: its addresses
// on VMware (VMware Tools), the name the guest gives it and whether the
// conversion pinned it, and what the running VM reports; then the
// verdict (condition NetworkIdentityPreserved).
func describeNetwork(w io.Writer, m *v1alpha1.VirtualMachineMigration, now time.Time) {
	src := m.Status.Source
	if src == nil || len(src.NICs) == 0 {
		return
	}
	fmt.Fprintln(w, "\nNetwork:")
	tw := printers.GetNewTabWriter(w)
	fmt.Fprintln(tw, "  NIC\tMAC\tON VMWARE (VMWARE TOOLS)\tIN THE GUEST\tON KUBEVIRT")
	for i, nic := range src.NICs {
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\n", i, orNone(clean(nic.MAC)), vmwareAddresses(nic), clean(guestName(m, nic)), kubevirtInterface(m, i, nic))
	}
	_ = tw.Flush()
	c := condition(m, "NetworkIdentityPreserved")
	switch {
	case c != nil:
		fmt.Fprintf(w, "  identity: %s (%s) %s ago: %s\n", clean(string(c.Status)), clean(c.Reason), age(&c.LastTransitionTime, now), clean(c.Message))
	case isTerminal(m):
		fmt.Fprintf(w, "  identity: not checked (the migration ended %s with no report from the running VM's guest agent)\n", m.Status.Phase)
	case !m.SpecInForce().Target.PreserveStaticIPsEnabled():
		fmt.Fprintln(w, "  identity: not checked yet (spec.target.preserveStaticIPs is false: the names are not pinned, the check runs all the same)")
	default:
		fmt.Fprintln(w, "  identity: not checked yet (once the VM runs, from its guest agent's report)")
	}
}

// vmwareAddresses are a NIC's addresses, gateway and DNS as VMware Tools
// reported them.
func vmwareAddresses(nic v1alpha1.SourceNIC) string {
	g := nic.Guest
	if g == nil {
		return "<none reported>"
	}
	var parts []string
	for _, a := range g.IPAddresses {
		s := a.IP
		if a.PrefixLength > 0 {
			s += "/" + strconv.Itoa(int(a.PrefixLength))
		}
		if a.Origin != "" {
			s += " (" + a.Origin + ")"
		}
		parts = append(parts, s)
	}
	if g.Gateway != "" {
		parts = append(parts, "gateway "+g.Gateway)
	}
	if len(g.DNSServers) > 0 {
		parts = append(parts, "DNS "+strings.Join(g.DNSServers, " "))
	}
	return clean(strings.Join(parts, ", "))
}

// guestName is what the conversion found of the NIC in the guest.
func guestName(m *v1alpha1.VirtualMachineMigration, nic v1alpha1.SourceNIC) string {
	c := m.Status.Conversion
	if c == nil {
		return "-"
	}
	for _, p := range c.Interfaces {
		if !strings.EqualFold(p.MAC, nic.MAC) {
			continue
		}
		switch {
		case p.GuestUnreadable:
			return "not read: " + clean(p.Message)
		case p.Name == "":
			return "not found: " + clean(p.Message)
		}
		s := clean(p.Name) + " (by its " + map[string]string{v1alpha1.PinSourceAddress: "address", v1alpha1.PinSourcePCISlot: "PCI slot"}[p.Source] + ")"
		if p.Pinned {
			return s + ", pinned"
		}
		return s + ", not pinned"
	}
	return "-"
}

// kubevirtInterface is the running VM's interface of the NIC, as KubeVirt
// reported it when the identity was checked.
func kubevirtInterface(m *v1alpha1.VirtualMachineMigration, i int, nic v1alpha1.SourceNIC) string {
	t := m.Status.Target
	if t == nil {
		return "-"
	}
	name := "net-" + strconv.Itoa(i)
	for _, x := range t.Interfaces {
		if x.Name == name || (x.Name == "" && strings.EqualFold(x.MAC, nic.MAC)) {
			return clean(fmt.Sprintf("%s %s (%s)", orNone(x.InterfaceName), orNone(strings.Join(x.IPAddresses, " ")), x.InfoSource))
		}
	}
	return "-"
}
