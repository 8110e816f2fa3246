package vsphere

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"math/big"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	"platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/untrusted"
)

// nastySeeds are what no guest should report, and any may: empty,
// huge, not UTF-8, control and escape bytes, CJK, a bidi override, the
// C1 CSI, zones of any bytes.
var nastySeeds = []string{
	"", "\x00", "\n", "\xff\xfe", "\x1b[2J", "漢字", "\u202e", "\u009b", "\x9b", "0.0.0.0", "::", "::ffff:0.0.0.0",
	"fe80::1%eth0", "2001:db8::7%x\n--root=/dev/sdb9", "192.168.12.3\n-x", "1.2.3.4/24", strings.Repeat("1", 100),
}

// answerStream answers QueryChangedDiskAreas from fuzz bytes, one answer
// per call, as a faulty or hostile server could: each answer's start
// (the offset asked from, or off by a varint), length and up to seven
// areas (each a varint gap after the one before and a varint length).
// It faults once the bytes run out.
type answerStream struct{ data []byte }

func (s *answerStream) varint() (int64, bool) {
	v, n := binary.Varint(s.data)
	if n <= 0 {
		return 0, false
	}
	s.data = s.data[n:]
	return v, true
}

func (s *answerStream) RoundTrip(_ context.Context, req, res soap.HasFault) error {
	off := req.(*methods.QueryChangedDiskAreasBody).Req.StartOffset
	skew, ok1 := s.varint()
	length, ok2 := s.varint()
	if !ok1 || !ok2 || len(s.data) == 0 {
		return errors.New("the server went away")
	}
	n := int(s.data[0] % 8)
	s.data = s.data[1:]
	page := types.DiskChangeInfo{StartOffset: off + skew, Length: length}
	at := page.StartOffset
	for range n {
		gap, ok1 := s.varint()
		l, ok2 := s.varint()
		if !ok1 || !ok2 {
			break
		}
		page.ChangedArea = append(page.ChangedArea, types.DiskChangeExtent{Start: at + gap, Length: l})
		at += gap + l
	}
	res.(*methods.QueryChangedDiskAreasBody).Res = &types.QueryChangedDiskAreasResponse{Returnval: page}
	return nil
}

// answers encodes pages for the seed corpus: skew, length, areas.
func answers(pages ...[]int64) []byte {
	var b []byte
	for _, p := range pages {
		b = binary.AppendVarint(b, p[0])
		b = binary.AppendVarint(b, p[1])
		b = append(b, byte((len(p)-2)/2))
		for _, v := range p[2:] {
			b = binary.AppendVarint(b, v)
		}
	}
	return b
}

// FuzzAllocatedAreas follows a changed-block map over a server's
// answers as AllocatedAreas does: a map it returns lies inside the disk,
// in order, with touching areas merged, and adds up (without wrapping)
// to at most the capacity; anything else is refused as
// ErrInconsistentAreas, or the server's fault, in one line.
func FuzzAllocatedAreas(f *testing.F) {
	const mib = 1 << 20
	f.Add(answers([]int64{0, mib, 0, 4096, 4096, 100, 4096 * 10, 10}), int64(mib))
	f.Add(answers([]int64{0, 8192, 0, 4096}, []int64{0, math.MaxInt64, 0, 4096, mib - 3*4096, 4096}), int64(mib))
	f.Add(answers([]int64{0, 8192, 0, 4096}, []int64{0, math.MaxInt64 - 4094}, []int64{0, math.MaxInt64, 0, 4096}), int64(mib))
	f.Add(answers([]int64{0, 4096, 1 << 62, 1 << 62}), int64(mib))
	f.Add(answers([]int64{-4096, mib, 0, 8192}), int64(mib))
	f.Add(answers([]int64{0, 1}), int64(3))
	f.Add([]byte{}, int64(0))
	f.Add([]byte{0xff, 0xff, 0xff}, int64(-1))
	vm := types.ManagedObjectReference{Type: "VirtualMachine", Value: "vm-1"}
	f.Fuzz(func(t *testing.T, data []byte, capacity int64) {
		areas, err := AllocatedAreas(context.Background(), &answerStream{data: data}, vm, 2000, capacity)
		if err != nil {
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("the refusal is not one line: %q", err)
			}
			if areas != nil {
				t.Fatalf("a refused map came with areas %v", areas)
			}
			return
		}
		if cerr := checkAreas(areas, capacity); cerr != nil {
			t.Fatalf("capacity %d: the map %v: %v", capacity, areas, cerr)
		}
		sum := new(big.Int)
		for i, a := range areas {
			if i > 0 && areas[i-1].End() >= a.Start {
				t.Fatalf("capacity %d: the map %v has touching areas", capacity, areas)
			}
			sum.Add(sum, big.NewInt(a.Length))
		}
		if sum.Cmp(big.NewInt(max(capacity, 0))) > 0 || AreasBytes(areas) != sum.Int64() {
			t.Fatalf("capacity %d: the map %v adds up to %s, AreasBytes says %d", capacity, areas, sum, AreasBytes(areas))
		}
	})
}

// FuzzGuestNetwork reads what VMware Tools report of a guest's network
// as the inventory does: every address, gateway and DNS server a NIC
// keeps is an address in its canonical form, without a zone, its prefix
// length within its bits and its origin one the status names, within
// the status's bounds; a gateway is never the unspecified address; a
// device of the guest's own (deviceConfigId -1) belongs to no NIC; the
// values refused are at most maxGuestRejected lines of text, each at
// most maxRejectedEntry bytes.
func FuzzGuestNetwork(f *testing.F) {
	f.Add("192.168.10.21,fe80::250:56ff:feaa:1001", true, int32(24), "linklayer", "192.168.10.2", "192.168.10.1", "0.0.0.0", "0", int32(4000), "00:50:56:aa:10:02")
	f.Add("10.20.0.57", true, int32(16), "dhcp", "10.20.0.1,10.20.0.2", "10.20.0.1", "0.0.0.0", "1", int32(0), "00:50:56:AA:10:02")
	f.Add("172.17.0.1", false, int32(0), "", "", "", "", "", int32(-1), "02:42:ac:11:00:01")
	f.Add("2001:DB8::21,2001:db8::7%x\n--root=/dev/sdb9,fe80::1%eth0,192.168.12.21", true, int32(200), "MANUAL",
		"192.168.12.2,192.168.12.3\n-x", "2001:db8::1%x\n-O /etc/shadow", "::", "0", int32(4000), "")
	f.Add("fd00::5", true, int32(64), "random", "fd00::53", "fd00::1", "::", "x", int32(4001), "00:50:56:aa:10:02")
	f.Add(strings.Repeat("10.0.0.1,", 40), true, int32(8), "other", strings.Repeat("10.0.0.53,", 12), "0.0.0.0", "0.0.0.0", "-1", int32(4000), "")
	for _, s := range nastySeeds {
		f.Add(s+","+s, true, int32(-1), s, s, s, "0.0.0.0", s, int32(4000), s)
	}
	origins := []string{"", v1alpha1.OriginManual, v1alpha1.OriginDHCP, v1alpha1.OriginLinkLayer, v1alpha1.OriginRandom, v1alpha1.OriginOther}
	f.Fuzz(func(t *testing.T, ips string, withConfig bool, prefix int32, origin, dns, gateway, network, device string, key int32, mac string) {
		nics := []v1alpha1.SourceNIC{{Key: 4000, Label: "Network adapter 1", MAC: "00:50:56:aa:10:01"}, {Key: 4001, MAC: "00:50:56:aa:10:02"}}
		addrs := strings.Split(ips, ",")
		info := types.GuestNicInfo{MacAddress: "00:50:56:aa:10:01", DeviceConfigId: 4000, IpAddress: addrs}
		if withConfig {
			info.IpConfig = &types.NetIpConfigInfo{}
			for i, a := range addrs {
				info.IpConfig.IpAddress = append(info.IpConfig.IpAddress, types.NetIpConfigInfoIpAddress{IpAddress: a, PrefixLength: prefix + int32(i)%3, Origin: origin})
			}
		}
		if dns != "" {
			info.DnsConfig = &types.NetDnsConfigInfo{IpAddress: strings.Split(dns, ",")}
		}
		other := types.GuestNicInfo{MacAddress: mac, DeviceConfigId: key, IpAddress: addrs}
		stack := []types.GuestStackInfo{{
			DnsConfig: &types.NetDnsConfigInfo{IpAddress: strings.Split(dns+","+gateway, ",")},
			IpRouteConfig: &types.NetIpRouteConfigInfo{IpRoute: []types.NetIpRouteConfigInfoIpRoute{
				{Network: network, PrefixLength: 0, Gateway: types.NetIpRouteConfigInfoGateway{IpAddress: gateway, Device: device}},
				{Network: "0.0.0.0", PrefixLength: 0, Gateway: types.NetIpRouteConfigInfoGateway{IpAddress: dns, Device: device}},
			}},
		}}
		rejected := addGuestNetwork(nics, &types.GuestInfo{Net: []types.GuestNicInfo{info, other}, IpStack: stack})

		canonical := func(what, s string) netip.Addr {
			a, err := untrusted.Addr(s)
			if err != nil || a.String() != s {
				t.Fatalf("%s %q is not an address in its canonical form (%v)", what, s, err)
			}
			return a
		}
		if key < 0 && nics[1].Guest != nil {
			t.Fatalf("a device of the guest's own (MAC %q) went to NIC %d: %+v", mac, nics[1].Key, nics[1].Guest)
		}
		for _, n := range nics {
			if n.Guest == nil {
				continue
			}
			g := n.Guest
			if len(g.IPAddresses) > maxGuestAddresses || len(g.DNSServers) > maxGuestDNSServers || (len(g.IPAddresses) == 0 && g.Gateway == "") {
				t.Fatalf("NIC %d keeps %+v", n.Key, g)
			}
			for _, a := range g.IPAddresses {
				ip := canonical("an address", a.IP)
				if untrusted.PrefixLength(ip, a.PrefixLength) != nil || !slices.Contains(origins, a.Origin) {
					t.Fatalf("NIC %d keeps address %+v", n.Key, a)
				}
			}
			for _, d := range g.DNSServers {
				canonical("a DNS server", d)
			}
			if g.Gateway != "" && canonical("the gateway", g.Gateway).IsUnspecified() {
				t.Fatalf("NIC %d keeps the unspecified gateway %s", n.Key, g.Gateway)
			}
		}
		if len(rejected) > maxGuestRejected {
			t.Fatalf("%d values refused, more than %d", len(rejected), maxGuestRejected)
		}
		for _, r := range rejected {
			if err := untrusted.Text(r, maxRejectedEntry); err != nil || r == "" {
				t.Fatalf("a refused value is recorded as %q: %v", r, err)
			}
		}
	})
}
