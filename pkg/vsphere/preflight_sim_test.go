package vsphere

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/types"

	"platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/preflight"
)

// TestPreflightOnRuleBreakingVM builds, in the simulator, a VM that breaks
// every rule vcsim can express, inventories it, and checks the findings.
// Encryption and secure boot without EFI cannot be built in vcsim (it has no
// key provider by default and refuses secure boot on BIOS); the pure table
// tests in pkg/preflight cover them.
func TestPreflightOnRuleBreakingVM(t *testing.T) {
	for _, kind := range bothModels {
		t.Run(string(kind), func(t *testing.T) {
			env := newSim(t, kind, nil)
			s := env.connect(t)
			ctx := testCtx(t)
			vm := buildVM(t, s, "breaker", []diskSpec{
				{ctrl: "pvscsi", bus: 0, sizeMiB: 64, prov: ProvisioningThin},
				{ctrl: "pvscsi", bus: 0, sizeMiB: 64, prov: ProvisioningThick, mode: types.VirtualDiskModeIndependent_nonpersistent},
				{ctrl: "sata", bus: 0, sizeMiB: 64, prov: ProvisioningEagerZeroedThick, sharing: types.VirtualDiskSharingSharingMultiWriter},
			}, []nicSpec{{adapter: "vmxnet3", network: "VM Network"}})

			// An RDM disk on the SCSI controller, and a vTPM.
			devices := readDevices(t, s, vm)
			scsi, err := devices.FindDiskController("scsi")
			require.NoError(t, err)
			rdm := &types.VirtualDisk{
				VirtualDevice: types.VirtualDevice{
					Key: -100,
					Backing: &types.VirtualDiskRawDiskMappingVer1BackingInfo{
						VirtualDeviceFileBackingInfo: types.VirtualDeviceFileBackingInfo{FileName: "[LocalDS_0] breaker/breaker-rdm.vmdk"},
						CompatibilityMode:            string(types.VirtualDiskCompatibilityModePhysicalMode),
						DeviceName:                   "/vmfs/devices/disks/naa.600508b1001c4d41",
						DiskMode:                     string(types.VirtualDiskModeIndependent_persistent),
					},
				},
				CapacityInKB: 1024,
			}
			devices.AssignController(rdm, scsi)
			reconfigure(t, vm, types.VirtualMachineConfigSpec{
				Firmware: string(types.GuestOsDescriptorFirmwareTypeEfi),
				DeviceChange: []types.BaseVirtualDeviceConfigSpec{
					&types.VirtualDeviceConfigSpec{Operation: types.VirtualDeviceConfigSpecOperationAdd, FileOperation: types.VirtualDeviceConfigSpecFileOperationCreate, Device: rdm},
					&types.VirtualDeviceConfigSpec{Operation: types.VirtualDeviceConfigSpecOperationAdd, Device: &types.VirtualTPM{VirtualDevice: types.VirtualDevice{Key: -101}}},
				},
			})
			_, err = CreateSnapshot(ctx, vm, "someone-elses")
			require.NoError(t, err)

			inv, err := Inventory(ctx, s, vm)
			require.NoError(t, err)

			spec := &v1alpha1.VirtualMachineMigrationSpec{
				Target: v1alpha1.TargetSpec{
					// No default, one datastore entry naming a class that does not exist.
					Storage: v1alpha1.StorageMapping{Datastores: []v1alpha1.DatastoreStorageMapping{
						{Datastore: "LocalDS_0", Target: v1alpha1.StorageTarget{StorageClassName: "gold"}},
					}},
					// No entry for "VM Network".
					Networks: []v1alpha1.NetworkMapping{{Source: "other", Type: v1alpha1.NetworkTypePod}},
				},
			}
			findings := preflight.Check(spec, inv, preflight.ClusterFacts{
				StorageClasses:         map[string]bool{"fast": true},
				TargetName:             "breaker",
				TargetNameTaken:        true,
				DefaultConversionImage: "virt-v2v:test",
			})
			got := map[string]v1alpha1.Severity{}
			for _, f := range findings {
				got[f.Reason] = f.Severity
				t.Logf("%s %s: %s", f.Severity, f.Reason, f.Message)
			}
			want := map[string]v1alpha1.Severity{
				preflight.ReasonRDMDisk:             v1alpha1.SeverityBlocking,
				preflight.ReasonSharedDisk:          v1alpha1.SeverityBlocking,
				preflight.ReasonIndependentDisk:     v1alpha1.SeverityWarning,
				preflight.ReasonExistingSnapshots:   v1alpha1.SeverityBlocking,
				preflight.ReasonVTPM:                v1alpha1.SeverityWarning,
				preflight.ReasonUnmappedNetwork:     v1alpha1.SeverityBlocking,
				preflight.ReasonStorageClassMissing: v1alpha1.SeverityBlocking,
				preflight.ReasonTargetNameTaken:     v1alpha1.SeverityBlocking,
				// vcsim's VM runs no VMware Tools: its addresses are unknown.
				preflight.ReasonGuestNetworkUnknown: v1alpha1.SeverityWarning,
			}
			assert.Equal(t, want, got)

			// Without the datastore entry, and no default class in the
			// cluster, every disk misses a mapping.
			spec.Target.Storage.Datastores = nil
			findings = preflight.Check(spec, inv, preflight.ClusterFacts{StorageClasses: map[string]bool{"fast": true}})
			missing := 0
			for _, f := range findings {
				if f.Reason == preflight.ReasonMissingStorageMapping {
					missing++
				}
			}
			assert.Equal(t, len(inv.Disks), missing)
			assert.Len(t, inv.Disks, 4)
		})
	}
}
