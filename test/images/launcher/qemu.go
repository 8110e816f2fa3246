package launcher

import (
	"fmt"
	"path/filepath"
	"strconv"
)

// Accelerators QEMU can run a Machine with.
const (
	// AccelTCG is QEMU's emulator: no /dev/kvm needed, slow.
	AccelTCG = "tcg"
	// AccelKVM needs /dev/kvm (the node's kvm RuntimeClass offers it).
	AccelKVM = "kvm"
)

// GuestAgentChannel is the name of the virtio-serial port QEMU's guest
// agent listens on, as libvirt (and so KubeVirt) names it.
const GuestAgentChannel = "org.qemu.guest_agent.0"

// agentPortID is the QEMU device id of the guest agent's port, which its
// VSERPORT_CHANGE events name.
const agentPortID = "channel0"

// OVMF's files in Debian's ovmf package: 4 MiB builds, with and without
// secure boot; the secure-boot variable store has Microsoft's keys
// enrolled (what KubeVirt uses).
const (
	ovmfCode           = "OVMF_CODE_4M.fd"
	ovmfVars           = "OVMF_VARS_4M.fd"
	ovmfCodeSecureBoot = "OVMF_CODE_4M.secboot.fd"
	ovmfVarsMicrosoft  = "OVMF_VARS_4M.ms.fd"
)

// Layout says where a QEMU process finds and puts its files.
type Layout struct {
	// FirmwareCode is OVMF's code (EFI only), mapped read-only.
	FirmwareCode string
	// FirmwareVars is the machine's own copy of the EFI variable store.
	FirmwareVars string
	// QMPSocket is the QEMU monitor's unix socket (QEMU listens).
	QMPSocket string
	// AgentSocket is the guest agent channel's unix socket (QEMU listens).
	AgentSocket string
}

// NewLayout puts the sockets and the variable store in runDir and takes
// OVMF from firmwareDir.
func (m *Machine) NewLayout(firmwareDir, runDir string) Layout {
	l := Layout{QMPSocket: filepath.Join(runDir, "qmp.sock"), AgentSocket: filepath.Join(runDir, "qga.sock")}
	if m.Firmware == FirmwareEFI {
		l.FirmwareCode = filepath.Join(firmwareDir, ovmfCode)
		if m.SecureBoot {
			l.FirmwareCode = filepath.Join(firmwareDir, ovmfCodeSecureBoot)
		}
		l.FirmwareVars = filepath.Join(runDir, "efi-vars.fd")
	}
	return l
}

// VarsTemplate is the firmware's variable store the machine's own copy
// starts from (EFI only; "" for BIOS).
func (m *Machine) VarsTemplate(firmwareDir string) string {
	switch {
	case m.Firmware != FirmwareEFI:
		return ""
	case m.SecureBoot:
		return filepath.Join(firmwareDir, ovmfVarsMicrosoft)
	default:
		return filepath.Join(firmwareDir, ovmfVars)
	}
}

// QEMUArgs are qemu-system-x86_64's arguments for the machine under accel:
// the first serial port on QEMU's standard output (the pod's log), the
// monitor and the guest agent channel on unix sockets, and each NIC, the
// virtio-serial controller and each virtio disk on a PCIe root port of
// its own, as libvirt lays out a q35 machine (so the guest's names of
// them, enp1s0..., are a KubeVirt guest's).
func (m *Machine) QEMUArgs(accel string, l Layout) []string {
	smm := "off"
	if m.SMM {
		smm = "on"
	}
	cpu := "max"
	if accel == AccelKVM {
		cpu = "host"
	}
	args := []string{
		"-name", "guest=" + m.Name + ",debug-threads=on",
		"-machine", "q35,accel=" + accel + ",smm=" + smm,
		"-cpu", cpu,
		"-smp", fmt.Sprintf("%d,sockets=%d,cores=%d,threads=%d", m.Sockets*m.Cores*m.Threads, m.Sockets, m.Cores, m.Threads),
		"-m", strconv.FormatInt(m.MemoryMiB, 10),
		"-rtc", "base=utc",
		"-display", "none", "-nodefaults", "-no-user-config",
		"-chardev", "stdio,id=serial0,signal=off", "-serial", "chardev:serial0",
		"-qmp", "unix:" + l.QMPSocket + ",server=on,wait=off",
	}
	args = append(args, m.smbiosArgs()...)
	if m.Firmware == FirmwareEFI {
		args = append(args,
			"-drive", "if=pflash,format=raw,unit=0,readonly=on,file="+l.FirmwareCode,
			"-drive", "if=pflash,format=raw,unit=1,file="+l.FirmwareVars)
		if m.SecureBoot {
			args = append(args, "-global", "driver=cfi.pflash01,property=secure,value=on")
		}
	}
	ports := &rootPorts{}
	args = append(args, m.nicArgs(ports)...)
	args = append(args, agentArgs(ports, l.AgentSocket)...)
	args = append(args, m.diskArgs(ports)...)
	return append(ports.args, args...)
}

// smbiosArgs give the machine its SMBIOS system UUID and serial.
func (m *Machine) smbiosArgs() []string {
	if m.UUID == "" && m.Serial == "" {
		return nil
	}
	var args []string
	if m.UUID != "" {
		args = append(args, "-uuid", m.UUID)
	}
	if m.Serial != "" {
		args = append(args, "-smbios", "type=1,serial="+m.Serial)
	}
	return args
}

// rootPorts hands out PCIe root ports: pci.1 in slot 2 of pcie.0, pci.2 in
// slot 3, ...
type rootPorts struct {
	n    int
	args []string
}

// next adds a root port and returns its bus name.
func (p *rootPorts) next() string {
	p.n++
	bus := fmt.Sprintf("pci.%d", p.n)
	p.args = append(p.args, "-device", fmt.Sprintf("pcie-root-port,id=%s,chassis=%d,bus=pcie.0,addr=0x%x", bus, p.n, p.n+1))
	return bus
}

// nicArgs give each interface a user-mode network with restrict=on: the
// guest reaches nothing beyond QEMU's own DHCP and DNS. A masquerade
// interface's network is KubeVirt's (10.0.2.0/24, gateway .1, the guest
// gets .2).
func (m *Machine) nicArgs(ports *rootPorts) []string {
	var args []string
	for i, n := range m.NICs {
		netdev := fmt.Sprintf("user,id=hostnet%d,restrict=on", i)
		if n.Masquerade {
			netdev += ",net=10.0.2.0/24,host=10.0.2.1,dhcpstart=10.0.2.2"
		}
		dev := fmt.Sprintf("%s,netdev=hostnet%d,id=ua-%s", n.Model, i, n.Name)
		if n.Model == "virtio-net-pci" {
			dev += ",bus=" + ports.next()
		}
		dev += ",mac=" + n.MAC
		if n.BootOrder > 0 {
			dev += fmt.Sprintf(",bootindex=%d", n.BootOrder)
		} else {
			// No network boot attempt before the disk.
			dev += ",romfile="
		}
		args = append(args, "-netdev", netdev, "-device", dev)
	}
	return args
}

// agentArgs add the virtio-serial controller and the guest agent's port.
func agentArgs(ports *rootPorts, socket string) []string {
	return []string{
		"-chardev", "socket,id=qga0,path=" + socket + ",server=on,wait=off",
		"-device", "virtio-serial-pci,id=virtio-serial0,bus=" + ports.next(),
		"-device", "virtserialport,bus=virtio-serial0.0,chardev=qga0,id=" + agentPortID + ",name=" + GuestAgentChannel,
	}
}

// diskArgs attach each disk on its bus: virtio on a root port, sata on
// the q35 AHCI controller's ports, scsi on one virtio-scsi controller.
func (m *Machine) diskArgs(ports *rootPorts) []string {
	var args []string
	scsi, sata := false, 0
	for _, d := range m.Disks {
		id := "ua-" + d.Name
		args = append(args, "-drive", fmt.Sprintf("file=%s,format=raw,if=none,id=drive-%s,discard=unmap", d.Image, id))
		var dev string
		switch d.Bus {
		case "sata":
			dev = fmt.Sprintf("ide-hd,drive=drive-%s,id=%s,bus=ide.%d", id, id, sata)
			sata++
		case "scsi":
			if !scsi {
				args = append(args, "-device", "virtio-scsi-pci,id=scsi0,bus="+ports.next())
				scsi = true
			}
			dev = fmt.Sprintf("scsi-hd,drive=drive-%s,id=%s,bus=scsi0.0", id, id)
		default:
			dev = fmt.Sprintf("virtio-blk-pci,drive=drive-%s,id=%s,bus=%s", id, id, ports.next())
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
