package vsphere

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"

	"platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// setGuestNetwork makes the simulator report guest.net and guest.ipStack
// for a VM, as VMware Tools in a running guest does.
func setGuestNetwork(t *testing.T, env *simEnv, vm types.ManagedObjectReference, net []types.GuestNicInfo, stack []types.GuestStackInfo) {
	t.Helper()
	sim, ok := env.model.Map().Get(vm).(*simulator.VirtualMachine)
	require.True(t, ok, "VM %s not in the simulator", vm.Value)
	ctx := &simulator.Context{Context: testCtx(t), Map: env.model.Map()}
	ctx.WithLock(sim, func() {
		ctx.Update(sim, []types.PropertyChange{{Name: "guest.net", Val: net}, {Name: "guest.ipStack", Val: stack}})
	})
}

func TestInventoryGuestNetwork(t *testing.T) {
	env := newSim(t, vpx, nil)
	s := env.connect(t)
	ctx := testCtx(t)
	vm := buildVM(t, s, "netid-vm", []diskSpec{{ctrl: "pvscsi", sizeMiB: 16, prov: ProvisioningThin}}, []nicSpec{
		{adapter: "vmxnet3", network: "VM Network", mac: "00:50:56:aa:10:01"},
		{adapter: "vmxnet3", network: "VM Network", mac: "00:50:56:aa:10:02"},
		{adapter: "e1000", network: "VM Network", mac: "00:50:56:aa:10:03"},
	})
	devs := readDevices(t, s, vm).SelectByType((*types.VirtualEthernetCard)(nil))
	require.Len(t, devs, 3)
	key := func(i int) int32 { return devs[i].GetVirtualDevice().Key }
	// VMware's PCI slot of the first NIC, as a real host assigns it.
	first := devs[0].(types.BaseVirtualEthernetCard).GetVirtualEthernetCard()
	first.SlotInfo = &types.VirtualDevicePciBusSlotInfo{PciSlotNumber: 192}
	reconfigure(t, vm, types.VirtualMachineConfigSpec{DeviceChange: []types.BaseVirtualDeviceConfigSpec{
		&types.VirtualDeviceConfigSpec{Operation: types.VirtualDeviceConfigSpecOperationEdit, Device: devs[0]},
	}})
	setGuestNetwork(t, env, vm.Reference(), []types.GuestNicInfo{
		{ // the first NIC: static IPv4 with its own DNS, a link-local IPv6
			MacAddress: "00:50:56:aa:10:01", DeviceConfigId: key(0), Connected: true,
			IpAddress: []string{"192.168.10.21", "fe80::250:56ff:feaa:1001"},
			IpConfig: &types.NetIpConfigInfo{IpAddress: []types.NetIpConfigInfoIpAddress{
				{IpAddress: "192.168.10.21", PrefixLength: 24},
				{IpAddress: "fe80::250:56ff:feaa:1001", PrefixLength: 64, Origin: "linklayer"},
			}},
			DnsConfig: &types.NetDnsConfigInfo{IpAddress: []string{"192.168.10.2"}},
		},
		{ // the second, matched by MAC only (no deviceConfigId), on DHCP
			MacAddress: "00:50:56:AA:10:02", Connected: true,
			IpConfig: &types.NetIpConfigInfo{IpAddress: []types.NetIpConfigInfoIpAddress{
				{IpAddress: "10.20.0.57", PrefixLength: 16, Origin: "dhcp"},
			}},
		},
		{ // a device of the guest's own (a container bridge): no NIC's
			MacAddress: "02:42:ac:11:00:01", DeviceConfigId: -1, IpAddress: []string{"172.17.0.1"},
		},
	}, []types.GuestStackInfo{{
		DnsConfig: &types.NetDnsConfigInfo{IpAddress: []string{"10.20.0.1", "10.20.0.2"}},
		IpRouteConfig: &types.NetIpRouteConfigInfo{IpRoute: []types.NetIpRouteConfigInfoIpRoute{
			{Network: "192.168.10.0", PrefixLength: 24, Gateway: types.NetIpRouteConfigInfoGateway{Device: "0"}},
			{Network: "0.0.0.0", PrefixLength: 0, Gateway: types.NetIpRouteConfigInfoGateway{IpAddress: "192.168.10.1", Device: "0"}},
			{Network: "0.0.0.0", PrefixLength: 0, Gateway: types.NetIpRouteConfigInfoGateway{IpAddress: "10.20.0.1", Device: "1"}},
		}},
	}})

	inv, err := Inventory(ctx, s, vm)
	require.NoError(t, err)
	require.Len(t, inv.NICs, 3)
	assert.Equal(t, &v1alpha1.GuestNICInfo{
		IPAddresses: []v1alpha1.GuestIPAddress{
			{IP: "192.168.10.21", PrefixLength: 24},
			{IP: "fe80::250:56ff:feaa:1001", PrefixLength: 64, Origin: "linklayer"},
		},
		Gateway:    "192.168.10.1",
		DNSServers: []string{"192.168.10.2"},
	}, inv.NICs[0].Guest)
	assert.Equal(t, &v1alpha1.GuestNICInfo{
		IPAddresses: []v1alpha1.GuestIPAddress{{IP: "10.20.0.57", PrefixLength: 16, Origin: "dhcp"}},
		Gateway:     "10.20.0.1",
		DNSServers:  []string{"10.20.0.1", "10.20.0.2"},
	}, inv.NICs[1].Guest)
	assert.Nil(t, inv.NICs[2].Guest, "VMware Tools reported nothing of the third NIC")
	require.NotNil(t, inv.NICs[0].PCISlotNumber)
	assert.Equal(t, int32(192), *inv.NICs[0].PCISlotNumber)
	assert.Nil(t, inv.NICs[1].PCISlotNumber)
	assert.True(t, inv.GuestNetworkReported())
	assert.Equal(t, []v1alpha1.GuestIPAddress{{IP: "192.168.10.21", PrefixLength: 24}}, inv.NICs[0].CandidateAddresses())
	assert.Empty(t, inv.NICs[1].CandidateAddresses(), "a DHCP lease is not the guest's to keep")
}

func TestInventoryWithoutGuestNetwork(t *testing.T) {
	env := newSim(t, esx, nil)
	s := env.connect(t)
	vm := buildVM(t, s, "quiet-vm", []diskSpec{{ctrl: "pvscsi", sizeMiB: 16, prov: ProvisioningThin}},
		[]nicSpec{{adapter: "vmxnet3", network: "VM Network", mac: "00:50:56:aa:11:01"}})
	inv, err := Inventory(testCtx(t), s, vm)
	require.NoError(t, err)
	require.Len(t, inv.NICs, 1)
	assert.Nil(t, inv.NICs[0].Guest, "vcsim reports the NIC's MAC but no address")
	assert.False(t, inv.GuestNetworkReported())
}

func TestGatewayFor(t *testing.T) {
	gw := func(ip string, device int) defaultRoute {
		r, _ := guestStack([]types.GuestStackInfo{{IpRouteConfig: &types.NetIpRouteConfigInfo{IpRoute: []types.NetIpRouteConfigInfoIpRoute{
			{Network: "0.0.0.0", Gateway: types.NetIpRouteConfigInfoGateway{IpAddress: ip}},
		}}}}, &guestReport{})
		r[0].device = device
		return r[0]
	}
	tests := map[string]struct {
		addrs  []v1alpha1.GuestIPAddress
		routes []defaultRoute
		index  int
		want   string
	}{
		"on the subnet":               {[]v1alpha1.GuestIPAddress{{IP: "10.0.0.5", PrefixLength: 8}}, []defaultRoute{gw("192.168.1.1", 0), gw("10.0.0.1", 1)}, 0, "10.0.0.1"},
		"by the route's device index": {[]v1alpha1.GuestIPAddress{{IP: "10.0.0.5"}}, []defaultRoute{gw("10.9.9.9", 2)}, 2, "10.9.9.9"},
		"neither":                     {[]v1alpha1.GuestIPAddress{{IP: "10.0.0.5", PrefixLength: 24}}, []defaultRoute{gw("10.9.9.9", 1)}, 0, ""},
		"IPv6 on its subnet":          {[]v1alpha1.GuestIPAddress{{IP: "fd00::5", PrefixLength: 64}}, []defaultRoute{gw("10.0.0.1", -1), gw("fd00::1", -1)}, 0, "fd00::1"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, gatewayFor(tc.addrs, tc.routes, tc.index))
		})
	}
}

// TestInventoryRefusesMalformedGuestNetwork: what VMware Tools report
// comes from inside the guest. An address with a zone (of any bytes:
// a newline too), a gateway or DNS server that is not an address, a
// prefix length beyond the address's bits never reach the inventory's
// NICs; every other value is kept in its canonical form.
func TestInventoryRefusesMalformedGuestNetwork(t *testing.T) {
	env := newSim(t, vpx, nil)
	s := env.connect(t)
	vm := buildVM(t, s, "hostile-vm", []diskSpec{{ctrl: "pvscsi", sizeMiB: 16, prov: ProvisioningThin}},
		[]nicSpec{{adapter: "vmxnet3", network: "VM Network", mac: "00:50:56:aa:12:01"}})
	key := readDevices(t, s, vm).SelectByType((*types.VirtualEthernetCard)(nil))[0].GetVirtualDevice().Key
	setGuestNetwork(t, env, vm.Reference(), []types.GuestNicInfo{{
		MacAddress: "00:50:56:aa:12:01", DeviceConfigId: key, Connected: true,
		IpConfig: &types.NetIpConfigInfo{IpAddress: []types.NetIpConfigInfoIpAddress{
			{IpAddress: "2001:DB8::21", PrefixLength: 64, Origin: "MANUAL"},
			{IpAddress: "2001:db8::7%x\n--root=/dev/sdb9", PrefixLength: 64, Origin: "manual"},
			{IpAddress: "fe80::1%eth0", PrefixLength: 64, Origin: "linklayer"},
			{IpAddress: "192.168.12.21", PrefixLength: 200, Origin: "manual"},
			{IpAddress: "192.168.12.22", PrefixLength: 24, Origin: "manual"},
		}},
		DnsConfig: &types.NetDnsConfigInfo{IpAddress: []string{"192.168.12.2", "192.168.12.3\n-x"}},
	}}, []types.GuestStackInfo{{
		IpRouteConfig: &types.NetIpRouteConfigInfo{IpRoute: []types.NetIpRouteConfigInfoIpRoute{
			{Network: "::", PrefixLength: 0, Gateway: types.NetIpRouteConfigInfoGateway{IpAddress: "2001:db8::1%x\n-O /etc/shadow", Device: "0"}},
			{Network: "0.0.0.0", PrefixLength: 0, Gateway: types.NetIpRouteConfigInfoGateway{IpAddress: "192.168.12.1", Device: "0"}},
		}},
	}})

	inv, err := Inventory(testCtx(t), s, vm)
	require.NoError(t, err)
	require.Len(t, inv.NICs, 1)
	assert.Equal(t, &v1alpha1.GuestNICInfo{
		IPAddresses: []v1alpha1.GuestIPAddress{
			{IP: "2001:db8::21", PrefixLength: 64, Origin: v1alpha1.OriginManual},
			{IP: "192.168.12.22", PrefixLength: 24, Origin: v1alpha1.OriginManual},
		},
		Gateway:    "192.168.12.1",
		DNSServers: []string{"192.168.12.2"},
	}, inv.NICs[0].Guest, "only addresses, in their canonical form, without zones")
	nic := "guest.net[0] (" + inv.NICs[0].Label + ")"
	assert.Equal(t, []string{
		`guest.ipStack[0] default gateway "2001:db8::1%x\n-O /etc/shadow" holds a newline at byte 13`,
		nic + ` address "2001:db8::7%x\n--root=/dev/sdb9" holds a newline at byte 13`,
		nic + ` address "fe80::1%eth0" has a zone (%eth0)`,
		nic + ` address "192.168.12.21/200" has prefix length 200, not within the 32 bits of the address`,
		nic + ` DNS server "192.168.12.3\n-x" holds a newline at byte 12`,
	}, inv.GuestNetworkRejected, "every value refused is recorded, quoted, for preflight to refuse the migration")
	for _, r := range inv.GuestNetworkRejected {
		assert.NotContains(t, r, "\n", "a refused value is quoted, never repeated")
	}
}
