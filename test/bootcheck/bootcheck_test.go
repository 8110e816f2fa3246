package bootcheck

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"platform.example/vm-migration/test/images/launcher"
)

// vmWith is a BIOS VM with one virtio disk on volume "disk-0".
func vmWith() *kubevirtv1.VirtualMachine {
	vm := &kubevirtv1.VirtualMachine{Spec: kubevirtv1.VirtualMachineSpec{Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{}}}
	vm.Name, vm.Namespace = "guest", "ns"
	spec := &vm.Spec.Template.Spec
	spec.Domain.Memory = &kubevirtv1.Memory{Guest: ptr.To(resource.MustParse("256Mi"))}
	spec.Domain.Devices.Disks = []kubevirtv1.Disk{{Name: "disk-0", BootOrder: ptr.To[uint](1),
		DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}}}
	spec.Volumes = []kubevirtv1.Volume{{Name: "disk-0", VolumeSource: kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: "dv"}}}}
	return vm
}

func TestBoot(t *testing.T) {
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("qemu-system-x86_64 is not installed")
	}
	tests := map[string]struct {
		sector  []byte
		timeout time.Duration
		wantErr string
	}{
		"marker":    {sector: launcher.BootSector("booting\r\nV2V-GUEST-UP firmware=bios secureboot=0\r\n")},
		"no marker": {sector: launcher.BootSector("Dropping to a shell!\r\n"), timeout: 3 * time.Second, wantErr: "Dropping to a shell!"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			work := t.TempDir()
			img := make([]byte, 1<<20)
			copy(img, tc.sector)
			image := filepath.Join(work, "disk.img")
			require.NoError(t, os.WriteFile(image, img, 0o644), "writing the disk")
			res, err := Boot(context.Background(), vmWith(), Options{Images: map[string]string{"disk-0": image}, WorkDir: work, Timeout: tc.timeout})
			if tc.wantErr != "" {
				assert.ErrorContains(t, err, tc.wantErr, "a boot that never reaches the marker fails, saying what the guest printed")
				return
			}
			require.NoError(t, err, "Boot")
			assert.Equal(t, "V2V-GUEST-UP firmware=bios secureboot=0", res.Line, "the marker line the guest printed")
			assert.Equal(t, "0", res.Fields["secureboot"], "the marker's secureboot field")
		})
	}
}
