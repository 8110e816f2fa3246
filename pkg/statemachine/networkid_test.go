package statemachine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/test/builders"
)

// The builders' inventory: NIC 0 (00:50:56:aa:bb:01) on "VM Network", NIC 1
// (00:50:56:aa:bb:02) on "backup".
const (
	mac0 = "00:50:56:aa:bb:01"
	mac1 = "00:50:56:aa:bb:02"
)

// runningTarget is a migration in Starting whose target was asked to run
// at t0-started, with its networks mapped (NIC 0 to Multus unless pod,
// NIC 1 ignored), the guest addresses given and what the conversion found.
func runningTarget(started time.Duration, pod bool, guest0 *v1alpha1.GuestNICInfo, pins []v1alpha1.InterfacePin, opts ...builders.MigrationMod) *v1alpha1.VirtualMachineMigration {
	first := builders.MultusNetwork("VM Network", "default/vlan10")
	if pod {
		first = builders.PodNetwork("VM Network")
	}
	inv := builders.Inventory(func(inv *v1alpha1.SourceInventory) { inv.NICs[0].Guest = guest0 })
	mods := append([]builders.MigrationMod{
		builders.Networks(first, builders.IgnoredNetwork("backup")), builders.Reached(v1alpha1.PhaseStarting, inv),
		builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
			s.Target.StartRequestedAt = builders.TP(-started)
			s.Conversion.Interfaces = pins
		}),
	}, opts...)
	return newMigration(mods...)
}

// reporting is a running VMI whose interfaces KubeVirt reports so.
func reporting(ifaces ...v1alpha1.TargetInterface) obsOpt {
	return func(o *Observation) {
		o.VM = &VMObservation{Ours: true, UID: builders.TargetUID, RunStrategy: RunStrategyAlways, Ref: ref(KindVirtualMachine, builders.DefaultTarget)}
		o.VMI = &VMIObservation{Phase: VMIRunning, AgentConnected: true, Interfaces: ifaces}
	}
}

var (
	staticGuest = &v1alpha1.GuestNICInfo{IPAddresses: []v1alpha1.GuestIPAddress{
		{IP: "192.168.10.21", PrefixLength: 24}, {IP: "fe80::250:56ff:feaa:bb01", PrefixLength: 64}}, Gateway: "192.168.10.1"}
	pinned = []v1alpha1.InterfacePin{{MAC: mac0, Name: "ens192", Source: v1alpha1.PinSourceAddress, Pinned: true, StaticAddresses: []string{"192.168.10.21"}}}
	found  = []v1alpha1.InterfacePin{{MAC: mac0, Name: "ens192", Source: v1alpha1.PinSourceAddress, StaticAddresses: []string{"192.168.10.21"}}}
)

func wantNetworkCondition(t *testing.T, d Decision, status metav1.ConditionStatus, reason string) *metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(d.Status.Conditions, ConditionNetworkIdentityPreserved)
	require.NotNil(t, c, "no %s condition", ConditionNetworkIdentityPreserved)
	assert.Equal(t, status, c.Status, "condition %+v", c)
	assert.Equal(t, reason, c.Reason, "condition %+v", c)
	return c
}

func TestNetworkIdentity(t *testing.T) {
	agentEns192 := v1alpha1.TargetInterface{Name: "net-0", MAC: mac0, InterfaceName: "ens192",
		IPAddresses: []string{"192.168.10.21", "fe80::250:56ff:feaa:bb01"}, InfoSource: "domain, guest-agent"}
	runCases(t, map[string]decideCase{
		"kept: the guest agent reports the pinned name with the static address": {
			m: runningTarget(time.Minute, false, staticGuest, pinned), obs: newObs(reporting(agentEns192)),
			phase: v1alpha1.PhaseCleaningUp,
			check: func(t *testing.T, d Decision) {
				c := wantNetworkCondition(t, d, metav1.ConditionTrue, ReasonAddressesKept)
				assert.Equal(t, "every static address of the source is on its NIC again: 192.168.10.21 (ens192 on VMware, MAC 00:50:56:aa:bb:01) on ens192", c.Message)
				assert.Equal(t, []v1alpha1.TargetInterface{agentEns192}, d.Status.Target.Interfaces)
				assert.Contains(t, evidenceFor(d.Status, v1alpha1.PhaseStarting).Observed, "network identity True (AddressesKept)")
			},
		},
		"not pinned (preserveStaticIPs false): the interface got another name and no address": {
			m: runningTarget(time.Minute, false, staticGuest, found, builders.WithSpec(func(s *v1alpha1.VirtualMachineMigrationSpec) {
				s.Target.PreserveStaticIPs = ptr.To(false)
			})),
			obs: newObs(reporting(v1alpha1.TargetInterface{Name: "net-0", MAC: mac0, InterfaceName: "enp1s0",
				IPAddresses: []string{"fe80::250:56ff:feaa:bb01"}, InfoSource: "domain, guest-agent"})),
			phase: v1alpha1.PhaseCleaningUp,
			check: func(t *testing.T, d Decision) {
				c := wantNetworkCondition(t, d, metav1.ConditionFalse, ReasonAddressesMoved)
				assert.Equal(t, "addresses that moved: 192.168.10.21 (ens192 on VMware, MAC 00:50:56:aa:bb:01): now enp1s0 with fe80::250:56ff:feaa:bb01", c.Message)
				assert.Contains(t, eventReasons(d), ReasonAddressesMoved)
				assert.Equal(t, v1alpha1.PhaseCleaningUp, d.Status.Phase, "the VM runs: the migration goes on")
			},
		},
		"the pod network: KubeVirt reports the pod's address": {
			m: runningTarget(time.Minute, true, staticGuest, pinned),
			obs: newObs(reporting(v1alpha1.TargetInterface{Name: "net-0", MAC: mac0, InterfaceName: "ens192",
				IPAddresses: []string{"10.244.0.17"}, InfoSource: "domain, guest-agent"})),
			phase: v1alpha1.PhaseCleaningUp,
			check: func(t *testing.T, d Decision) {
				c := wantNetworkCondition(t, d, metav1.ConditionFalse, ReasonAddressesMoved)
				assert.Contains(t, c.Message, "192.168.10.21 (ens192 on VMware, MAC 00:50:56:aa:bb:01): now ens192 with 10.244.0.17, on the pod network")
			},
		},
		"the guest agent has not reported yet: wait": {
			m:     runningTarget(time.Minute, false, staticGuest, pinned),
			obs:   newObs(reporting(v1alpha1.TargetInterface{Name: "net-0", MAC: mac0, InfoSource: "domain"})),
			phase: v1alpha1.PhaseStarting, requeue: DefaultPollInterval,
			check: func(t *testing.T, d Decision) {
				assert.Nil(t, meta.FindStatusCondition(d.Status.Conditions, ConditionNetworkIdentityPreserved))
				assert.Contains(t, meta.FindStatusCondition(d.Status.Conditions, ConditionProgressing).Message, "waiting until")
			},
		},
		"the guest agent never reported: Unknown, and the migration goes on": {
			m:     runningTarget(GuestAgentReportWait, false, staticGuest, pinned),
			obs:   newObs(reporting(v1alpha1.TargetInterface{Name: "net-0", MAC: mac0, InfoSource: "domain"})),
			phase: v1alpha1.PhaseCleaningUp,
			check: func(t *testing.T, d Decision) {
				c := wantNetworkCondition(t, d, metav1.ConditionUnknown, ReasonGuestAgentNotReporting)
				assert.Contains(t, c.Message, "192.168.10.21")
			},
		},
		"Windows: the addresses VMware Tools says were set by hand": {
			m: runningTarget(time.Minute, false, &v1alpha1.GuestNICInfo{IPAddresses: []v1alpha1.GuestIPAddress{
				{IP: "10.20.30.40", PrefixLength: 24, Origin: "manual"}, {IP: "10.20.30.99", PrefixLength: 24, Origin: "dhcp"}}}, nil),
			obs: newObs(reporting(v1alpha1.TargetInterface{Name: "net-0", MAC: mac0, InterfaceName: "Ethernet 2",
				IPAddresses: []string{"10.20.30.40"}, InfoSource: "domain, guest-agent"})),
			phase: v1alpha1.PhaseCleaningUp,
			check: func(t *testing.T, d Decision) {
				c := wantNetworkCondition(t, d, metav1.ConditionTrue, ReasonAddressesKept)
				assert.Contains(t, c.Message, "10.20.30.40 (NIC 0, MAC 00:50:56:aa:bb:01) on Ethernet 2")
			},
		},
		"the guest could not be read: its addresses are neither static nor leased for sure": {
			m: runningTarget(time.Minute, false, staticGuest, []v1alpha1.InterfacePin{{MAC: mac0, GuestUnreadable: true,
				Message: "the conversion image has no guestfish to look into the guest"}}),
			obs:   newObs(reporting()),
			phase: v1alpha1.PhaseCleaningUp,
			check: func(t *testing.T, d Decision) {
				c := wantNetworkCondition(t, d, metav1.ConditionUnknown, ReasonStaticAddressesUnknown)
				assert.Equal(t, "nothing to compare; not told static or leased, so not checked: 192.168.10.21 (the conversion image has no guestfish to look into the guest)", c.Message)
			},
		},
		"the conversion did not look (skipped)": {
			m:     runningTarget(time.Minute, false, staticGuest, nil),
			obs:   newObs(reporting()),
			phase: v1alpha1.PhaseCleaningUp,
			check: func(t *testing.T, d Decision) {
				c := wantNetworkCondition(t, d, metav1.ConditionUnknown, ReasonStaticAddressesUnknown)
				assert.Contains(t, c.Message, "192.168.10.21 (the conversion did not look into the guest)")
			},
		},
		"the guest looked at, the address in no configuration: a lease": {
			m:     runningTarget(time.Minute, false, staticGuest, []v1alpha1.InterfacePin{{MAC: mac0, Message: "no network configuration in the guest names this NIC"}}),
			obs:   newObs(reporting()),
			phase: v1alpha1.PhaseCleaningUp,
			check: func(t *testing.T, d Decision) {
				wantNetworkCondition(t, d, metav1.ConditionTrue, ReasonNoStaticAddresses)
			},
		},
		"DHCP only: nothing to keep": {
			m: runningTarget(time.Minute, false, &v1alpha1.GuestNICInfo{IPAddresses: []v1alpha1.GuestIPAddress{
				{IP: "10.20.30.99", PrefixLength: 24, Origin: "dhcp"}}}, nil),
			obs:   newObs(reporting()),
			phase: v1alpha1.PhaseCleaningUp,
			check: func(t *testing.T, d Decision) {
				wantNetworkCondition(t, d, metav1.ConditionTrue, ReasonNoStaticAddresses)
			},
		},
		"no VMware Tools data: Unknown": {
			m: runningTarget(time.Minute, false, nil, nil), obs: newObs(reporting()),
			phase: v1alpha1.PhaseCleaningUp,
			check: func(t *testing.T, d Decision) {
				wantNetworkCondition(t, d, metav1.ConditionUnknown, ReasonGuestNetworkUnknown)
				assert.Contains(t, evidenceFor(d.Status, v1alpha1.PhaseStarting).Observed, "network identity Unknown (GuestNetworkUnknown)")
			},
		},
		"the MAC address changed though it was to be kept": {
			m: runningTarget(time.Minute, false, staticGuest, pinned),
			obs: newObs(reporting(v1alpha1.TargetInterface{Name: "net-0", MAC: "02:00:00:00:00:01", InterfaceName: "ens192",
				IPAddresses: []string{"192.168.10.21"}, InfoSource: "domain, guest-agent"})),
			phase: v1alpha1.PhaseCleaningUp,
			check: func(t *testing.T, d Decision) {
				c := wantNetworkCondition(t, d, metav1.ConditionFalse, ReasonAddressesMoved)
				assert.Contains(t, c.Message, "the interface has MAC 02:00:00:00:00:01")
			},
		},
		"matched by MAC when KubeVirt names it otherwise": {
			m: runningTarget(time.Minute, false, staticGuest, pinned),
			obs: newObs(reporting(v1alpha1.TargetInterface{MAC: mac0, InterfaceName: "ens192",
				IPAddresses: []string{"192.168.10.21"}, InfoSource: "guest-agent"})),
			phase: v1alpha1.PhaseCleaningUp,
			check: func(t *testing.T, d Decision) { wantNetworkCondition(t, d, metav1.ConditionTrue, ReasonAddressesKept) },
		},
		"checked once: a condition already set is not checked again": {
			m: runningTarget(time.Minute, false, staticGuest, pinned, builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
				meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: ConditionNetworkIdentityPreserved, Status: metav1.ConditionFalse, Reason: ReasonAddressesMoved, ObservedGeneration: 1})
			})),
			obs:   newObs(reporting(v1alpha1.TargetInterface{Name: "net-0", MAC: mac0, InfoSource: "domain"})),
			phase: v1alpha1.PhaseCleaningUp,
			check: func(t *testing.T, d Decision) {
				wantNetworkCondition(t, d, metav1.ConditionFalse, ReasonAddressesMoved)
			},
		},
	})
}
