package pipeline

import (
	_ "embed"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
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
// addresses being those VMware Tools reported that may be static. "" for
// a guest that is not Linux (Windows gets virt-v2v's --mac instead) or
// whose NICs give nothing to look for.
func networkConf(m *v1alpha1.VirtualMachineMigration) string {
	inv := m.Status.Source
	if inv == nil || isWindows(inv) {
		return ""
	}
	spec := m.SpecInForce()
	mode := pinModeInspect
	if spec.Target.PreserveStaticIPsEnabled() && spec.Target.PreserveMACs() {
		mode = pinModePin
	}
	var b strings.Builder
	for _, nic := range inv.NICs {
		mac, ok := canonicalMAC(nic.MAC)
		if !ok {
			continue
		}
		var addrs []string
		for _, a := range nic.CandidateAddresses() {
			addrs = append(addrs, a.IP)
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
		return ""
	}
	return "mode " + mode + "\n" + b.String()
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

// v2vArgs are the extra virt-v2v-in-place arguments of a migration: for
// a Windows guest with spec.target.preserveStaticIPs, one
// --mac=MAC:ip:IP[,GATEWAY,PREFIX[,DNS...]] per static address VMware
// Tools reported (origin manual), which virt-v2v configures on the
// interface with that MAC at first boot. virt-v2v refuses an empty
// gateway, so an address without a known gateway goes alone (its
// prefix then is virt-v2v's default).
func v2vArgs(m *v1alpha1.VirtualMachineMigration) []string {
	inv := m.Status.Source
	spec := m.SpecInForce()
	if inv == nil || !isWindows(inv) || !spec.Target.PreserveStaticIPsEnabled() {
		return nil
	}
	var args []string
	for _, nic := range inv.NICs {
		mac, ok := canonicalMAC(nic.MAC)
		if !ok || nic.Guest == nil {
			continue
		}
		for _, a := range nic.Guest.IPAddresses {
			if !a.Manual() {
				continue
			}
			args = append(args, "--mac="+mac+":ip:"+staticIPSpec(a, nic.Guest))
		}
	}
	return args
}

// staticIPSpec is virt-v2v's IP[,GATEWAY,PREFIX[,DNS...]] of an address:
// the gateway of the address's family, and the DNS servers of its family.
func staticIPSpec(a v1alpha1.GuestIPAddress, g *v1alpha1.GuestNICInfo) string {
	ip, err := netip.ParseAddr(a.IP)
	gw, gerr := netip.ParseAddr(g.Gateway)
	if err != nil || gerr != nil || ip.Is4() != gw.Is4() || a.PrefixLength <= 0 {
		return a.IP
	}
	parts := []string{ip.String(), gw.String(), strconv.Itoa(int(a.PrefixLength))}
	for _, d := range g.DNSServers {
		if dns, err := netip.ParseAddr(d); err == nil && dns.Is4() == ip.Is4() {
			parts = append(parts, dns.String())
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
// order, ignored ones included: virt-v2v describes the source VM.
func domainInterfaces(inv *v1alpha1.SourceInventory) []interfaceXML {
	var out []interfaceXML
	for i, nic := range inv.NICs {
		mac, ok := canonicalMAC(nic.MAC)
		if !ok {
			continue
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
	return out
}
