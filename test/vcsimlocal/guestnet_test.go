package vcsimlocal

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/vsphere"
)

// TestGuestNetwork: a VM whose NICs carry guest data reports it as VMware
// Tools does, and the controller's inventory reads it back per NIC, with
// the PCI slots; SetGuestNetwork changes it later.
func TestGuestNetwork(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Start(ctx, Options{})
	require.NoError(t, err)
	defer s.Close()
	spec := SmallVM("net-01", 7)
	spec.NICs = []NICSpec{
		{Network: NetworkVM, MAC: "00:50:56:01:00:01", PCISlot: 192, Guest: &GuestNIC{
			Addresses: []GuestAddress{{CIDR: "192.168.10.21/24"}, {CIDR: "fe80::250:56ff:fe01:1/64", Origin: "linklayer"}},
			Gateway:   "192.168.10.1", DNS: []string{"192.168.10.2"}}},
		{Network: NetworkDVPG, MAC: "00:50:56:01:00:02", PCISlot: 224, Guest: &GuestNIC{
			Addresses: []GuestAddress{{CIDR: "10.20.0.57/16", Origin: "dhcp"}}}},
	}
	_, err = s.AddVM(ctx, spec)
	require.NoError(t, err)

	inventory := func() *v1alpha1.SourceInventory {
		sess := connect(ctx, t, s, Datacenter)
		defer func() { _ = sess.Logout(context.Background()) }()
		vm, err := vsphere.FindVM(ctx, sess, v1alpha1.VMSelector{Name: "net-01"})
		require.NoError(t, err)
		inv, err := vsphere.Inventory(ctx, sess, vm)
		require.NoError(t, err)
		return inv
	}
	inv := inventory()
	require.Len(t, inv.NICs, 2)
	first, second := inv.NICs[0], inv.NICs[1]
	assert.Equal(t, "00:50:56:01:00:01", first.MAC)
	require.NotNil(t, first.PCISlotNumber)
	assert.Equal(t, int32(192), *first.PCISlotNumber)
	assert.Equal(t, &v1alpha1.GuestNICInfo{
		IPAddresses: []v1alpha1.GuestIPAddress{{IP: "192.168.10.21", PrefixLength: 24}, {IP: "fe80::250:56ff:fe01:1", PrefixLength: 64, Origin: "linklayer"}},
		Gateway:     "192.168.10.1", DNSServers: []string{"192.168.10.2"},
	}, first.Guest)
	require.NotNil(t, second.PCISlotNumber)
	assert.Equal(t, int32(224), *second.PCISlotNumber)
	assert.Equal(t, &v1alpha1.GuestNICInfo{
		IPAddresses: []v1alpha1.GuestIPAddress{{IP: "10.20.0.57", PrefixLength: 16, Origin: "dhcp"}},
		DNSServers:  []string{"192.168.10.2"},
	}, second.Guest, "the guest-wide DNS servers where the NIC names none")

	// The guest's network changes: only the second NIC has an address now.
	require.NoError(t, s.SetGuestNetwork(ctx, "net-01", []*GuestNIC{nil, {Addresses: []GuestAddress{{CIDR: "10.20.0.58/16", Origin: "dhcp"}}}}))
	inv = inventory()
	assert.Nil(t, inv.NICs[0].Guest)
	require.NotNil(t, inv.NICs[1].Guest)
	assert.Equal(t, "10.20.0.58", inv.NICs[1].Guest.IPAddresses[0].IP)
	assert.Error(t, s.SetGuestNetwork(ctx, "net-01", make([]*GuestNIC, 3)), "more NICs than the VM has")
}
