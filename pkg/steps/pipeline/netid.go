package pipeline

import (
	_ "embed"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/untrusted"
)

// Keys of the conversion ConfigMap that keep the guest's network identity.
const (
	// NetworkConfKey lists, for the guest network script, the source NICs
	// whose interface names the conversion looks up in the guest (and
	// pins, with spec.target.preserveStaticIPs): networkConf.
	NetworkConfKey = "network.conf"
	// GuestNetworkScriptKey is the script guestfish runs inside the
	// converted guest (guestNetworkScript).
	GuestNetworkScriptKey = "guest-network.sh"
	// V2VArgsKey holds extra virt-v2v-in-place arguments, one per line:
	// a Windows guest's static addresses (--mac MAC:ip:...).
	V2VArgsKey = "virt-v2v.args"
)

// guestNetworkScript runs inside the converted Linux guest (guestfish's
// sh, in the guest's root, with the guest's own /bin/sh, awk, grep and
// sed). For each NIC of network.conf it finds the interface name the
// guest's network configuration gives it: the interface whose static
// configuration holds one of the NIC's addresses (ifupdown, systemd-networkd,
// NetworkManager keyfiles, ifcfg files, netplan), else VMware's name for
// its PCI slot (ens<slot>) where the configuration uses that name. In pin
// mode it writes /etc/systemd/network/10-vm-migration-<mac>.link matching
// the MAC and setting that name: udev applies .link files whatever
// manages the network. It prints one line per NIC:
//
//	nic <mac> <name|-> <address|slot|-> <pinned|found|-> <static addresses,|-> [why not]
//
//go:embed guest-network.sh
var guestNetworkScript string

// Pin modes of network.conf.
const (
	pinModePin     = "pin"
	pinModeInspect = "inspect"
)

// networkConf is what the guest network script reads: the mode (pin, or
// only inspect with preserveStaticIPs false), then one line per source NIC
// that has a MAC address: "nic <mac> <addresses,|-> <ens<slot>|->", the
// addresses being those VMware Tools reported that may be static, in
// their canonical form. "" for a guest that is not Linux (Windows gets
// virt-v2v's --mac instead) or whose NICs give nothing to look for. A
// value of the guest's report that is not an address (guestNICOf) is
// refused: it would be a field, or a line, of the guest's making.
func networkConf(m *v1alpha1.VirtualMachineMigration) (string, error) {
	inv := m.Status.Source
	if inv == nil || isWindows(inv) {
		return "", nil
	}
	spec := m.SpecInForce()
	mode := pinModeInspect
	if spec.Target.PreserveStaticIPsEnabled() && spec.Target.PreserveMACs() {
		mode = pinModePin
	}
	var b strings.Builder
	for i, nic := range inv.NICs {
		mac, ok := canonicalMAC(nic.MAC)
		if !ok {
			continue
		}
		g, err := guestNICOf(i, nic)
		if err != nil {
			return "", err
		}
		var addrs []string
		for _, a := range g.addresses {
			if a.candidate {
				addrs = append(addrs, a.ip.String())
			}
		}
		slot := "-"
		if nic.PCISlotNumber != nil {
			slot = "ens" + strconv.Itoa(int(*nic.PCISlotNumber))
		}
		if len(addrs) == 0 && slot == "-" {
			continue
		}
		fmt.Fprintf(&b, "nic %s %s %s\n", mac, orDash(strings.Join(addrs, ",")), slot)
	}
	if b.Len() == 0 {
		return "", nil
	}
	return "mode " + mode + "\n" + b.String(), nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// canonicalMAC is a 48-bit MAC address in lower case with colons.
func canonicalMAC(s string) (string, bool) {
	hw, err := net.ParseMAC(strings.TrimSpace(s))
	if err != nil || len(hw) != 6 {
		return "", false
	}
	return hw.String(), true
}

// guestNIC is what VMware Tools reported of a NIC, every value parsed by
// untrusted.Addr: only their canonical forms are ever written.
type guestNIC struct {
	addresses []guestAddress
	gateway   netip.Addr // invalid when none
	dns       []netip.Addr
}

// guestAddress is one parsed address of a guest NIC.
type guestAddress struct {
	ip     netip.Addr
	prefix int32
	// candidate: it may be static (v1alpha1.GuestIPAddress.Dynamic);
	// manual: VMware Tools say the guest sets it (Manual).
	candidate, manual bool
}

// guestNICOf parses the guest information of the NIC at index i of the
// inventory. The inventory keeps only addresses (vsphere.Inventory), so
// a value that is not one, without a zone, with a prefix length within
// its bits, is a status written otherwise (by hand, or by an older
// release): it is refused, quoted, and the migration is not rendered.
func guestNICOf(i int, nic v1alpha1.SourceNIC) (guestNIC, error) {
	var out guestNIC
	g := nic.Guest
	if g == nil {
		return out, nil
	}
	where := fmt.Sprintf("status.source.nics[%d].guest", i)
	for j, a := range g.IPAddresses {
		what := fmt.Sprintf("VMware Tools' address (%s.ipAddresses[%d].ip)", where, j)
		ip, err := untrusted.Addr(a.IP)
		if err == nil {
			err = untrusted.PrefixLength(ip, a.PrefixLength)
		}
		if err != nil {
			return guestNIC{}, untrusted.Refuse(what, a.IP, err)
		}
		out.addresses = append(out.addresses, guestAddress{ip: ip, prefix: a.PrefixLength, candidate: !a.Dynamic(), manual: a.Manual()})
	}
	if g.Gateway != "" {
		gw, err := untrusted.Addr(g.Gateway)
		if err != nil {
			return guestNIC{}, untrusted.Refuse(fmt.Sprintf("VMware Tools' gateway (%s.gateway)", where), g.Gateway, err)
		}
		out.gateway = gw
	}
	for j, d := range g.DNSServers {
		dns, err := untrusted.Addr(d)
		if err != nil {
			return guestNIC{}, untrusted.Refuse(fmt.Sprintf("VMware Tools' DNS server (%s.dnsServers[%d])", where, j), d, err)
		}
		out.dns = append(out.dns, dns)
	}
	return out, nil
}

// v2vArgs are the extra virt-v2v-in-place arguments of a migration: for
// a Windows guest with spec.target.preserveStaticIPs, one
// --mac=MAC:ip:IP[,GATEWAY,PREFIX[,DNS...]] per static address VMware
// Tools reported (origin manual), which virt-v2v configures on the
// interface with that MAC at first boot, every address in its canonical
// form. virt-v2v refuses an empty gateway, so an address without a known
// gateway goes alone (its prefix then is virt-v2v's default). A value of
// the guest's report that is not an address (guestNICOf) is refused: it
// would be an argument of the guest's making.
func v2vArgs(m *v1alpha1.VirtualMachineMigration) ([]string, error) {
	inv := m.Status.Source
	spec := m.SpecInForce()
	if inv == nil || !isWindows(inv) || !spec.Target.PreserveStaticIPsEnabled() {
		return nil, nil
	}
	var args []string
	for i, nic := range inv.NICs {
		mac, ok := canonicalMAC(nic.MAC)
		if !ok || nic.Guest == nil {
			continue
		}
		g, err := guestNICOf(i, nic)
		if err != nil {
			return nil, err
		}
		for _, a := range g.addresses {
			if a.manual {
				args = append(args, "--mac="+mac+":ip:"+staticIPSpec(a, g))
			}
		}
	}
	return args, nil
}

// staticIPSpec is virt-v2v's IP[,GATEWAY,PREFIX[,DNS...]] of an address:
// the gateway of the address's family, and the DNS servers of its family.
func staticIPSpec(a guestAddress, g guestNIC) string {
	if !g.gateway.IsValid() || a.ip.Is4() != g.gateway.Is4() || a.prefix <= 0 {
		return a.ip.String()
	}
	parts := []string{a.ip.String(), g.gateway.String(), strconv.Itoa(int(a.prefix))}
	for _, d := range g.dns {
		if d.Is4() == a.ip.Is4() {
			parts = append(parts, d.String())
		}
	}
	return strings.Join(parts, ",")
}

// interfaceXML is a NIC of virt-v2v's libvirtxml input: its MAC address
// (virt-v2v maps --mac options and the guest's own configuration by it),
// the source network and the source model.
type interfaceXML struct {
	Type string `xml:"type,attr"`
	MAC  struct {
		Address string `xml:"address,attr"`
	} `xml:"mac"`
	Source struct {
		Network string `xml:"network,attr"`
	} `xml:"source"`
	Model *struct {
		Type string `xml:"type,attr"`
	} `xml:"model,omitempty"`
}

// v2vModels are the source NIC models virt-v2v's libvirtxml input knows.
var v2vModels = map[string]bool{"vmxnet3": true, "e1000": true, "e1000e": true, "rtl8139": true, "virtio": true}

// domainInterfaces are the source NICs with a MAC address, in source
// order, ignored ones included: virt-v2v describes the source VM. A
// network name with a control character is refused (sourceText).
func domainInterfaces(inv *v1alpha1.SourceInventory) ([]interfaceXML, error) {
	var out []interfaceXML
	for i, nic := range inv.NICs {
		mac, ok := canonicalMAC(nic.MAC)
		if !ok {
			continue
		}
		if err := sourceText(fmt.Sprintf("status.source.nics[%d].network", i), nic.Network, maxSourceName); err != nil {
			return nil, err
		}
		x := interfaceXML{Type: "network"}
		x.MAC.Address = mac
		x.Source.Network = nic.Network
		if x.Source.Network == "" {
			x.Source.Network = networkName(i)
		}
		if v2vModels[nic.AdapterType] {
			x.Model = &struct {
				Type string `xml:"type,attr"`
			}{Type: nic.AdapterType}
		}
		out = append(out, x)
	}
	return out, nil
}
