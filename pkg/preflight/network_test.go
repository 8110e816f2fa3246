package preflight

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/utils/ptr"

	"platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

func TestGuestNetworkRules(t *testing.T) {
	static := &v1alpha1.GuestNICInfo{IPAddresses: []v1alpha1.GuestIPAddress{{IP: "192.168.10.21", PrefixLength: 24}, {IP: "fe80::1", PrefixLength: 64}}}
	dhcp := &v1alpha1.GuestNICInfo{IPAddresses: []v1alpha1.GuestIPAddress{{IP: "10.1.2.3", PrefixLength: 16, Origin: "dhcp"}}}
	tests := map[string]struct {
		inv  func(*v1alpha1.SourceInventory)
		spec func(*v1alpha1.VirtualMachineMigrationSpec)
		want []string // reason: message part
	}{
		"tools not running: nothing known of the guest's addresses": {
			inv: func(inv *v1alpha1.SourceInventory) {
				inv.ToolsRunningStatus, inv.PowerState = "guestToolsNotRunning", "poweredOn"
			},
			want: []string{ReasonGuestNetworkUnknown, "tools guestToolsNotRunning, VM poweredOn"},
		},
		"the VM is off": {
			inv:  func(inv *v1alpha1.SourceInventory) { inv.PowerState = "poweredOff" },
			want: []string{ReasonGuestNetworkUnknown, "VM poweredOff"},
		},
		"tools running, static address on a Multus network: fine": {
			inv: func(inv *v1alpha1.SourceInventory) {
				inv.ToolsRunningStatus, inv.NICs[1].Guest = "guestToolsRunning", static
			},
		},
		"a static address on the pod network": {
			inv: func(inv *v1alpha1.SourceInventory) {
				inv.ToolsRunningStatus, inv.NICs[0].Guest, inv.NICs[1].Guest = "guestToolsRunning", static, dhcp
			},
			want: []string{ReasonStaticAddressOnPodNetwork, "Network adapter 1 (MAC 00:50:56:00:00:01) has 192.168.10.21, which the guest may set statically"},
		},
		"a DHCP lease on the pod network: fine": {
			inv: func(inv *v1alpha1.SourceInventory) { inv.NICs[0].Guest = dhcp },
		},
		"static addresses without the MACs": {
			inv:  func(inv *v1alpha1.SourceInventory) { inv.NICs[1].Guest = static },
			spec: func(s *v1alpha1.VirtualMachineMigrationSpec) { s.Target.PreserveMACAddresses = ptr.To(false) },
			want: []string{ReasonStaticIPsNeedMACs, "will not be kept"},
		},
		"static addresses without the MACs, not to be kept anyway": {
			inv: func(inv *v1alpha1.SourceInventory) { inv.NICs[1].Guest = static },
			spec: func(s *v1alpha1.VirtualMachineMigrationSpec) {
				s.Target.PreserveMACAddresses, s.Target.PreserveStaticIPs = ptr.To(false), ptr.To(false)
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			spec, inv := cleanSpec(), cleanInventory()
			if tc.inv != nil {
				tc.inv(inv)
			}
			if tc.spec != nil {
				tc.spec(spec)
			}
			var got []string
			for _, f := range Check(spec, inv, cleanCluster()) {
				assert.Equal(t, v1alpha1.SeverityWarning, f.Severity, "%s: a network identity finding never blocks", f.Reason)
				got = append(got, f.Reason)
				if len(tc.want) == 2 && f.Reason == tc.want[0] {
					assert.Contains(t, f.Message, tc.want[1])
				}
			}
			if len(tc.want) == 0 {
				assert.Empty(t, got)
			} else {
				assert.Equal(t, []string{tc.want[0]}, got)
			}
		})
	}
}

// TestGuestAddressRejected: a value of VMware Tools' report the inventory
// refused (it is recorded, quoted) blocks the migration, naming it,
// whatever else the guest reported and whatever the spec keeps.
func TestGuestAddressRejected(t *testing.T) {
	for name, inv := range map[string]func(*v1alpha1.SourceInventory){
		"with other addresses": func(inv *v1alpha1.SourceInventory) {
			inv.NICs[1].Guest = &v1alpha1.GuestNICInfo{IPAddresses: []v1alpha1.GuestIPAddress{{IP: "192.168.10.21", PrefixLength: 24}}}
		},
		"alone":              func(*v1alpha1.SourceInventory) {},
		"with the tools off": func(inv *v1alpha1.SourceInventory) { inv.ToolsRunningStatus = "guestToolsNotRunning" },
	} {
		t.Run(name, func(t *testing.T) {
			spec, in := cleanSpec(), cleanInventory()
			spec.Target.PreserveStaticIPs = ptr.To(false)
			inv(in)
			in.GuestNetworkRejected = []string{`guest.net[0] (Network adapter 2) address "2001:db8::7%x\n--root=/dev/sdb9" holds a newline at byte 13`}
			var blocking []v1alpha1.PreflightFinding
			for _, f := range Check(spec, in, cleanCluster()) {
				if f.Severity == v1alpha1.SeverityBlocking {
					blocking = append(blocking, f)
				}
				// Issue 50: VMware Tools did report addresses; a warning
				// that it reported none contradicts the refusal.
				assert.NotEqual(t, ReasonGuestNetworkUnknown, f.Reason, "%s: %s", f.Reason, f.Message)
			}
			if assert.Len(t, blocking, 1) {
				assert.Equal(t, ReasonGuestAddressRejected, blocking[0].Reason)
				assert.Contains(t, blocking[0].Message, `address "2001:db8::7%x\n--root=/dev/sdb9" holds a newline at byte 13`)
			}
		})
	}
}
