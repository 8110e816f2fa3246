package bootcheck

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	kubevirtv1 "kubevirt.io/api/core/v1"
)

// Machine is the hardware a VirtualMachine asks for, as QEMU gets it.
type Machine struct {
	// Name of the VirtualMachine.
	Name string
	// Firmware is "bios" or "efi".
	Firmware string
	// SecureBoot and SMM apply to EFI.
	SecureBoot, SMM bool
	// Sockets, Cores and Threads make the vCPUs.
	Sockets, Cores, Threads uint32
	// MemoryMiB is the guest memory.
	MemoryMiB int64
	// Disks in the VM's order.
	Disks []Disk
	// NICs in the VM's order.
	NICs []NIC
}

// Disk is one disk of a Machine.
type Disk struct {
	// Name of the disk (and of its volume) in the VM.
	Name string
	// Image is the raw image file.
	Image string
	// Bus is virtio, sata or scsi.
	Bus string
	// Serial is the disk's serial number, if any.
	Serial string
	// BootOrder is the VM's boot order (0: none).
	BootOrder uint
}

// NIC is one network interface of a Machine.
type NIC struct {
	// Name of the interface in the VM.
	Name string
	// Model is the QEMU device: virtio-net-pci, e1000, e1000e...
	Model string
	// MAC is the interface's MAC address ("" lets QEMU choose).
	MAC string
	// BootOrder is the VM's boot order (0: none).
	BootOrder uint
}

// FromVM reads the hardware of vm's template. images gives each disk's raw
// image file by disk name; a disk without one is an error.
func FromVM(vm *kubevirtv1.VirtualMachine, images map[string]string) (*Machine, error) {
	if vm.Spec.Template == nil {
		return nil, fmt.Errorf("virtual machine %s has no template", vm.Name)
	}
	dom := vm.Spec.Template.Spec.Domain
	m := &Machine{Name: vm.Name, Firmware: "bios", Sockets: 1, Cores: 1, Threads: 1}
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
		return nil, fmt.Errorf("virtual machine %s asks for no memory", vm.Name)
	}
	for _, d := range dom.Devices.Disks {
		img, ok := images[d.Name]
		if !ok {
			return nil, fmt.Errorf("no image for disk %s of %s", d.Name, vm.Name)
		}
		if d.Disk == nil {
			return nil, fmt.Errorf("disk %s of %s is not a disk (cdrom, lun)", d.Name, vm.Name)
		}
		bus := string(d.Disk.Bus)
		if bus == "" {
			bus = string(kubevirtv1.DiskBusVirtio)
		}
		m.Disks = append(m.Disks, Disk{Name: d.Name, Image: img, Bus: bus, Serial: d.Serial, BootOrder: deref(d.BootOrder)})
	}
	if len(m.Disks) == 0 {
		return nil, fmt.Errorf("virtual machine %s has no disk", vm.Name)
	}
	for _, i := range dom.Devices.Interfaces {
		m.NICs = append(m.NICs, NIC{Name: i.Name, Model: nicModel(i.Model), MAC: i.MacAddress, BootOrder: deref(i.BootOrder)})
	}
	return m, nil
}

// setFirmware reads the bootloader: BIOS, or EFI whose secure boot is on
// unless it says otherwise (KubeVirt's default), which needs SMM.
func (m *Machine) setFirmware(dom kubevirtv1.DomainSpec) error {
	if f := dom.Features; f != nil && f.SMM != nil {
		m.SMM = f.SMM.Enabled == nil || *f.SMM.Enabled
	}
	fw := dom.Firmware
	if fw == nil || fw.Bootloader == nil || fw.Bootloader.EFI == nil {
		return nil
	}
	m.Firmware = "efi"
	m.SecureBoot = fw.Bootloader.EFI.SecureBoot == nil || *fw.Bootloader.EFI.SecureBoot
	if m.SecureBoot && !m.SMM {
		return errors.New("EFI secure boot requires SMM (spec.template.spec.domain.features.smm), as KubeVirt says")
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

// Firmware files of Debian's ovmf package.
const (
	ovmfCode           = "OVMF_CODE_4M.fd"
	ovmfVars           = "OVMF_VARS_4M.fd"
	ovmfCodeSecureBoot = "OVMF_CODE_4M.secboot.fd"
	// ovmfVarsMicrosoft has Microsoft's keys enrolled, so that shim
	// (signed by Microsoft) and what it loads pass secure boot.
	ovmfVarsMicrosoft = "OVMF_VARS_4M.ms.fd"
)

// FirmwareFiles are the OVMF code and variable-store template an EFI
// machine boots with, in dir; none for BIOS.
func (m *Machine) FirmwareFiles(dir string) (code, vars string) {
	switch {
	case m.Firmware != "efi":
		return "", ""
	case m.SecureBoot:
		return filepath.Join(dir, ovmfCodeSecureBoot), filepath.Join(dir, ovmfVarsMicrosoft)
	default:
		return filepath.Join(dir, ovmfCode), filepath.Join(dir, ovmfVars)
	}
}

// QEMUArgs are the arguments of qemu-system-x86_64 for the machine under
// TCG: serialLog receives the first serial port, varsFile is the machine's
// own copy of the EFI variable store (unused for BIOS), codeFile the
// firmware's code.
func (m *Machine) QEMUArgs(serialLog, codeFile, varsFile string) []string {
	machine := "q35,accel=tcg"
	if m.SMM {
		machine += ",smm=on"
	} else {
		machine += ",smm=off"
	}
	args := []string{
		"-name", "guest=" + m.Name,
		"-machine", machine,
		"-cpu", "max",
		"-smp", fmt.Sprintf("%d,sockets=%d,cores=%d,threads=%d", m.Sockets*m.Cores*m.Threads, m.Sockets, m.Cores, m.Threads),
		"-m", strconv.FormatInt(m.MemoryMiB, 10),
		"-display", "none", "-nodefaults", "-no-user-config", "-no-reboot",
		"-serial", "file:" + serialLog,
	}
	if m.Firmware == "efi" {
		args = append(args,
			"-drive", "if=pflash,format=raw,unit=0,readonly=on,file="+codeFile,
			"-drive", "if=pflash,format=raw,unit=1,file="+varsFile)
		if m.SecureBoot {
			args = append(args, "-global", "driver=cfi.pflash01,property=secure,value=on")
		}
	}
	return append(append(args, m.diskArgs()...), m.nicArgs()...)
}

// diskArgs attach each disk, copy-on-write (snapshot=on), on its bus.
func (m *Machine) diskArgs() []string {
	var args []string
	scsi := false
	for i, d := range m.Disks {
		id := fmt.Sprintf("disk%d", i)
		args = append(args, "-drive", fmt.Sprintf("file=%s,format=raw,if=none,id=%s,snapshot=on", d.Image, id))
		var dev string
		switch d.Bus {
		case "sata":
			dev = fmt.Sprintf("ide-hd,drive=%s,bus=ide.%d", id, i)
		case "scsi":
			if !scsi {
				args = append(args, "-device", "virtio-scsi-pci,id=scsi0")
				scsi = true
			}
			dev = fmt.Sprintf("scsi-hd,drive=%s,bus=scsi0.0", id)
		default:
			dev = "virtio-blk-pci,drive=" + id
		}
		if d.Serial != "" {
			dev += ",serial=" + d.Serial
		}
		if d.BootOrder > 0 {
			dev += fmt.Sprintf(",bootindex=%d", d.BootOrder)
		}
		args = append(args, "-device", dev)
	}
	return args
}

// nicArgs give each interface a user-mode network that reaches nothing.
func (m *Machine) nicArgs() []string {
	var args []string
	for i, n := range m.NICs {
		id := fmt.Sprintf("net%d", i)
		dev := n.Model + ",netdev=" + id
		if n.MAC != "" {
			dev += ",mac=" + n.MAC
		}
		if n.BootOrder > 0 {
			dev += fmt.Sprintf(",bootindex=%d", n.BootOrder)
		} else {
			// No PXE attempt before the disk.
			dev += ",romfile="
		}
		args = append(args, "-netdev", "user,id="+id+",restrict=on", "-device", dev)
	}
	return args
}
