package pipeline

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	kubevirtv1 "kubevirt.io/api/core/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
)

// hostileZone is an address VMware Tools may report from inside a guest:
// netip.ParseAddr takes an IPv6 zone of any bytes, a newline included.
const hostileZone = "2001:db8::7%x\n--root=/dev/sdb9"

// TestGuestAddressAddsNoConversionArgument: an address, gateway or DNS
// server the guest reported with a zone holding a newline never becomes
// an argument of its own for virt-v2v-in-place (Windows, with
// preserveStaticIPs) nor a line of its own in network.conf (Linux):
// rendering the conversion refuses it, naming the value.
func TestGuestAddressAddsNoConversionArgument(t *testing.T) {
	tests := map[string]struct {
		migration func() *v1alpha1.VirtualMachineMigration
		// injected is what must never reach virt-v2v or the guest script
		// as a field or a line of its own.
		injected string
	}{
		"a Windows static address": {
			migration: func() *v1alpha1.VirtualMachineMigration {
				m := windowsEFI()
				g := m.Status.Source.NICs[0].Guest
				g.IPAddresses = append(g.IPAddresses, v1alpha1.GuestIPAddress{IP: hostileZone, Origin: v1alpha1.OriginManual})
				return m
			},
			injected: "--root=/dev/sdb9",
		},
		"a Windows gateway": {
			migration: func() *v1alpha1.VirtualMachineMigration {
				m := windowsEFI()
				g := m.Status.Source.NICs[0].Guest
				g.IPAddresses = []v1alpha1.GuestIPAddress{{IP: "2001:db8::40", PrefixLength: 64, Origin: v1alpha1.OriginManual}}
				g.Gateway = "2001:db8::1%x\n-x"
				return m
			},
			injected: "-x,64,2001:db8::53",
		},
		"a Windows DNS server": {
			migration: func() *v1alpha1.VirtualMachineMigration {
				m := windowsEFI()
				m.Status.Source.NICs[0].Guest.DNSServers = []string{"10.20.0.53", "::ffff:10.20.0.54%x\n--machine-readable=file:/etc/passwd"}
				m.Status.Source.NICs[0].Guest.Gateway = "::ffff:10.20.30.1"
				m.Status.Source.NICs[0].Guest.IPAddresses = []v1alpha1.GuestIPAddress{{IP: "::ffff:10.20.30.40", PrefixLength: 120, Origin: v1alpha1.OriginManual}}
				return m
			},
			injected: "--machine-readable=file:/etc/passwd",
		},
		"a Linux address": {
			migration: func() *v1alpha1.VirtualMachineMigration {
				m := linuxBIOS()
				g := m.Status.Source.NICs[0].Guest
				g.IPAddresses = append(g.IPAddresses, v1alpha1.GuestIPAddress{IP: "2001:db8::7%x\nnic 00:50:56:aa:bb:99 10.9.9.9 ens999"})
				return m
			},
			injected: "nic 00:50:56:aa:bb:99 10.9.9.9 ens999",
		},
	}
	bin := fakeV2VBin(t)
	runs, err := filepath.Abs(v2vFixtures)
	require.NoError(t, err, "locating the captured virt-v2v runs")
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := tc.migration()
			cm, err := RenderConversionConfigMap(m, 1, nil)
			if err == nil {
				// What the conversion pod would make of it.
				for _, line := range strings.Split(cm.Data[NetworkConfKey], "\n") {
					assert.False(t, strings.HasPrefix(line, tc.injected), "network.conf got a line of the guest's making: %q", line)
				}
				for _, line := range strings.Split(strings.TrimSpace(cm.Data[V2VArgsKey]), "\n") {
					assert.True(t, line == "" || strings.HasPrefix(line, "--mac="), "virt-v2v.args got an argument of the guest's making: %q", line)
				}
				run := runConvertScriptWith(t, bin, cm.Data,
					"FAKE_V2V_RUN="+filepath.Join(runs, "debian-bios-with-O"), "FAKE_V2V_VERSION=with-O")
				assert.NotContains(t, " "+run.args+" ", " "+tc.injected+" ", "virt-v2v-in-place got an argument of the guest's making")
				t.Fatalf("rendering the conversion accepted the guest's value (virt-v2v.args %q, network.conf %q)",
					cm.Data[V2VArgsKey], cm.Data[NetworkConfKey])
			}
			assert.ErrorContains(t, err, "newline", "the refusal says what is wrong with the value")
			assert.NotContains(t, err.Error(), "\n", "the refusal quotes the value, it does not repeat it")
		})
	}
}

// TestConversionWritesCanonicalAddresses: the conversion's files hold
// the guest's addresses in their canonical form only, and an address
// with a zone is refused even when the zone is harmless-looking.
func TestConversionWritesCanonicalAddresses(t *testing.T) {
	win := windowsEFI()
	g := win.Status.Source.NICs[0].Guest
	g.IPAddresses = []v1alpha1.GuestIPAddress{{IP: "2001:0DB8:0:0::40", PrefixLength: 64, Origin: v1alpha1.OriginManual}}
	g.Gateway, g.DNSServers = "2001:DB8::1", []string{"2001:db8:0::53"}
	args, err := v2vArgs(win)
	require.NoError(t, err)
	assert.Equal(t, []string{"--mac=00:50:56:9a:01:02:ip:2001:db8::40,2001:db8::1,64,2001:db8::53"}, args)

	linux := linuxBIOS()
	linux.Status.Source.NICs[0].Guest.IPAddresses[0].IP = "2001:DB8::21"
	conf, err := networkConf(linux)
	require.NoError(t, err)
	assert.Equal(t, "mode pin\nnic 00:50:56:aa:bb:01 2001:db8::21 ens192\n", conf)

	linux.Status.Source.NICs[0].Guest.IPAddresses[0].IP = "2001:db8::21%eth0"
	_, err = RenderConversionConfigMap(linux, 1, nil)
	assert.EqualError(t, err, `rendering network.conf: VMware Tools' address (status.source.nics[0].guest.ipAddresses[0].ip) "2001:db8::21%eth0" has a zone (%eth0)`)

	win.Status.Source.NICs[0].Guest.IPAddresses[0].PrefixLength = 200
	_, err = RenderConversionConfigMap(win, 1, nil)
	assert.ErrorContains(t, err, "has prefix length 200, not within the 128 bits of the address")
}

func TestCheckLineFields(t *testing.T) {
	assert.NoError(t, checkLineFields(NetworkConfKey, ""))
	assert.NoError(t, checkLineFields(NetworkConfKey, "mode pin\nnic 00:50:56:aa:bb:01 - ens192\n"))
	assert.EqualError(t, checkLineFields(NetworkConfKey, "mode pin\nnic 00:50:56:aa:bb:01  ens192\n"),
		`a field of line 2 of network.conf "" is empty`, "two spaces make an empty field")
	assert.EqualError(t, checkLineFields(NetworkConfKey, "mode pin\nnic 00:50:56:aa:bb:01 a\tb ens192\n"),
		`a field of line 2 of network.conf "a\tb" holds a tab at byte 1`)
	assert.EqualError(t, checkArguments([]string{"--mac=00:50:56:9a:01:02:ip:10.0.0.1", "--mac=x\n-x"}),
		`virt-v2v argument 2 "--mac=x\n-x" holds a newline at byte 7`)
}

// TestGuestNetworkAnswerIsBounded: the "nic" lines of the conversion's
// termination message are the guest network script's output, which ran
// inside the guest with the guest's own shell, awk and sed: a guest may
// print anything there. A line whose interface name, addresses or words
// are not what the script prints is taken as a guest that could not be
// read (nothing pinned, nothing of it in status but a quoted reason).
func TestGuestNetworkAnswerIsBounded(t *testing.T) {
	malformed := func(mac string) v1alpha1.InterfacePin {
		return v1alpha1.InterfacePin{MAC: mac, GuestUnreadable: true}
	}
	tests := map[string]struct {
		line string
		want v1alpha1.InterfacePin
	}{
		"what the script prints": {
			line: "nic 00:50:56:aa:bb:01 ens192 address pinned 192.168.10.21,2001:db8::21",
			want: v1alpha1.InterfacePin{MAC: "00:50:56:aa:bb:01", Name: "ens192", Source: v1alpha1.PinSourceAddress, Pinned: true,
				StaticAddresses: []string{"192.168.10.21", "2001:db8::21"}},
		},
		"an escape sequence in the name": {
			line: "nic 00:50:56:aa:bb:01 eth0\x1b]0;owned\x07 address pinned 192.168.10.21",
			want: malformed("00:50:56:aa:bb:01"),
		},
		"a name systemd would refuse": {
			line: "nic 00:50:56:aa:bb:01 ../../etc/x address pinned 192.168.10.21",
			want: malformed("00:50:56:aa:bb:01"),
		},
		"a name too long": {
			line: "nic 00:50:56:aa:bb:01 averyveryverylongname address pinned -",
			want: malformed("00:50:56:aa:bb:01"),
		},
		"an address with a zone": {
			line: "nic 00:50:56:aa:bb:01 ens192 address pinned 2001:db8::21%ens192",
			want: malformed("00:50:56:aa:bb:01"),
		},
		"an address that is not one": {
			line: "nic 00:50:56:aa:bb:01 ens192 address pinned 192.168.10.21;reboot",
			want: malformed("00:50:56:aa:bb:01"),
		},
		"an address not in canonical form": {
			line: "nic 00:50:56:aa:bb:01 ens192 address pinned 2001:DB8::21",
			want: v1alpha1.InterfacePin{MAC: "00:50:56:aa:bb:01", Name: "ens192", Source: v1alpha1.PinSourceAddress, Pinned: true,
				StaticAddresses: []string{"2001:db8::21"}},
		},
		"a word the script does not print": {
			line: "nic 00:50:56:aa:bb:01 ens192 registry owned -",
			want: malformed("00:50:56:aa:bb:01"),
		},
		"a control character in the reason": {
			line: "nic 00:50:56:aa:bb:01 - - - - no network configuration\x1b[2J names this NIC",
			want: malformed("00:50:56:aa:bb:01"),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, _, pins := cutConversionChain(tc.line)
			if !assert.Len(t, pins, 1) {
				return
			}
			got := pins[0]
			if tc.want.GuestUnreadable {
				assert.Contains(t, got.Message, "the guest's answer for this NIC is not what the guest network script prints", "the reason says so")
				assert.NotContains(t, got.Message, "\x1b", "the reason is quoted, never repeated")
				got.Message = ""
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestVSphereStringsAreBounded: what vSphere names (the VM, its
// networks, its disks' files, its datacenter, its UUIDs) reaches the
// domain XML virt-v2v reads, the transfer's job spec and the migrated
// VM's annotations: a control or format character in any of them fails
// the rendering (RenderFailed, in Validating, before the source is
// touched), naming the field and quoting the value.
func TestVSphereStringsAreBounded(t *testing.T) {
	tests := map[string]struct {
		mod   func(*v1alpha1.VirtualMachineMigration)
		field string
	}{
		"the VM's name": {func(m *v1alpha1.VirtualMachineMigration) { m.Status.Source.Name = "web-01\n</name><devices>" }, "status.source.name"},
		"a network's name": {func(m *v1alpha1.VirtualMachineMigration) {
			// the mapping names the network as vSphere does
			m.Status.Source.NICs[0].Network, m.Spec.Target.Networks[0].Source = "VM Network\x1b[2J", "VM Network\x1b[2J"
			m.Status.AppliedSpec = m.Spec.DeepCopy()
		}, "status.source.nics[0].network"},
		"a disk's file": {func(m *v1alpha1.VirtualMachineMigration) {
			m.Status.Source.Disks[0].FileName = "[datastore1] web-01/web-01.vmdk\n"
		}, "status.source.disks[0].fileName"},
		"the datacenter":     {func(m *v1alpha1.VirtualMachineMigration) { m.Status.Source.Datacenter = "dc1\u202e" }, "status.source.datacenter"},
		"the VM's reference": {func(m *v1alpha1.VirtualMachineMigration) { m.Status.Source.MoRef = "vm-42 vm-43" }, "status.source.moRef"},
		"the BIOS UUID":      {func(m *v1alpha1.VirtualMachineMigration) { m.Status.Source.BIOSUUID = "421a2b3c\n" }, "status.source.biosUUID"},
		"the server's UUID":  {func(m *v1alpha1.VirtualMachineMigration) { m.Status.Source.Server = "0f9e8d7c\x00" }, "status.source.server"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := linuxBIOS()
			tc.mod(m)
			_, err := RenderPlan(m, testConfig)
			require.Error(t, err, "rendering took %s", tc.field)
			assert.Contains(t, err.Error(), tc.field, "the refusal names the field")
			for _, r := range err.Error() {
				assert.False(t, r < ' ' || r == '\u202e', "the refusal quotes the value, it does not repeat it: %q", err.Error())
			}
		})
	}
	_, err := RenderPlan(windowsEFI(), testConfig)
	assert.NoError(t, err, "spaces and parentheses in a VM's name are no control characters")
}

// TestConversionReportIsCleaned: virt-v2v reads the guest's product name
// (its /etc/os-release, its registry) and words its warnings from the
// guest's files: what of it reaches status and describe holds no control
// or format characters (a terminal would act on an escape sequence).
func TestConversionReportIsCleaned(t *testing.T) {
	msg := strings.Join([]string{
		"i_distro = debian",
		"i_major_version = 12",
		"i_minor_version = 15",
		"i_product_name = Debian\x1b]0;owned\x07 GNU/Linux 12",
		warningsHeading,
		`{ "message": "could not update \u001b[2Jgrub\u202e", "timestamp": "2024-05-01T10:00:00Z", "type": "warning" }`,
	}, "\n")
	var o statemachine.JobObservation
	o.Succeeded = true
	observeConversion(&o, msg, true)
	for _, s := range append([]string{o.OperatingSystem}, o.Warnings...) {
		assert.NotEmpty(t, s)
		for _, r := range s {
			assert.False(t, r < ' ' || r == 0x7f || r == '\u202e', "%q holds %U", s, r)
		}
	}
	assert.Contains(t, o.OperatingSystem, "debian 12.15")
	assert.Len(t, o.Warnings, 1)

	failed := statemachine.JobObservation{Failed: true}
	observeConversion(&failed, `{ "message": "inspection could not detect the source guest\u001b[2J", "type": "error" }`, false)
	assert.Equal(t, "virt-v2v: inspection could not detect the source guest\ufffd[2J", failed.Message)
	assert.Equal(t, statemachine.ConversionInspectionFailed, failed.Reason, "classified as before")
}

// TestVMIInterfacesAreCleaned: the interfaces KubeVirt reports come from
// the migrated guest's agent: status keeps them without control
// characters, bounded with the cut marked, and its addresses in their
// canonical form (the network identity check compares them with the
// source's).
func TestVMIInterfacesAreCleaned(t *testing.T) {
	got := vmiInterfaces([]kubevirtv1.VirtualMachineInstanceNetworkInterface{{
		Name: "net-0", MAC: "00:50:56:aa:bb:01", InterfaceName: "eth0\x1b]0;owned\x07" + strings.Repeat("x", 300),
		IPs: []string{"2001:DB8::21", "192.168.10.21\n", "10.0.0.9"}, InfoSource: "domain, guest-agent",
	}})
	assert.Equal(t, []v1alpha1.TargetInterface{{
		Name: "net-0", MAC: "00:50:56:aa:bb:01", InterfaceName: "eth0\ufffd]0;owned\ufffd" + strings.Repeat("x", maxVMIString-len("eth0\ufffd]0;owned\ufffd")-3) + "...",
		IPAddresses: []string{"2001:db8::21", "192.168.10.21\ufffd", "10.0.0.9"}, InfoSource: "domain, guest-agent",
	}}, got)
}
