package v1alpha1

import (
	"net/netip"
	"strings"
)

// Origins of a guest address, as VMware Tools reports them
// (GuestIPAddress.Origin; vSphere's NetIpConfigInfoIpAddressOrigin).
const (
	// OriginManual: the guest's configuration sets the address.
	OriginManual = "manual"
	// OriginDHCP: a DHCP server leased it.
	OriginDHCP = "dhcp"
	// OriginLinkLayer: derived from the link layer (IPv6 SLAAC, link-local).
	OriginLinkLayer = "linklayer"
	// OriginRandom: a random address (IPv6 privacy extensions).
	OriginRandom = "random"
	// OriginOther: VMware Tools could not tell.
	OriginOther = "other"
)

// Dynamic reports whether the address is not the guest's own to keep: one
// a DHCP server leased, one derived from the link layer or random, a
// link-local, loopback, multicast or unspecified address, or one that
// does not parse. A guest moved to another network gets another such
// address, and rightly so.
func (a GuestIPAddress) Dynamic() bool {
	switch strings.ToLower(a.Origin) {
	case OriginDHCP, OriginLinkLayer, OriginRandom:
		return true
	}
	ip, err := netip.ParseAddr(a.IP)
	if err != nil {
		return true
	}
	return ip.IsLinkLocalUnicast() || ip.IsLoopback() || ip.IsMulticast() || ip.IsUnspecified()
}

// Manual reports whether VMware Tools says the guest's configuration sets
// the address (Windows guests' tools say; Linux guests' open-vm-tools
// report no origin).
func (a GuestIPAddress) Manual() bool {
	return strings.EqualFold(a.Origin, OriginManual) && !a.Dynamic()
}

// CandidateAddresses are the NIC's addresses that may be static: every
// address VMware Tools reported but the dynamic ones.
func (n *SourceNIC) CandidateAddresses() []GuestIPAddress {
	if n.Guest == nil {
		return nil
	}
	var out []GuestIPAddress
	for _, a := range n.Guest.IPAddresses {
		if !a.Dynamic() {
			out = append(out, a)
		}
	}
	return out
}

// GuestNetworkReported says VMware Tools reported at least one address of
// one of the VM's NICs.
func (inv *SourceInventory) GuestNetworkReported() bool {
	for i := range inv.NICs {
		if g := inv.NICs[i].Guest; g != nil && len(g.IPAddresses) > 0 {
			return true
		}
	}
	return false
}
