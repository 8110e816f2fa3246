package vsphere

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/vmware/govmomi/vim25/types"

	"platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/untrusted"
)

// guestNetProperties are what VMware Tools reports of the guest's network
// from inside it: per NIC its addresses (guest.net), and the guest's
// routes and resolvers (guest.ipStack). A guest without running tools, or
// a VM that is off, reports neither.
var guestNetProperties = []string{"guest.net", "guest.ipStack"}

// Bounds of what is kept of a guest NIC, and of the values refused (the
// status schema's).
const (
	maxGuestAddresses  = 32
	maxGuestDNSServers = 8
	maxGuestRejected   = 16
	maxRejectedEntry   = v1alpha1.MaxShortMessage
)

// pciSlot is a device's PCI slot number, nil when vSphere gives none.
func pciSlot(info types.BaseVirtualDeviceBusSlotInfo) *int32 {
	if s, ok := info.(*types.VirtualDevicePciBusSlotInfo); ok && s.PciSlotNumber > 0 {
		n := s.PciSlotNumber
		return &n
	}
	return nil
}

// guestReport collects what VMware Tools reported of the guest's network
// that the inventory refuses: the report comes from inside the guest,
// and only addresses in their canonical form, without zones, go on.
type guestReport struct {
	rejected []string
}

// reject records a refused value: where it was reported, the value
// (quoted) and why.
func (r *guestReport) reject(where, value string, problem error) {
	if len(r.rejected) == maxGuestRejected {
		return
	}
	r.rejected = append(r.rejected, untrusted.CleanCut(untrusted.Refuse(where, value, problem).Error(), maxRejectedEntry))
}

// addr parses an address the guest reported at where; ok is false (and
// the value recorded) when it is refused.
func (r *guestReport) addr(where, value string) (netip.Addr, bool) {
	a, err := untrusted.Addr(value)
	if err != nil {
		r.reject(where, value, err)
		return netip.Addr{}, false
	}
	return a, true
}

// addGuestNetwork fills each NIC's Guest from what VMware Tools reported:
// a guest.net entry belongs to the NIC whose device key is its
// deviceConfigId (else whose MAC address it has; an entry of the guest's
// own, deviceConfigId -1, belongs to none), its addresses with their
// prefix and origin, its DNS servers (else the guest's), and the default
// gateway that lies on one of its subnets (else the one whose route names
// its index in guest.net). It returns, quoted, the values it refused
// (SourceInventory.GuestNetworkRejected).
func addGuestNetwork(nics []v1alpha1.SourceNIC, g *types.GuestInfo) []string {
	if g == nil {
		return nil
	}
	var report guestReport
	gateways, dns := guestStack(g.IpStack, &report)
	for i, info := range g.Net {
		n := nicFor(nics, info)
		if n == nil {
			continue
		}
		where := fmt.Sprintf("guest.net[%d] (%s)", i, nicLabel(n))
		out := &v1alpha1.GuestNICInfo{IPAddresses: guestAddresses(info, where, &report)}
		out.DNSServers = dns
		if info.DnsConfig != nil && len(info.DnsConfig.IpAddress) > 0 {
			out.DNSServers = report.addrs(where+" DNS server", info.DnsConfig.IpAddress)
		}
		out.DNSServers = boundedStrings(out.DNSServers, maxGuestDNSServers)
		out.Gateway = gatewayFor(out.IPAddresses, gateways, i)
		if len(out.IPAddresses) == 0 && out.Gateway == "" {
			continue
		}
		n.Guest = out
	}
	return report.rejected
}

// nicLabel names a NIC for a message.
func nicLabel(n *v1alpha1.SourceNIC) string {
	if n.Label != "" {
		return n.Label
	}
	return fmt.Sprintf("NIC %d", n.Key)
}

// addrs are the canonical forms of the addresses the guest reported at
// where, the refused ones left out (and recorded).
func (r *guestReport) addrs(where string, values []string) []string {
	var out []string
	for _, v := range values {
		if a, ok := r.addr(where, v); ok {
			out = append(out, a.String())
		}
	}
	return out
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
// prefix and origin) where the tools gave it, else the bare list; each in
// its canonical form, with a prefix length within its bits and a known
// origin (else other). The others are refused.
func guestAddresses(info types.GuestNicInfo, where string, report *guestReport) []v1alpha1.GuestIPAddress {
	var reported []v1alpha1.GuestIPAddress
	if c := info.IpConfig; c != nil && len(c.IpAddress) > 0 {
		for _, a := range c.IpAddress {
			reported = append(reported, v1alpha1.GuestIPAddress{IP: a.IpAddress, PrefixLength: a.PrefixLength, Origin: a.Origin})
		}
	} else {
		for _, ip := range info.IpAddress {
			reported = append(reported, v1alpha1.GuestIPAddress{IP: ip})
		}
	}
	var out []v1alpha1.GuestIPAddress
	for _, a := range reported {
		ip, ok := report.addr(where+" address", a.IP)
		if !ok {
			continue
		}
		if err := untrusted.PrefixLength(ip, a.PrefixLength); err != nil {
			report.reject(where+" address", fmt.Sprintf("%s/%d", ip, a.PrefixLength), err)
			continue
		}
		out = append(out, v1alpha1.GuestIPAddress{IP: ip.String(), PrefixLength: a.PrefixLength, Origin: guestOrigin(a.Origin)})
	}
	if len(out) > maxGuestAddresses {
		out = out[:maxGuestAddresses]
	}
	return out
}

// guestOrigin is an address's origin as the status keeps it: one of
// vSphere's (NetIpConfigInfoIpAddressOrigin), lower case, other for an
// origin it does not name, empty when the tools said none.
func guestOrigin(o string) string {
	switch l := strings.ToLower(o); l {
	case "":
		return ""
	case v1alpha1.OriginManual, v1alpha1.OriginDHCP, v1alpha1.OriginLinkLayer, v1alpha1.OriginRandom, v1alpha1.OriginOther:
		return l
	}
	return v1alpha1.OriginOther
}

// defaultRoute is a default route's gateway and the guest.net index its
// route names (-1 when it names none).
type defaultRoute struct {
	gateway netip.Addr
	device  int
}

// guestStack reads the default gateways and the guest-wide DNS servers,
// refusing (into report) those that are not addresses: a default route
// without a gateway is no default gateway, and is left out quietly.
func guestStack(stacks []types.GuestStackInfo, report *guestReport) ([]defaultRoute, []string) {
	var routes []defaultRoute
	var dns []string
	for j, st := range stacks {
		if st.DnsConfig != nil && len(dns) == 0 {
			dns = report.addrs(fmt.Sprintf("guest.ipStack[%d] DNS server", j), st.DnsConfig.IpAddress)
		}
		if st.IpRouteConfig == nil {
			continue
		}
		for _, r := range st.IpRouteConfig.IpRoute {
			if r.PrefixLength != 0 || r.Gateway.IpAddress == "" {
				continue
			}
			if nw, err := netip.ParseAddr(r.Network); err != nil || !nw.IsUnspecified() {
				continue
			}
			gw, ok := report.addr(fmt.Sprintf("guest.ipStack[%d] default gateway", j), r.Gateway.IpAddress)
			if !ok || gw.IsUnspecified() {
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
