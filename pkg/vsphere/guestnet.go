package vsphere

import (
	"net/netip"
	"strconv"
	"strings"

	"github.com/vmware/govmomi/vim25/types"

	"platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// guestNetProperties are what VMware Tools reports of the guest's network
// from inside it: per NIC its addresses (guest.net), and the guest's
// routes and resolvers (guest.ipStack). A guest without running tools, or
// a VM that is off, reports neither.
var guestNetProperties = []string{"guest.net", "guest.ipStack"}

// Bounds of what is kept of a guest NIC (the status schema's).
const (
	maxGuestAddresses  = 32
	maxGuestDNSServers = 8
)

// pciSlot is a device's PCI slot number, nil when vSphere gives none.
func pciSlot(info types.BaseVirtualDeviceBusSlotInfo) *int32 {
	if s, ok := info.(*types.VirtualDevicePciBusSlotInfo); ok && s.PciSlotNumber > 0 {
		n := s.PciSlotNumber
		return &n
	}
	return nil
}

// addGuestNetwork fills each NIC's Guest from what VMware Tools reported:
// a guest.net entry belongs to the NIC whose device key is its
// deviceConfigId (else whose MAC address it has; an entry of the guest's
// own, deviceConfigId -1, belongs to none), its addresses with their
// prefix and origin, its DNS servers (else the guest's), and the default
// gateway that lies on one of its subnets (else the one whose route names
// its index in guest.net).
func addGuestNetwork(nics []v1alpha1.SourceNIC, g *types.GuestInfo) {
	if g == nil {
		return
	}
	gateways, dns := guestStack(g.IpStack)
	for i, info := range g.Net {
		n := nicFor(nics, info)
		if n == nil {
			continue
		}
		out := &v1alpha1.GuestNICInfo{IPAddresses: guestAddresses(info)}
		out.DNSServers = dns
		if info.DnsConfig != nil && len(info.DnsConfig.IpAddress) > 0 {
			out.DNSServers = info.DnsConfig.IpAddress
		}
		out.DNSServers = boundedStrings(out.DNSServers, maxGuestDNSServers)
		out.Gateway = gatewayFor(out.IPAddresses, gateways, i)
		if len(out.IPAddresses) == 0 && out.Gateway == "" {
			continue
		}
		n.Guest = out
	}
}

// nicFor finds the NIC a guest.net entry describes.
func nicFor(nics []v1alpha1.SourceNIC, info types.GuestNicInfo) *v1alpha1.SourceNIC {
	if info.DeviceConfigId < 0 {
		return nil
	}
	for i := range nics {
		if info.DeviceConfigId != 0 && nics[i].Key == info.DeviceConfigId {
			return &nics[i]
		}
	}
	for i := range nics {
		if info.MacAddress != "" && strings.EqualFold(nics[i].MAC, info.MacAddress) {
			return &nics[i]
		}
	}
	return nil
}

// guestAddresses are a guest.net entry's addresses: from ipConfig (with
// prefix and origin) where the tools gave it, else the bare list.
func guestAddresses(info types.GuestNicInfo) []v1alpha1.GuestIPAddress {
	var out []v1alpha1.GuestIPAddress
	if c := info.IpConfig; c != nil && len(c.IpAddress) > 0 {
		for _, a := range c.IpAddress {
			out = append(out, v1alpha1.GuestIPAddress{IP: a.IpAddress, PrefixLength: a.PrefixLength, Origin: a.Origin})
		}
	} else {
		for _, ip := range info.IpAddress {
			out = append(out, v1alpha1.GuestIPAddress{IP: ip})
		}
	}
	if len(out) > maxGuestAddresses {
		out = out[:maxGuestAddresses]
	}
	return out
}

// defaultRoute is a default route's gateway and the guest.net index its
// route names (-1 when it names none).
type defaultRoute struct {
	gateway netip.Addr
	device  int
}

// guestStack reads the default gateways and the guest-wide DNS servers.
func guestStack(stacks []types.GuestStackInfo) ([]defaultRoute, []string) {
	var routes []defaultRoute
	var dns []string
	for _, st := range stacks {
		if st.DnsConfig != nil && len(dns) == 0 {
			dns = st.DnsConfig.IpAddress
		}
		if st.IpRouteConfig == nil {
			continue
		}
		for _, r := range st.IpRouteConfig.IpRoute {
			gw, err := netip.ParseAddr(r.Gateway.IpAddress)
			if err != nil || r.PrefixLength != 0 || gw.IsUnspecified() {
				continue
			}
			if nw, err := netip.ParseAddr(r.Network); err != nil || !nw.IsUnspecified() {
				continue
			}
			device, err := strconv.Atoi(r.Gateway.Device)
			if err != nil {
				device = -1
			}
			routes = append(routes, defaultRoute{gateway: gw, device: device})
		}
	}
	return routes, dns
}

// gatewayFor picks the default gateway of the NIC at index i of guest.net:
// the first that lies on one of its subnets, else the first whose route
// names it.
func gatewayFor(addrs []v1alpha1.GuestIPAddress, routes []defaultRoute, i int) string {
	for _, r := range routes {
		for _, a := range addrs {
			ip, err := netip.ParseAddr(a.IP)
			if err != nil || a.PrefixLength <= 0 || ip.Is4() != r.gateway.Is4() {
				continue
			}
			if p, err := ip.Prefix(int(a.PrefixLength)); err == nil && p.Contains(r.gateway) {
				return r.gateway.String()
			}
		}
	}
	for _, r := range routes {
		if r.device == i {
			return r.gateway.String()
		}
	}
	return ""
}

// boundedStrings keeps at most n strings, in a copy.
func boundedStrings(s []string, n int) []string {
	if len(s) > n {
		s = s[:n]
	}
	if len(s) == 0 {
		return nil
	}
	return append([]string(nil), s...)
}
