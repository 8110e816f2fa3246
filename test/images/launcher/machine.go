package launcher

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	kubevirtv1 "kubevirt.io/api/core/v1"
)

// Firmware kinds of a Machine.
const (
	FirmwareBIOS = "bios"
	FirmwareEFI  = "efi"
)

// DiskImageFile is the file a volume holds its disk in (CDI's layout of a
// filesystem claim, and KubeVirt's).
const DiskImageFile = "disk.img"

// Machine is the hardware a VirtualMachineInstance asks for, as QEMU gets it.
type Machine struct {
	// Name is "<namespace>_<name>", as KubeVirt names its domains.
	Name string
	// UUID and Serial are the SMBIOS system UUID and serial number
	// (spec.domain.firmware.uuid and .serial), empty when not set.
	UUID, Serial string
	// Firmware is FirmwareBIOS or FirmwareEFI.
	Firmware string
	// SecureBoot and SMM apply to EFI.
	SecureBoot, SMM bool
	// Sockets, Cores and Threads make the vCPUs.
	Sockets, Cores, Threads uint32
	// MemoryMiB is the guest memory.
	MemoryMiB int64
	// Disks in the instance's order.
	Disks []Disk
	// NICs in the instance's order.
	NICs []NIC
}

// Disk is one disk of a Machine.
type Disk struct {
	// Name of the disk (and of its volume) in the instance.
	Name string
	// Image is the raw image file.
	Image string
	// Bus is virtio, sata or scsi.
	Bus string
	// Serial is the disk's serial number, if any.
	Serial string
	// BootOrder is the instance's boot order (0: none).
	BootOrder uint
}

// NIC is one network interface of a Machine.
type NIC struct {
	// Name of the interface in the instance.
	Name string
	// Model is the QEMU device: virtio-net-pci, e1000, e1000e...
	Model string
	// MAC is the interface's MAC address, lower case (generated when the
	// instance gives none).
	MAC string
	// BootOrder is the instance's boot order (0: none).
	BootOrder uint
	// Masquerade is KubeVirt's masquerade binding on the pod network: the
	// guest gets 10.0.2.2/24 by DHCP, its gateway is 10.0.2.1.
	Masquerade bool
}

// DiskImage is where a volume's disk image is in the launcher pod: the
// claim of volume <name> is mounted at <dir>/<name>.
func DiskImage(dir, volume string) string {
	return filepath.Join(dir, volume, DiskImageFile)
}

// FromInstance reads the hardware of an instance. Each disk's volume must
// be a DataVolume or a claim, mounted under diskDir (DiskImage).
func FromInstance(vmi *kubevirtv1.VirtualMachineInstance, diskDir string) (*Machine, error) {
	dom := vmi.Spec.Domain
	m := &Machine{Name: vmi.Namespace + "_" + vmi.Name, Firmware: FirmwareBIOS, Sockets: 1, Cores: 1, Threads: 1}
	if t := machineType(dom.Machine); t != "q35" {
		return nil, fmt.Errorf("machine type %q: only q35 is supported (KubeVirt's default)", t)
	}
	if err := m.setFirmware(dom); err != nil {
		return nil, err
	}
	if c := dom.CPU; c != nil {
		m.Sockets, m.Cores, m.Threads = max(c.Sockets, 1), max(c.Cores, 1), max(c.Threads, 1)
	}
	switch {
	case dom.Memory != nil && dom.Memory.Guest != nil:
		m.MemoryMiB = dom.Memory.Guest.Value() >> 20
	case dom.Resources.Requests.Memory() != nil:
		m.MemoryMiB = dom.Resources.Requests.Memory().Value() >> 20
	}
	if m.MemoryMiB <= 0 {
		return nil, fmt.Errorf("instance %s/%s asks for no memory", vmi.Namespace, vmi.Name)
	}
	if err := m.setDisks(&vmi.Spec, diskDir); err != nil {
		return nil, fmt.Errorf("instance %s/%s: %w", vmi.Namespace, vmi.Name, err)
	}
	masquerade := map[string]bool{}
	for _, n := range vmi.Spec.Networks {
		masquerade[n.Name] = n.Pod != nil
	}
	for n, i := range dom.Devices.Interfaces {
		mac := strings.ToLower(i.MacAddress)
		if mac == "" {
			mac = generatedMAC(vmi, n)
		}
		m.NICs = append(m.NICs, NIC{Name: i.Name, Model: nicModel(i.Model), MAC: mac, BootOrder: deref(i.BootOrder),
			Masquerade: i.Masquerade != nil && masquerade[i.Name]})
	}
	return m, nil
}

// generatedMAC is the MAC address of an interface the instance gives none:
// in QEMU's locally administered range 52:54:00, as libvirt picks one, but
// derived from the instance's UID and the interface's position, so that
// the launcher and its status agree across restarts.
func generatedMAC(vmi *kubevirtv1.VirtualMachineInstance, index int) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%s/%s/%d", vmi.Namespace, vmi.Name, vmi.UID, index)))
	return fmt.Sprintf("52:54:00:%02x:%02x:%02x", sum[0], sum[1], sum[2])
}

// setDisks reads the disks, each from its volume's claim.
func (m *Machine) setDisks(spec *kubevirtv1.VirtualMachineInstanceSpec, diskDir string) error {
	volumes := map[string]kubevirtv1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	for _, d := range spec.Domain.Devices.Disks {
		v, ok := volumes[d.Name]
		if !ok {
			return fmt.Errorf("disk %s has no volume", d.Name)
		}
		if v.DataVolume == nil && v.PersistentVolumeClaim == nil {
			return fmt.Errorf("volume %s is neither a DataVolume nor a claim (the launcher runs no other kind)", v.Name)
		}
		if d.Disk == nil {
			return fmt.Errorf("disk %s is not a disk (cdrom, lun)", d.Name)
		}
		bus := string(d.Disk.Bus)
		if bus == "" {
			bus = string(kubevirtv1.DiskBusVirtio)
		}
		if bus != "virtio" && bus != "sata" && bus != "scsi" {
			return fmt.Errorf("disk %s: bus %q is not supported (virtio, sata, scsi)", d.Name, bus)
		}
		m.Disks = append(m.Disks, Disk{Name: d.Name, Image: DiskImage(diskDir, v.Name), Bus: bus, Serial: d.Serial, BootOrder: deref(d.BootOrder)})
	}
	if len(m.Disks) == 0 {
		return errors.New("no disk")
	}
	return nil
}

// setFirmware reads the bootloader: BIOS, or EFI whose secure boot is on
// unless it says otherwise (KubeVirt's default), which needs SMM; and the
// SMBIOS identity.
func (m *Machine) setFirmware(dom kubevirtv1.DomainSpec) error {
	if f := dom.Features; f != nil && f.SMM != nil {
		m.SMM = f.SMM.Enabled == nil || *f.SMM.Enabled
	}
	fw := dom.Firmware
	if fw == nil {
		return nil
	}
	m.UUID, m.Serial = string(fw.UUID), fw.Serial
	if strings.ContainsAny(m.Serial, ",\n") {
		return fmt.Errorf("firmware serial %q: commas and newlines are not supported", m.Serial)
	}
	if fw.Bootloader == nil || fw.Bootloader.EFI == nil {
		return nil
	}
	m.Firmware = FirmwareEFI
	m.SecureBoot = fw.Bootloader.EFI.SecureBoot == nil || *fw.Bootloader.EFI.SecureBoot
	if m.SecureBoot && !m.SMM {
		return errors.New("EFI secure boot requires SMM (spec.domain.features.smm), as KubeVirt says")
	}
	return nil
}

func machineType(m *kubevirtv1.Machine) string {
	if m == nil || m.Type == "" || m.Type == "q35" || strings.HasPrefix(m.Type, "pc-q35") {
		return "q35"
	}
	return m.Type
}

// nicModel is the QEMU device of a KubeVirt interface model.
func nicModel(model string) string {
	switch model {
	case "", "virtio":
		return "virtio-net-pci"
	default:
		return model
	}
}

func deref(p *uint) uint {
	if p == nil {
		return 0
	}
	return *p
}
