package preflight

import (
	"fmt"
	"strings"

	"platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// Reasons of the guest-aware findings, read from the inventory (VMware
// Tools' guest id and full name, else the configured ones).
const (
	// ReasonWindowsWithoutVirtioDrivers: a Windows guest is to be converted
	// by an image without virtio-win drivers: virt-v2v would give it IDE
	// disks and an RTL8139 NIC, and the VM rendered with virtio devices
	// would not boot.
	ReasonWindowsWithoutVirtioDrivers = "WindowsWithoutVirtioDrivers"
	// ReasonUnsupportedGuestOS: virt-v2v converts Linux and Windows guests
	// only.
	ReasonUnsupportedGuestOS = "UnsupportedGuestOS"
	// ReasonUnknownGuestOS: vSphere knows no operating system for the VM.
	ReasonUnknownGuestOS = "UnknownGuestOS"
)

// guestFamilyWindows is vSphere's Windows guest family (VirtualMachineGuestOsFamily).
const guestFamilyWindows = "windowsGuest"

// unconvertibleFamilies and unconvertiblePrefixes name guests virt-v2v
// cannot convert: it converts Linux and Windows only.
var (
	unconvertibleFamilies = map[string]string{
		"darwinGuestFamily": "macOS", "solarisGuest": "Solaris", "netwareGuest": "NetWare",
	}
	unconvertiblePrefixes = []string{"freebsd", "darwin", "solaris", "netware", "os2", "dos", "sco", "unixware", "openserver", "ecomstation", "win31", "win95", "win98", "winme"}
)

// guestOS is what the inventory says of the guest: VMware Tools' report
// when they gave one, the VM's configuration otherwise.
func guestOS(inv *v1alpha1.SourceInventory) (id, name string) {
	id, name = inv.DetectedGuestID, inv.DetectedGuestFullName
	if id == "" {
		id = inv.GuestID
	}
	if name == "" {
		name = inv.GuestFullName
	}
	return id, name
}

// describeGuest names the guest for a person: "Microsoft Windows Server
// 2019 (guest id windows2019srv_64Guest)".
func describeGuest(inv *v1alpha1.SourceInventory) string {
	id, name := guestOS(inv)
	switch {
	case name != "" && name != id:
		return fmt.Sprintf("%s (guest id %s)", name, id)
	case id != "":
		return "guest id " + id
	}
	return "an unknown guest"
}

// isWindowsGuest says whether the guest is Windows.
func isWindowsGuest(inv *v1alpha1.SourceInventory) bool {
	id, _ := guestOS(inv)
	return inv.GuestFamily == guestFamilyWindows || strings.HasPrefix(strings.ToLower(id), "win")
}

// guest runs the guest-aware rules when the guest is to be converted.
func (c *checker) guest() {
	if c.spec.Conversion.Skip {
		return
	}
	id, _ := guestOS(c.inv)
	lower := strings.ToLower(id)
	if family, ok := unconvertibleFamilies[c.inv.GuestFamily]; ok || hasAnyPrefix(lower, unconvertiblePrefixes) {
		what := describeGuest(c.inv)
		if ok {
			what += ", a " + family + " guest"
		}
		c.add(blocking(ReasonUnsupportedGuestOS, fmt.Sprintf(
			"the source VM runs %s, and virt-v2v converts only Linux and Windows guests: the conversion would fail after the source was stopped. "+
				"Migrate it with spec.conversion.skip: true only if its operating system already has virtio drivers", what)))
		return
	}
	if strings.HasPrefix(lower, "other") && !strings.Contains(lower, "linux") {
		c.add(warning(ReasonUnknownGuestOS, fmt.Sprintf(
			"vSphere knows no operating system for the source VM (%s): virt-v2v will inspect its disks, and if it finds neither Linux nor Windows "+
				"the conversion fails after the source was stopped (the source is then powered on again). Set the VM's guest OS in vSphere if you know it",
			describeGuest(c.inv))))
		return
	}
	c.windowsDrivers()
}

// windowsDrivers blocks a Windows guest whose conversion image, as its
// self-check reported, has no virtio-win drivers.
func (c *checker) windowsDrivers() {
	vw := c.cluster.ConversionVirtioWin
	if !isWindowsGuest(c.inv) || vw == nil || vw.Present {
		return
	}
	image := "the conversion image"
	if p := c.proofOf(v1alpha1.ComponentConversion); p != nil {
		image = fmt.Sprintf("the conversion image %s", p.Image)
	}
	where := vw.Path
	if where == "" {
		where = "its VIRTIO_WIN path"
	}
	c.add(blocking(ReasonWindowsWithoutVirtioDrivers, fmt.Sprintf(
		"the source VM runs Windows (%s) and %s has no virtio-win drivers (its self-check found none at %s): "+
			"virt-v2v would convert the guest to IDE disks and an RTL8139 NIC, and the VirtualMachine this migration creates (virtio disks and NICs) would not boot. "+
			"Convert it with an image that has the drivers (spec.conversion.image within --allowed-conversion-images, or the controller's --conversion-image)",
		describeGuest(c.inv), image, where)))
}

// VirtioWin is what the conversion image's self-check says of virtio-win.
type VirtioWin struct {
	// Path the image looked at (VIRTIO_WIN, or /usr/share/virtio-win).
	Path string
	// Present says the drivers are there.
	Present bool
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
