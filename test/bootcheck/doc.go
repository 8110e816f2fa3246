// Package bootcheck boots a migrated disk the way the target KubeVirt
// VirtualMachine describes it, in QEMU under TCG (no /dev/kvm needed), and
// waits for the guest's boot marker on its first serial port.
//
// What is taken from the VirtualMachine object: the firmware (BIOS, or
// OVMF with secure boot on or off as spec...firmware.bootloader.efi says,
// with SMM when the features ask for it), the CPU topology, the guest
// memory, the machine type (q35), every disk in order on its bus (virtio,
// sata, scsi) with its boot order and serial, and every interface with its
// model and MAC address. What is not: the networks. Each interface gets a
// user-mode network with restrict=on (the guest can reach nothing), since a
// pod network or a Multus network does not exist on a test machine.
//
// The disks are opened with snapshot=on: the boot writes to a temporary
// overlay and leaves the migrated image as it was.
//
// The test guests (hack/build-guest-images.sh) print one line that starts
// with their marker and carries key=value pairs describing what a
// conversion left in them (hack/guest/v2v-guest-marker); Result.Fields
// holds them.
package bootcheck
