package launcher

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// instanceWith is an instance with one virtio disk "disk-0" on a
// DataVolume, one masquerade NIC on the pod network and 1 GiB, changed by
// mods.
func instanceWith(mods ...func(*kubevirtv1.VirtualMachineInstanceSpec)) *kubevirtv1.VirtualMachineInstance {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	vmi.Name, vmi.Namespace = "guest", "ns"
	spec := &vmi.Spec
	spec.Domain.Memory = &kubevirtv1.Memory{Guest: ptr.To(resource.MustParse("1Gi"))}
	spec.Domain.Devices.Disks = []kubevirtv1.Disk{{Name: "disk-0", BootOrder: ptr.To[uint](1),
		DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}}}
	spec.Volumes = []kubevirtv1.Volume{dataVolume("disk-0")}
	spec.Domain.Devices.Interfaces = []kubevirtv1.Interface{{Name: "net-0", Model: "virtio", MacAddress: "00:50:56:01:02:03",
		InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Masquerade: &kubevirtv1.InterfaceMasquerade{}}}}
	spec.Networks = []kubevirtv1.Network{{Name: "net-0", NetworkSource: kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}}}}
	for _, mod := range mods {
		mod(spec)
	}
	return vmi
}

func dataVolume(name string) kubevirtv1.Volume {
	return kubevirtv1.Volume{Name: name, VolumeSource: kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: "dv-" + name}}}
}

func efi(secureBoot *bool, smm bool) func(*kubevirtv1.VirtualMachineInstanceSpec) {
	return func(s *kubevirtv1.VirtualMachineInstanceSpec) {
		s.Domain.Firmware = &kubevirtv1.Firmware{Bootloader: &kubevirtv1.Bootloader{EFI: &kubevirtv1.EFI{SecureBoot: secureBoot}}}
		if smm {
			s.Domain.Features = &kubevirtv1.Features{SMM: &kubevirtv1.FeatureState{Enabled: ptr.To(true)}}
		}
	}
}

func TestFromInstanceAndQEMUArgs(t *testing.T) {
	tests := map[string]struct {
		vmi      *kubevirtv1.VirtualMachineInstance
		accel    string
		wantErr  string
		wantArgs []string // contiguous runs of arguments that must appear
		noArgs   []string
		wantVars string
	}{
		"BIOS, one disk, a masquerade NIC, the agent channel": {
			vmi: instanceWith(),
			wantArgs: []string{"-name guest=ns_guest,debug-threads=on", "-machine q35,accel=tcg,smm=off", "-cpu max", "-m 1024",
				"-smp 1,sockets=1,cores=1,threads=1", "-chardev stdio,id=serial0,signal=off -serial chardev:serial0",
				"-qmp unix:/run/l/qmp.sock,server=on,wait=off",
				"-device pcie-root-port,id=pci.1,chassis=1,bus=pcie.0,addr=0x2",
				"-netdev user,id=hostnet0,restrict=on,net=10.0.2.0/24,host=10.0.2.1,dhcpstart=10.0.2.2",
				"-device virtio-net-pci,netdev=hostnet0,id=ua-net-0,bus=pci.1,mac=00:50:56:01:02:03,romfile=",
				"-chardev socket,id=qga0,path=/run/l/qga.sock,server=on,wait=off -device virtio-serial-pci,id=virtio-serial0,bus=pci.2",
				"-device virtserialport,bus=virtio-serial0.0,chardev=qga0,id=channel0,name=org.qemu.guest_agent.0",
				"-drive file=/disks/disk-0/disk.img,format=raw,if=none,id=drive-ua-disk-0,discard=unmap",
				"-device virtio-blk-pci,drive=drive-ua-disk-0,id=ua-disk-0,bus=pci.3,bootindex=1"},
			noArgs: []string{"if=pflash", "-uuid", "-smbios"},
		},
		"KVM": {
			vmi: instanceWith(), accel: AccelKVM,
			wantArgs: []string{"-machine q35,accel=kvm,smm=off", "-cpu host"},
		},
		"a NIC without MAC gets one derived from the instance": {
			vmi:      instanceWith(func(s *kubevirtv1.VirtualMachineInstanceSpec) { s.Domain.Devices.Interfaces[0].MacAddress = "" }),
			wantArgs: []string{"-device virtio-net-pci,netdev=hostnet0,id=ua-net-0,bus=pci.1,mac=52:54:00:e2:dc:fe,romfile="},
		},
		"EFI with secure boot and SMM, SMBIOS identity": {
			vmi: instanceWith(efi(ptr.To(true), true), func(s *kubevirtv1.VirtualMachineInstanceSpec) {
				s.Domain.Firmware.UUID, s.Domain.Firmware.Serial = "4c4c4544-0042-3010-8053-b2c04f473232", "VMware-42"
			}),
			wantArgs: []string{"-machine q35,accel=tcg,smm=on",
				"-drive if=pflash,format=raw,unit=0,readonly=on,file=/fw/OVMF_CODE_4M.secboot.fd",
				"-drive if=pflash,format=raw,unit=1,file=/run/l/efi-vars.fd", "-global driver=cfi.pflash01,property=secure,value=on",
				"-uuid 4c4c4544-0042-3010-8053-b2c04f473232", "-smbios type=1,serial=VMware-42"},
			wantVars: "/fw/OVMF_VARS_4M.ms.fd",
		},
		"EFI without secure boot": {
			vmi:      instanceWith(efi(ptr.To(false), false)),
			wantArgs: []string{"-drive if=pflash,format=raw,unit=0,readonly=on,file=/fw/OVMF_CODE_4M.fd"},
			noArgs:   []string{"property=secure"},
			wantVars: "/fw/OVMF_VARS_4M.fd",
		},
		"EFI secure boot by default needs SMM": {
			vmi:     instanceWith(efi(nil, false)),
			wantErr: "requires SMM",
		},
		"topology, memory request, disks on sata and scsi with a serial, a bridge NIC": {
			vmi: instanceWith(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
				s.Domain.CPU = &kubevirtv1.CPU{Sockets: 2, Cores: 2}
				s.Domain.Memory = nil
				s.Domain.Resources.Requests = corev1.ResourceList{"memory": resource.MustParse("2Gi")}
				s.Domain.Devices.Disks[0].Disk.Bus = kubevirtv1.DiskBusSATA
				s.Domain.Devices.Disks = append(s.Domain.Devices.Disks, kubevirtv1.Disk{Name: "disk-1", Serial: "data",
					DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusSCSI}}})
				s.Volumes = append(s.Volumes, kubevirtv1.Volume{Name: "disk-1", VolumeSource: kubevirtv1.VolumeSource{
					PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{}}})
				s.Domain.Devices.Interfaces[0].InterfaceBindingMethod = kubevirtv1.InterfaceBindingMethod{Bridge: &kubevirtv1.InterfaceBridge{}}
				s.Networks[0].NetworkSource = kubevirtv1.NetworkSource{Multus: &kubevirtv1.MultusNetwork{NetworkName: "default/vlan"}}
			}),
			wantArgs: []string{"-smp 4,sockets=2,cores=2,threads=1", "-m 2048", "-netdev user,id=hostnet0,restrict=on -device",
				"-device ide-hd,drive=drive-ua-disk-0,id=ua-disk-0,bus=ide.0,bootindex=1",
				"-device virtio-scsi-pci,id=scsi0,bus=pci.3", "-device scsi-hd,drive=drive-ua-disk-1,id=ua-disk-1,bus=scsi0.0,serial=data"},
		},
		"a disk without volume": {
			vmi: instanceWith(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
				s.Domain.Devices.Disks = append(s.Domain.Devices.Disks, kubevirtv1.Disk{Name: "disk-9", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{}}})
			}),
			wantErr: "instance ns/guest: disk disk-9 has no volume",
		},
		"a volume the launcher cannot mount": {
			vmi: instanceWith(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
				s.Volumes[0].VolumeSource = kubevirtv1.VolumeSource{ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: "x"}}
			}),
			wantErr: "volume disk-0 is neither a DataVolume nor a claim",
		},
		"i440fx": {
			vmi: instanceWith(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
				s.Domain.Machine = &kubevirtv1.Machine{Type: "pc-i440fx-7.2"}
			}),
			wantErr: "only q35",
		},
		"no memory": {
			vmi:     instanceWith(func(s *kubevirtv1.VirtualMachineInstanceSpec) { s.Domain.Memory = nil }),
			wantErr: "asks for no memory",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m, err := FromInstance(tc.vmi, "/disks")
			if tc.wantErr != "" {
				assert.ErrorContains(t, err, tc.wantErr, "an instance the launcher cannot run is refused")
				return
			}
			require.NoError(t, err, "FromInstance")
			accel := tc.accel
			if accel == "" {
				accel = AccelTCG
			}
			assert.Equal(t, tc.wantVars, m.VarsTemplate("/fw"), "the EFI variable store's template")
			joined := " " + strings.Join(m.QEMUArgs(accel, m.NewLayout("/fw", "/run/l")), " ") + " "
			for _, want := range tc.wantArgs {
				assert.Contains(t, joined, " "+want+" ", "QEMU's arguments lack %q", want)
			}
			for _, no := range tc.noArgs {
				assert.NotContains(t, joined, no, "QEMU's arguments hold %q", no)
			}
		})
	}
}
