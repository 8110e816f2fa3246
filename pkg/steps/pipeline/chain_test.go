package pipeline

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/utils/ptr"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
)

func TestCutConversionChain(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	msg := strings.Join([]string{
		"tree disk-0 1610612736 " + sum + " 4194304",
		"tree disk-1 42 " + strings.ToUpper(sum) + " 42", // not lower-case hex
		"tree disk-3 42 " + sum + " 43",                  // more re-hashed than the disk holds
		"tree disk-4 42 " + sum,                          // no re-hashed bytes
		"sha256 disk-5 42 " + sum,                        // the whole-image checksum of an earlier version
		"nic 00:50:56:AA:BB:01 ens192 address pinned 192.168.10.21,fd00::21",
		"nic 00:50:56:aa:bb:02 - - - - no network configuration in the guest names this NIC",
		"nic not-a-mac ens1 address pinned -",
		"i_distro = debian",
		"i_major_version = 12",
		"i_minor_version = 15",
		"tree disk-2 1610612736 " + sum[:40], // cut by the kubelet
	}, "\n")
	rest, sums, pins := cutConversionChain(msg)
	assert.Equal(t, "sha256 disk-5 42 "+sum+"\ni_distro = debian\ni_major_version = 12\ni_minor_version = 15", rest)
	assert.Equal(t, []statemachine.ImageChecksum{{Disk: "disk-0", Bytes: 1610612736, Size: 1610612736, SHA256: sum, Rehashed: 4 << 20}}, sums)
	assert.Equal(t, []v1alpha1.InterfacePin{
		{MAC: "00:50:56:aa:bb:01", Name: "ens192", Source: v1alpha1.PinSourceAddress, Pinned: true, StaticAddresses: []string{"192.168.10.21", "fd00::21"}},
		{MAC: "00:50:56:aa:bb:02", Message: "no network configuration in the guest names this NIC"},
	}, pins)
}

func TestNetworkConf(t *testing.T) {
	networkConf := func(m *v1alpha1.VirtualMachineMigration) string {
		t.Helper()
		conf, err := networkConf(m)
		assert.NoError(t, err)
		return conf
	}
	m := linuxBIOS()
	assert.Equal(t, "mode pin\nnic 00:50:56:aa:bb:01 192.168.10.21 ens192\n", networkConf(m))

	off := linuxBIOS()
	off.Status.AppliedSpec.Target.PreserveStaticIPs = ptr.To(false)
	assert.Equal(t, "mode inspect\nnic 00:50:56:aa:bb:01 192.168.10.21 ens192\n", networkConf(off), "the guest is looked at, not changed")

	noMACs := linuxBIOS()
	noMACs.Status.AppliedSpec.Target.PreserveMACAddresses = ptr.To(false)
	assert.Contains(t, networkConf(noMACs), "mode inspect\n", "a name pinned to a MAC the VM will not have would do nothing")

	bare := linuxBIOS()
	bare.Status.Source.NICs[0].Guest, bare.Status.Source.NICs[0].PCISlotNumber = nil, nil
	assert.Empty(t, networkConf(bare), "nothing to look for")

	assert.Empty(t, networkConf(windowsEFI()), "Windows guests get virt-v2v's --mac instead")
}

func TestV2VArgs(t *testing.T) {
	v2vArgs := func(m *v1alpha1.VirtualMachineMigration) []string {
		t.Helper()
		args, err := v2vArgs(m)
		assert.NoError(t, err)
		return args
	}
	assert.Equal(t, []string{
		"--mac=00:50:56:9a:01:02:ip:10.20.30.40,10.20.30.1,24,10.20.0.53,10.20.1.53",
		"--mac=00:50:56:9a:01:02:ip:2001:db8::40",
	}, v2vArgs(windowsEFI()), "manual addresses only; no IPv6 gateway, so the address alone")
	off := windowsEFI()
	off.Status.AppliedSpec.Target.PreserveStaticIPs = ptr.To(false)
	assert.Empty(t, v2vArgs(off))
	assert.Empty(t, v2vArgs(linuxBIOS()), "Linux guests are pinned in the guest instead")
}
