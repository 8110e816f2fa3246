package vcsimlocal

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

// GuestNIC is what VMware Tools in a running guest reports of one NIC
// (guest.net), and the default route through it (guest.ipStack).
type GuestNIC struct {
	// Addresses of the NIC in the guest.
	Addresses []GuestAddress
	// Gateway is the guest's default gateway through this NIC, if any.
	Gateway string
	// DNS servers the guest uses (reported on the NIC, and for the first
	// NIC that names any, as the guest's own).
	DNS []string
}

// GuestAddress is one address of a guest NIC.
type GuestAddress struct {
	// CIDR is the address with its prefix length, "192.168.10.21/24".
	CIDR string
	// Origin is VMware Tools' origin of the address: "" (open-vm-tools on
	// Linux says none), manual, dhcp, linklayer, random or other.
	Origin string
}

// SetGuestNetwork makes the VM report its guest's network as VMware Tools
// does while the guest runs: guest.net, one entry per NIC in order (its
// MAC, network, device key, addresses with prefix and origin, DNS), and
// guest.ipStack (the default routes, each naming its NIC's index, and
// the DNS servers). nics[i] is the VM's i-th NIC; a nil entry reports the
// NIC with no address.
func (s *Server) SetGuestNetwork(ctx context.Context, name string, nics []*GuestNIC) error {
	vm, err := s.vm(ctx, name)
	if err != nil {
		return err
	}
	devices, err := vm.Device(ctx)
	if err != nil {
		return fmt.Errorf("reading the devices of %s: %w", name, err)
	}
	cards := devices.SelectByType((*types.VirtualEthernetCard)(nil))
	if len(nics) > len(cards) {
		return fmt.Errorf("VM %s has %d NICs, %d given", name, len(cards), len(nics))
	}
	var net []types.GuestNicInfo
	stack := types.GuestStackInfo{IpRouteConfig: &types.NetIpRouteConfigInfo{}}
	for i, card := range cards {
		info, route, err := guestNicInfo(card.(types.BaseVirtualEthernetCard).GetVirtualEthernetCard(), nicAt(nics, i), i)
		if err != nil {
			return fmt.Errorf("VM %s, NIC %d: %w", name, i, err)
		}
		net = append(net, info)
		if route != nil {
			stack.IpRouteConfig.IpRoute = append(stack.IpRouteConfig.IpRoute, *route)
		}
		if g := nicAt(nics, i); g != nil && len(g.DNS) > 0 && stack.DnsConfig == nil {
			stack.DnsConfig = &types.NetDnsConfigInfo{IpAddress: g.DNS}
		}
	}
	reg := s.model.Map()
	obj := reg.Get(vm.Reference())
	var sim *simulator.VirtualMachine
	switch o := obj.(type) {
	case *simulator.VirtualMachine:
		sim = o
	case *guestVM:
		sim = o.VirtualMachine
	default:
		return fmt.Errorf("VM %s is not a simulator VM (%T)", name, obj)
	}
	sctx := &simulator.Context{Context: ctx, Map: reg}
	sctx.WithLock(obj, func() {
		sctx.Update(sim, []types.PropertyChange{
			{Name: "guest.net", Val: net},
			{Name: "guest.ipStack", Val: []types.GuestStackInfo{stack}},
		})
	})
	return nil
}

func nicAt(nics []*GuestNIC, i int) *GuestNIC {
	if i < len(nics) {
		return nics[i]
	}
	return nil
}

// guestNicInfo is one NIC's guest.net entry, and its default route.
func guestNicInfo(card *types.VirtualEthernetCard, g *GuestNIC, index int) (types.GuestNicInfo, *types.NetIpRouteConfigInfoIpRoute, error) {
	info := types.GuestNicInfo{MacAddress: strings.ToLower(card.MacAddress), DeviceConfigId: card.Key, Connected: true}
	if d := card.DeviceInfo; d != nil {
		info.Network = d.GetDescription().Summary
	}
	if g == nil {
		return info, nil, nil
	}
	info.IpConfig = &types.NetIpConfigInfo{}
	for _, a := range g.Addresses {
		p, err := netip.ParsePrefix(a.CIDR)
		if err != nil {
			return info, nil, fmt.Errorf("address %q: %w", a.CIDR, err)
		}
		info.IpAddress = append(info.IpAddress, p.Addr().String())
		info.IpConfig.IpAddress = append(info.IpConfig.IpAddress, types.NetIpConfigInfoIpAddress{
			IpAddress: p.Addr().String(), PrefixLength: int32(p.Bits()), Origin: a.Origin, State: "preferred"})
	}
	if len(g.DNS) > 0 {
		info.DnsConfig = &types.NetDnsConfigInfo{IpAddress: g.DNS}
	}
	if g.Gateway == "" {
		return info, nil, nil
	}
	gw, err := netip.ParseAddr(g.Gateway)
	if err != nil {
		return info, nil, fmt.Errorf("gateway %q: %w", g.Gateway, err)
	}
	network := "0.0.0.0"
	if gw.Is6() {
		network = "::"
	}
	return info, &types.NetIpRouteConfigInfoIpRoute{Network: network,
		Gateway: types.NetIpRouteConfigInfoGateway{IpAddress: gw.String(), Device: strconv.Itoa(index)}}, nil
}
