package cli

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/pkg/statemachine"
)

// chained gives m's disks the checksums of a conversion and of a
// verification that read the targets back (the second one's bytes
// flipped when broken), and the verification Job.
func chained(broken bool) func(*v1alpha1.VirtualMachineMigration) {
	return func(m *v1alpha1.VirtualMachineMigration) {
		converted := []string{"5be1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f", "0ff1ce0ff1ce0ff1ce0ff1ce0ff1ce0ff1ce0ff1ce0ff1ce0ff1ce0ff1ce0ff1"}
		m.Status.Verification = &v1alpha1.JobStatus{JobName: naming.VerificationJob(m.Name, 1), Attempt: 1, CompletedAt: atp(35*time.Minute + 20*time.Second)}
		for i := range m.Status.Disks {
			d := &m.Status.Disks[i]
			d.Checksums = &v1alpha1.DiskChecksums{Converted: converted[i], ConvertedBytes: d.CapacityBytes,
				Target: converted[i], TargetBytes: d.CapacityBytes + 64<<20, VerifiedAt: atp(35*time.Minute + 20*time.Second)}
		}
		if broken {
			d := m.Status.Disks[1].Checksums
			d.Target, d.VerifiedAt = "deadbeef"+d.Converted[8:], nil
			m.Status.Verification.CompletedAt = nil
		}
	}
}

// withGuestNetwork gives the source NIC what VMware Tools reported, what
// the conversion found and pinned (unless off) and what the running VM
// reports (its guest agent: the static address kept, unless off).
func withGuestNetwork(off bool) func(*v1alpha1.VirtualMachineMigration) {
	return func(m *v1alpha1.VirtualMachineMigration) {
		nic := &m.Status.Source.NICs[0]
		nic.PCISlotNumber = ptr.To[int32](192)
		nic.Guest = &v1alpha1.GuestNICInfo{IPAddresses: []v1alpha1.GuestIPAddress{{IP: "192.168.10.21", PrefixLength: 24}, {IP: "fe80::250:56ff:feaa:bb01", PrefixLength: 64, Origin: "linklayer"}},
			Gateway: "192.168.10.1", DNSServers: []string{"192.168.10.2"}}
		m.Spec.Target.Networks = []v1alpha1.NetworkMapping{{Source: "VM Network", Type: v1alpha1.NetworkTypeMultus, MultusNetworkName: "vlan10"}}
		m.Status.AppliedSpec = m.Spec.DeepCopy()
		pin := v1alpha1.InterfacePin{MAC: nic.MAC, Name: "ens192", Source: v1alpha1.PinSourceAddress, Pinned: true, StaticAddresses: []string{"192.168.10.21"}}
		iface := v1alpha1.TargetInterface{Name: "net-0", MAC: nic.MAC, InterfaceName: "ens192", IPAddresses: []string{"192.168.10.21", "fe80::250:56ff:feaa:bb01"}, InfoSource: "domain, guest-agent"}
		status, reason, msg := metav1.ConditionTrue, statemachine.ReasonAddressesKept, "every static address of the source is on its NIC again: 192.168.10.21 (ens192 on VMware, MAC 00:50:56:aa:bb:01) on ens192"
		if off {
			m.Status.AppliedSpec.Target.PreserveStaticIPs = ptr.To(false)
			pin.Pinned = false
			iface.InterfaceName, iface.IPAddresses = "enp1s0", []string{"fe80::250:56ff:feaa:bb01"}
			status, reason = metav1.ConditionFalse, statemachine.ReasonAddressesMoved
			msg = "addresses that moved: 192.168.10.21 (ens192 on VMware, MAC 00:50:56:aa:bb:01): now enp1s0 with fe80::250:56ff:feaa:bb01"
		}
		m.Status.Conversion.Interfaces = []v1alpha1.InterfacePin{pin}
		m.Status.Target.Interfaces = []v1alpha1.TargetInterface{iface}
		setCondition(m, statemachine.ConditionNetworkIdentityPreserved, status, reason, msg)
	}
}

// TestGoldenDescribeChain: the checksum chain of every disk, verified or
// broken, and the network identity kept or moved.
func TestGoldenDescribeChain(t *testing.T) {
	for name, m := range map[string]*v1alpha1.VirtualMachineMigration{
		"chain-verified": inPhase("chain-verified", v1alpha1.PhaseSucceeded, succeeded, chained(false), withGuestNetwork(false)),
		"chain-broken": inPhase("chain-broken", v1alpha1.PhaseImporting, chained(true), lastError(v1alpha1.PhaseImporting, statemachine.ReasonChecksumMismatch,
			"the target disks do not hold the converted bytes: disk-1 (DataVolume web-01-disk-1): target sha256 deadbeef..., converted 0ff1ce...; the VM was not started"),
			func(m *v1alpha1.VirtualMachineMigration) { m.Status.Phase = v1alpha1.PhaseRollingBack }),
		"network-moved": inPhase("network-moved", v1alpha1.PhaseSucceeded, succeeded, chained(false), withGuestNetwork(true)),
		"chain-read-once": inPhase("chain-read-once", v1alpha1.PhaseSucceeded, succeeded, chained(false), func(m *v1alpha1.VirtualMachineMigration) {
			// disk-1 is a Block claim: the conversion hashed no image of it.
			c := m.Status.Disks[1].Checksums
			c.Compared, c.VerifiedAt = v1alpha1.ComparedReadOnce, nil
			m.Status.Disks[0].Checksums.Compared = v1alpha1.ComparedConvertedAndTarget
		}),
	} {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, printDescribe(&buf, m, fixtureEvents(m), testNow))
			golden(t, "describe-"+name, buf.Bytes())
		})
	}
}

// TestChainVerdictSaysWhenReadBack: a verified chain says how long before
// the VM's start the target was read back (a start much later would
// have read it again), or that the VM was not started.
func TestChainVerdictSaysWhenReadBack(t *testing.T) {
	const verified = "verified: the target holds the converted bytes, which came from the transferred ones"
	for name, tc := range map[string]struct {
		phase   v1alpha1.Phase
		startAt *metav1.Time
		want    string
	}{
		"started 10s later": {phase: v1alpha1.PhaseSucceeded, startAt: atp(35*time.Minute + 30*time.Second),
			want: verified + ", read back 10s before the VM was started"},
		"started 12m later (a controller whose bound is longer)": {phase: v1alpha1.PhaseStarting, startAt: atp(47*time.Minute + 20*time.Second),
			want: verified + ", read back 12m0s before the VM was started"},
		"not started yet": {phase: v1alpha1.PhaseCreatingVM,
			want: verified + ", the VM not started yet (a start long after this reads the target back again)"},
		"left halted": {phase: v1alpha1.PhaseSucceeded,
			want: verified + ", the VM was not started by the migration"},
	} {
		t.Run(name, func(t *testing.T) {
			m := inPhase("verdict", tc.phase, chained(false))
			m.Status.Target.StartRequestedAt = tc.startAt
			require.Equal(t, tc.want, chainVerdict(m, m.Status.Disks[0]))
		})
	}
}
