// Package launcher is the KubeVirt stand-in's virt-launcher: it runs a
// VirtualMachineInstance's guest in QEMU inside the instance's launcher
// pod on the real test node (test/standins creates the pod; the image and
// its command, test/images/cmd/vmi-launcher, are built by package images).
//
// What is taken from the instance: the firmware (SeaBIOS, or OVMF with
// secure boot on or off as spec.domain.firmware.bootloader.efi says, its
// code read-only and a variable store of the machine's own, SMM as the
// features say), the SMBIOS UUID and serial, the CPU topology, the guest
// memory, the machine type (q35 only), every disk in order on its bus
// (virtio on a PCIe root port of its own, sata, scsi) with its boot order
// and serial, each from its volume's claim mounted by the kubelet
// (<disk dir>/<volume>/disk.img), and every interface with its model and
// MAC address, on a root port of its own as libvirt lays out a q35
// machine. What is not: the networks. Each interface gets QEMU's
// user-mode network with restrict=on (the guest reaches nothing; a
// masquerade interface's is KubeVirt's 10.0.2.0/24), since neither a pod
// network binding nor Multus exists on the test node. The accelerator is
// TCG unless the launcher is told KVM (the stand-in does only where a
// probe booted a real guest under KVM through the node's kvm
// RuntimeClass).
//
// The guest's first serial port is QEMU's standard output: the pod's log.
// The launcher talks to QEMU's monitor (QMP) and, while the guest holds
// the agent's virtio-serial port (org.qemu.guest_agent.0) open, asks
// QEMU's guest agent what virt-launcher's agent poller asks
// (guest-get-osinfo, guest-network-get-interfaces). It serves what it
// knows (Status) as JSON on port 9090 of the pod, with a readiness path
// that answers once QEMU runs the guest; the stand-in reads it through the
// API server's pod proxy and reports it as virt-handler does. When the pod
// is deleted, a guest whose agent ever answered is shut down by ACPI
// within the grace period, anything else is stopped at once.
package launcher
