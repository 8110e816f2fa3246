package bootcheck

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// vmWith is a VM with one virtio disk "disk-0", one NIC and 1 GiB, changed by mods.
func vmWith(mods ...func(*kubevirtv1.DomainSpec)) *kubevirtv1.VirtualMachine {
	vm := &kubevirtv1.VirtualMachine{Spec: kubevirtv1.VirtualMachineSpec{Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{}}}
	vm.Name = "guest"
	dom := &vm.Spec.Template.Spec.Domain
	dom.Memory = &kubevirtv1.Memory{Guest: ptr.To(resource.MustParse("1Gi"))}
	dom.Devices.Disks = []kubevirtv1.Disk{{Name: "disk-0", BootOrder: ptr.To[uint](1),
		DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}}}
	dom.Devices.Interfaces = []kubevirtv1.Interface{{Name: "nic-0", Model: "virtio", MacAddress: "00:50:56:01:02:03"}}
	for _, mod := range mods {
		mod(dom)
	}
	return vm
}

func efi(secureBoot *bool, smm bool) func(*kubevirtv1.DomainSpec) {
	return func(d *kubevirtv1.DomainSpec) {
		d.Firmware = &kubevirtv1.Firmware{Bootloader: &kubevirtv1.Bootloader{EFI: &kubevirtv1.EFI{SecureBoot: secureBoot}}}
		if smm {
			d.Features = &kubevirtv1.Features{SMM: &kubevirtv1.FeatureState{Enabled: ptr.To(true)}}
		}
	}
}

var images = map[string]string{"disk-0": "/img/disk-0.img", "disk-1": "/img/disk-1.img"}

func TestFromVMAndQEMUArgs(t *testing.T) {
	tests := map[string]struct {
		vm       *kubevirtv1.VirtualMachine
		wantErr  string
		wantArgs []string // contiguous runs of arguments that must appear
		noArgs   []string
		wantCode string
	}{
		"BIOS": {
			vm: vmWith(),
			wantArgs: []string{"-machine q35,accel=tcg,smm=off", "-m 1024", "-smp 1,sockets=1,cores=1,threads=1",
				"-drive file=/img/disk-0.img,format=raw,if=none,id=disk0,snapshot=on", "-device virtio-blk-pci,drive=disk0,bootindex=1",
				"-netdev user,id=net0,restrict=on", "-device virtio-net-pci,netdev=net0,mac=00:50:56:01:02:03,romfile="},
			noArgs: []string{"if=pflash"},
		},
		"EFI with secure boot and SMM": {
			vm: vmWith(efi(ptr.To(true), true)),
			wantArgs: []string{"-machine q35,accel=tcg,smm=on",
				"-drive if=pflash,format=raw,unit=0,readonly=on,file=/fw/OVMF_CODE_4M.secboot.fd",
				"-drive if=pflash,format=raw,unit=1,file=/work/vars.fd", "-global driver=cfi.pflash01,property=secure,value=on"},
			wantCode: "/fw/OVMF_CODE_4M.secboot.fd",
		},
		"EFI without secure boot": {
			vm:       vmWith(efi(ptr.To(false), false)),
			wantArgs: []string{"-drive if=pflash,format=raw,unit=0,readonly=on,file=/fw/OVMF_CODE_4M.fd"},
			noArgs:   []string{"property=secure"},
			wantCode: "/fw/OVMF_CODE_4M.fd",
		},
		"EFI secure boot by default needs SMM": {
			vm:      vmWith(efi(nil, false)),
			wantErr: "requires SMM",
		},
		"topology, memory request, two disks on sata and scsi, serial": {
			vm: vmWith(func(d *kubevirtv1.DomainSpec) {
				d.CPU = &kubevirtv1.CPU{Sockets: 2, Cores: 2}
				d.Memory = nil
				d.Resources.Requests = corev1.ResourceList{"memory": resource.MustParse("2Gi")}
				d.Devices.Disks[0].Disk.Bus = kubevirtv1.DiskBusSATA
				d.Devices.Disks = append(d.Devices.Disks, kubevirtv1.Disk{Name: "disk-1", Serial: "data",
					DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusSCSI}}})
			}),
			wantArgs: []string{"-smp 4,sockets=2,cores=2,threads=1", "-m 2048", "-device ide-hd,drive=disk0,bus=ide.0,bootindex=1",
				"-device virtio-scsi-pci,id=scsi0", "-device scsi-hd,drive=disk1,bus=scsi0.0,serial=data"},
		},
		"a disk without image": {
			vm: vmWith(func(d *kubevirtv1.DomainSpec) {
				d.Devices.Disks = append(d.Devices.Disks, kubevirtv1.Disk{Name: "disk-9", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{}}})
			}),
			wantErr: "no image for disk disk-9",
		},
		"i440fx": {
			vm:      vmWith(func(d *kubevirtv1.DomainSpec) { d.Machine = &kubevirtv1.Machine{Type: "pc-i440fx-7.2"} }),
			wantErr: "only q35",
		},
		"no memory": {
			vm:      vmWith(func(d *kubevirtv1.DomainSpec) { d.Memory = nil }),
			wantErr: "no memory",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m, err := FromVM(tc.vm, images)
			if tc.wantErr != "" {
				assert.ErrorContains(t, err, tc.wantErr, "a VM the boot check cannot boot is refused")
				return
			}
			require.NoError(t, err, "FromVM")
			code, _ := m.FirmwareFiles("/fw")
			assert.Equal(t, tc.wantCode, code, "the firmware code file")
			joined := " " + strings.Join(m.QEMUArgs("/work/serial.log", code, "/work/vars.fd"), " ") + " "
			for _, want := range tc.wantArgs {
				assert.Contains(t, joined, " "+want+" ", "QEMU's arguments lack %q", want)
			}
			for _, no := range tc.noArgs {
				assert.NotContains(t, joined, no, "QEMU's arguments hold %q", no)
			}
		})
	}
}

func TestParseMarker(t *testing.T) {
	got := ParseMarker("\x1b[0mV2V-GUEST-UP firmware=efi secureboot=1 root=/dev/vda2 macs=00:50:56:01:02:03 junk", DefaultMarker)
	want := map[string]string{"firmware": "efi", "secureboot": "1", "root": "/dev/vda2", "macs": "00:50:56:01:02:03"}
	assert.Equal(t, want, got, "the marker's fields, without the junk word or the escape sequence")
}

// fakeQEMU writes a script that stands for qemu-system-x86_64: it writes
// lines to the file of its -serial file: argument, then waits (or exits).
func fakeQEMU(t *testing.T, lines string, exit bool) string {
	t.Helper()
	script := `#!/bin/sh
for a in "$@"; do case "$a" in file:*) serial=${a#file:};; esac; done
printf '` + lines + `' >"$serial"
` + map[bool]string{true: "exit 3\n", false: "exec sleep 60\n"}[exit]
	path := filepath.Join(t.TempDir(), "qemu")
	require.NoError(t, os.WriteFile(path, []byte(script), 0o755), "writing the fake qemu")
	return path
}

func TestBoot(t *testing.T) {
	fw := t.TempDir()
	for _, f := range []string{ovmfCodeSecureBoot, ovmfVarsMicrosoft} {
		require.NoError(t, os.WriteFile(filepath.Join(fw, f), []byte(f), 0o644), "writing the firmware file %s", f)
	}
	tests := map[string]struct {
		lines   string
		exit    bool
		timeout time.Duration
		wantErr string
	}{
		"marker":                {lines: `booting\r\nV2V-GUEST-UP firmware=efi secureboot=1\r\n`},
		"qemu exits first":      {lines: `Dropping to a shell!\n`, exit: true, wantErr: "qemu exited before the guest printed V2V-GUEST-UP"},
		"no marker before time": {lines: `(initramfs) \n`, timeout: 1500 * time.Millisecond, wantErr: "(initramfs)"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			work := t.TempDir()
			res, err := Boot(context.Background(), vmWith(efi(nil, true)), Options{
				Images: images, WorkDir: work, QEMU: fakeQEMU(t, tc.lines, tc.exit), FirmwareDir: fw, Timeout: tc.timeout,
			})
			if tc.wantErr != "" {
				assert.ErrorContains(t, err, tc.wantErr, "a boot that never reaches the marker fails, saying what the guest printed")
				return
			}
			require.NoError(t, err, "Boot")
			require.NotNil(t, res, "Boot's result")
			assert.Equal(t, "V2V-GUEST-UP firmware=efi secureboot=1", res.Line, "the marker line the guest printed")
			assert.Equal(t, "1", res.Fields["secureboot"], "the marker's secureboot field")
			vars, err := os.ReadFile(filepath.Join(work, "efi-vars.fd"))
			if assert.NoError(t, err, "reading the EFI variable store") {
				assert.Equal(t, ovmfVarsMicrosoft, string(vars), "the EFI variable store is a copy of the Microsoft-keyed template")
			}
		})
	}
}
