package pipeline

import (
	"encoding/hex"
	"errors"
	"strconv"
	"strings"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/untrusted"
)

// Bounds of what a conversion's guest network lines put into status.
const (
	maxPinnedInterfaces = 64
	maxPinAddresses     = 16
	maxPinMessage       = 256
)

// cutConversionChain takes out of a conversion's termination message the
// lines the conversion script puts first once virt-v2v succeeded: the
// converted disks' block-tree roots ("tree <disk> <bytes> <root>
// <re-hashed bytes>") and the guest network script's NICs ("nic <mac>
// ..."). A line the kubelet cut at the message's 4 KiB does not parse and
// is dropped; other lines stay for parseConversionReport.
func cutConversionChain(msg string) (string, []statemachine.ImageChecksum, []v1alpha1.InterfacePin) {
	var rest []string
	var sums []statemachine.ImageChecksum
	var pins []v1alpha1.InterfacePin
	for line := range strings.SplitSeq(msg, "\n") {
		switch {
		case strings.HasPrefix(line, treeLinePrefix):
			if c, ok := parseTreeLine(line); ok {
				sums = append(sums, c)
			}
		case strings.HasPrefix(line, "nic "):
			if p, ok := parseNICLine(line); ok && len(pins) < maxPinnedInterfaces {
				pins = append(pins, p)
			}
		default:
			rest = append(rest, line)
		}
	}
	return strings.Join(rest, "\n"), sums, pins
}

// parseTreeLine reads "tree <disk> <bytes> <64 hex digits> <re-hashed
// bytes>", the re-hashed bytes at most the disk's.
func parseTreeLine(line string) (statemachine.ImageChecksum, bool) {
	f := strings.Fields(line)
	if len(f) != 5 || !isSHA256(f[3]) {
		return statemachine.ImageChecksum{}, false
	}
	n, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || n < 0 {
		return statemachine.ImageChecksum{}, false
	}
	rehashed, err := strconv.ParseInt(f[4], 10, 64)
	if err != nil || rehashed < 0 || rehashed > n {
		return statemachine.ImageChecksum{}, false
	}
	return statemachine.ImageChecksum{Disk: f[1], Bytes: n, Size: n, SHA256: f[3], Rehashed: rehashed}, true
}

// isSHA256 says s is a SHA-256 in lower-case hex.
func isSHA256(s string) bool {
	if len(s) != 64 || strings.ToLower(s) != s {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// parseNICLine reads the guest network script's
// "nic <mac> <name|-> <address|slot|-> <pinned|found|-> <addresses,|-> [why not]",
// or the conversion script's "nic <mac> - - unreadable - <why>" for a
// guest it could not look into. The guest network script ran inside the
// guest, with the guest's own shell and tools: a line that is not what it
// prints (an interface name no interface has, an address that is not one
// in its canonical form, a word it does not print, a control character)
// reads as a guest that could not be read, with the reason quoted.
func parseNICLine(line string) (v1alpha1.InterfacePin, bool) {
	f := strings.Fields(line)
	if len(f) < 6 {
		return v1alpha1.InterfacePin{}, false
	}
	mac, ok := canonicalMAC(f[1])
	if !ok {
		return v1alpha1.InterfacePin{}, false
	}
	p, err := readPin(mac, f)
	if err != nil {
		return v1alpha1.InterfacePin{MAC: mac, GuestUnreadable: true,
			Message: truncate("the guest's answer for this NIC is not what the guest network script prints: "+err.Error(), maxPinMessage)}, true
	}
	return p, true
}

// readPin reads the fields of a "nic" line, refusing any that is not
// what the guest network script prints.
func readPin(mac string, f []string) (v1alpha1.InterfacePin, error) {
	for _, word := range f[6:] {
		if err := untrusted.Field(word, maxPinMessage); err != nil {
			return v1alpha1.InterfacePin{}, untrusted.Refuse("the reason", word, err)
		}
	}
	p := v1alpha1.InterfacePin{MAC: mac, Name: dashless(f[2]), Pinned: f[4] == "pinned", GuestUnreadable: f[4] == "unreadable",
		Message: truncate(strings.Join(f[6:], " "), maxPinMessage)}
	if p.Name != "" {
		if err := untrusted.InterfaceName(p.Name); err != nil {
			return v1alpha1.InterfacePin{}, untrusted.Refuse("interface name", f[2], err)
		}
	}
	switch f[3] {
	case "address":
		p.Source = v1alpha1.PinSourceAddress
	case "slot":
		p.Source = v1alpha1.PinSourcePCISlot
	case "-":
	default:
		return v1alpha1.InterfacePin{}, untrusted.Refuse("source", f[3], errors.New("is none of address, slot and -"))
	}
	switch f[4] {
	case "pinned", "found", "unreadable", "-":
	default:
		return v1alpha1.InterfacePin{}, untrusted.Refuse("state", f[4], errors.New("is none of pinned, found, unreadable and -"))
	}
	if a := dashless(f[5]); a != "" {
		for _, s := range strings.Split(a, ",") {
			ip, err := untrusted.Addr(s)
			if err != nil {
				return v1alpha1.InterfacePin{}, untrusted.Refuse("static address", s, err)
			}
			if len(p.StaticAddresses) < maxPinAddresses {
				p.StaticAddresses = append(p.StaticAddresses, ip.String())
			}
		}
	}
	return p, nil
}

func dashless(s string) string {
	if s == "-" {
		return ""
	}
	return s
}
