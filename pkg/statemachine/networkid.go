package statemachine

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// ConditionNetworkIdentityPreserved says, once the target VM runs,
// whether each source NIC's static addresses are found again on the
// interface with its MAC address, as KubeVirt reports the VMI's
// interfaces (status.interfaces, from the guest agent): True, False
// naming each address that moved, or Unknown when the source reported no
// addresses or the guest agent none.
const ConditionNetworkIdentityPreserved = "NetworkIdentityPreserved"

// Reasons of ConditionNetworkIdentityPreserved.
const (
	ReasonAddressesKept          = "AddressesKept"
	ReasonAddressesMoved         = "AddressesMoved"
	ReasonNoStaticAddresses      = "NoStaticAddresses"
	ReasonStaticAddressesUnknown = "StaticAddressesUnknown"
	ReasonGuestNetworkUnknown    = "GuestNetworkUnknown"
	ReasonGuestAgentNotReporting = "GuestAgentNotReporting"
)

// GuestAgentReportWait bounds how long after the start request a running
// VM's guest agent has to report its interfaces (within the start
// timeout): the network identity check then ends Unknown, and the
// migration goes on (a guest without an agent runs all the same).
const GuestAgentReportWait = 5 * time.Minute

// InfoSourceGuestAgent is the infoSource KubeVirt gives interface data
// that came from the guest agent (alone, or "domain, guest-agent").
const InfoSourceGuestAgent = "guest-agent"

// maxTargetInterfaces bounds status.target.interfaces (the schema's).
const maxTargetInterfaces = 64

// unclassified is a source NIC address that may be static or leased: the
// guest's configuration could not be read, and VMware Tools said nothing.
type unclassified struct {
	address, why string
}

// expectedNIC is a source NIC whose static addresses the check looks for.
type expectedNIC struct {
	index     int // in status.source.nics: its interface is net-<index>
	nic       v1alpha1.SourceNIC
	guestName string // its interface name on VMware, when known
	addresses []string
	pod       bool // mapped to the pod network (masquerade)
}

// expectedAddresses are, per mapped source NIC, the addresses expected
// again: those the guest's own configuration sets statically (the
// conversion looked), and those VMware Tools reports as configured by
// hand (Windows' tools say; Linux guests' do not); DHCP leases,
// link-local and random addresses never. The other addresses are
// unclassified when nothing could tell: the conversion could not read
// the guest (or did not look: skipped, or a Windows guest whose tools
// gave no origin).
func (d *decider) expectedAddresses() ([]expectedNIC, []unclassified) {
	inv := d.st.Source
	if inv == nil {
		return nil, nil
	}
	var out []expectedNIC
	var unknown []unclassified
	for i, nic := range inv.NICs {
		mapping, ok := networkMappingOf(d.spec, nic.Network)
		if !ok || mapping.Type == v1alpha1.NetworkTypeIgnore {
			continue
		}
		e := expectedNIC{index: i, nic: nic, pod: mapping.Type == v1alpha1.NetworkTypePod}
		pin, looked := d.pinOf(nic.MAC)
		why := "the conversion did not look into the guest"
		if looked {
			e.guestName, e.addresses = pin.Name, slices.Clone(pin.StaticAddresses)
			why = pin.Message
			looked = !pin.GuestUnreadable
		}
		for _, a := range nic.CandidateAddresses() {
			switch {
			case slices.Contains(e.addresses, a.IP):
			case a.Manual():
				e.addresses = append(e.addresses, a.IP)
			case !looked:
				unknown = append(unknown, unclassified{address: a.IP, why: why})
			}
		}
		if len(e.addresses) > 0 {
			out = append(out, e)
		}
	}
	return out, unknown
}

// networkMappingOf finds the mapping of a source network.
func networkMappingOf(spec *v1alpha1.VirtualMachineMigrationSpec, network string) (v1alpha1.NetworkMapping, bool) {
	for _, n := range spec.Target.Networks {
		if n.Source == network {
			return n, true
		}
	}
	return v1alpha1.NetworkMapping{}, false
}

// pinOf is what the conversion found of the NIC with this MAC address.
func (d *decider) pinOf(mac string) (v1alpha1.InterfacePin, bool) {
	if d.st.Conversion == nil {
		return v1alpha1.InterfacePin{}, false
	}
	for _, p := range d.st.Conversion.Interfaces {
		if strings.EqualFold(p.MAC, mac) {
			return p, true
		}
	}
	return v1alpha1.InterfacePin{}, false
}

// awaitNetworkIdentity checks the network identity of the running target
// once: it returns true while it waits for the guest agent's report, and
// otherwise sets ConditionNetworkIdentityPreserved and records the
// interfaces seen (false: the start may complete).
func (d *decider) awaitNetworkIdentity() bool {
	if meta.FindStatusCondition(d.st.Conditions, ConditionNetworkIdentityPreserved) != nil {
		return false
	}
	expected, unknown := d.expectedAddresses()
	if len(expected) == 0 {
		d.noAddressesToCheck(unknown)
		return false
	}
	var ifaces []v1alpha1.TargetInterface
	if d.obs.VMI != nil {
		ifaces = d.obs.VMI.Interfaces
	}
	for _, e := range expected {
		if iface, ok := interfaceOf(ifaces, e); !ok || !strings.Contains(iface.InfoSource, InfoSourceGuestAgent) {
			return d.awaitGuestAgent(e)
		}
	}
	d.recordTargetInterfaces(ifaces)
	var kept, moved []string
	for _, e := range expected {
		iface, _ := interfaceOf(ifaces, e)
		k, m := compareAddresses(e, iface, d.spec.Target.PreserveMACs())
		kept, moved = append(kept, k...), append(moved, m...)
	}
	tail := unknownNote(unknown)
	if len(moved) > 0 {
		msg := "addresses that moved: " + strings.Join(moved, "; ") + tail
		d.setCondition(ConditionNetworkIdentityPreserved, metav1.ConditionFalse, ReasonAddressesMoved, msg)
		d.out.Events = append(d.out.Events, Event{Warning: true, Reason: ReasonAddressesMoved, Message: msg})
		return false
	}
	d.setCondition(ConditionNetworkIdentityPreserved, metav1.ConditionTrue, ReasonAddressesKept,
		"every static address of the source is on its NIC again: "+strings.Join(kept, "; ")+tail)
	return false
}

// unknownNote names the addresses nothing could classify, for a message.
func unknownNote(unknown []unclassified) string {
	if len(unknown) == 0 {
		return ""
	}
	parts := make([]string, 0, len(unknown))
	for _, u := range unknown {
		parts = append(parts, fmt.Sprintf("%s (%s)", u.address, u.why))
	}
	return "; not told static or leased, so not checked: " + strings.Join(parts, "; ")
}

// noAddressesToCheck concludes the check of a source without static
// addresses: Unknown when some could not be told static or leased, or
// when VMware Tools reported none at all.
func (d *decider) noAddressesToCheck(unknown []unclassified) {
	if len(unknown) > 0 {
		d.setCondition(ConditionNetworkIdentityPreserved, metav1.ConditionUnknown, ReasonStaticAddressesUnknown,
			"nothing to compare"+unknownNote(unknown))
		return
	}
	if d.st.Source != nil && !d.st.Source.GuestNetworkReported() {
		d.setCondition(ConditionNetworkIdentityPreserved, metav1.ConditionUnknown, ReasonGuestNetworkUnknown,
			"VMware Tools reported no address of the source VM's NICs (tools not running, or the VM was off when inventoried): nothing to compare")
		return
	}
	d.setCondition(ConditionNetworkIdentityPreserved, metav1.ConditionTrue, ReasonNoStaticAddresses,
		"no NIC of the source had a static address (DHCP leases and link-local addresses are the new network's to give)")
}

// awaitGuestAgent waits for the guest agent to report e's interface,
// until GuestAgentReportWait (within the start timeout) after the start
// request; then the check ends Unknown.
func (d *decider) awaitGuestAgent(e expectedNIC) bool {
	deadline := d.startRequestedAt().Add(min(GuestAgentReportWait, d.spec.Policy.StartDeadline()))
	if d.now.Time.Before(deadline) {
		d.working(fmt.Sprintf("VirtualMachine %s runs; waiting until %s for its guest agent to report the interface of %s to check its static addresses",
			d.targetName(), deadline.UTC().Format(time.RFC3339), e.nic.MAC), min(d.cfg.PollInterval, deadline.Sub(d.now.Time)))
		return true
	}
	if d.obs.VMI != nil {
		d.recordTargetInterfaces(d.obs.VMI.Interfaces)
	}
	d.setCondition(ConditionNetworkIdentityPreserved, metav1.ConditionUnknown, ReasonGuestAgentNotReporting,
		fmt.Sprintf("the guest agent reported no interface with MAC %s within %s of the start: its static addresses %s could not be checked",
			e.nic.MAC, min(GuestAgentReportWait, d.spec.Policy.StartDeadline()), strings.Join(e.addresses, ", ")))
	return false
}

// interfaceOf finds the VMI interface of a source NIC: by the VM's
// interface name (net-<index>), else by MAC address.
func interfaceOf(ifaces []v1alpha1.TargetInterface, e expectedNIC) (v1alpha1.TargetInterface, bool) {
	name := "net-" + strconv.Itoa(e.index)
	for _, i := range ifaces {
		if i.Name == name {
			return i, true
		}
	}
	for _, i := range ifaces {
		if e.nic.MAC != "" && strings.EqualFold(i.MAC, e.nic.MAC) {
			return i, true
		}
	}
	return v1alpha1.TargetInterface{}, false
}

// compareAddresses says, of e's addresses, which the interface has again
// and which moved ("192.168.10.21 (ens192 on VMware, MAC ...): now enp1s0
// with 10.0.2.2"); a MAC address that changed counts too, where it was to
// be kept.
func compareAddresses(e expectedNIC, iface v1alpha1.TargetInterface, keepMAC bool) (kept, moved []string) {
	where := fmt.Sprintf("NIC %d, MAC %s", e.index, e.nic.MAC)
	if e.guestName != "" {
		where = fmt.Sprintf("%s on VMware, MAC %s", e.guestName, e.nic.MAC)
	}
	name := orText(iface.InterfaceName, iface.Name)
	now := fmt.Sprintf("now %s with %s", name, orText(strings.Join(iface.IPAddresses, ", "), "no address"))
	if e.pod {
		now += ", on the pod network, where KubeVirt's masquerade gives the guest a private address and the VM is reached at the pod's"
	}
	if keepMAC && !strings.EqualFold(iface.MAC, e.nic.MAC) {
		moved = append(moved, fmt.Sprintf("(%s): the interface has MAC %s", where, iface.MAC))
	}
	for _, a := range e.addresses {
		if slices.Contains(iface.IPAddresses, a) {
			kept = append(kept, fmt.Sprintf("%s (%s) on %s", a, where, name))
		} else {
			moved = append(moved, fmt.Sprintf("%s (%s): %s", a, where, now))
		}
	}
	return kept, moved
}

func orText(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// recordTargetInterfaces keeps the VMI's interfaces as KubeVirt reported them.
func (d *decider) recordTargetInterfaces(ifaces []v1alpha1.TargetInterface) {
	if len(ifaces) > maxTargetInterfaces {
		ifaces = ifaces[:maxTargetInterfaces]
	}
	d.st.Target.Interfaces = slices.Clone(ifaces)
}

// networkIdentityCondition keeps the check's condition, set once, at the
// generation the status reflects.
func (d *decider) networkIdentityCondition() {
	if c := meta.FindStatusCondition(d.st.Conditions, ConditionNetworkIdentityPreserved); c != nil {
		d.setCondition(c.Type, c.Status, c.Reason, c.Message)
	}
}

// networkEvidence is the check's outcome, for the evidence of Starting.
func (d *decider) networkEvidence() string {
	c := meta.FindStatusCondition(d.st.Conditions, ConditionNetworkIdentityPreserved)
	if c == nil {
		return ""
	}
	return fmt.Sprintf("; network identity %s (%s)", c.Status, c.Reason)
}
