package pipeline

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
)

const gib = int64(1) << 30

// testConfig is the Step configuration of the golden files.
var testConfig = Config{
	TransferImage:   "registry.example/vm-migration-controller:v0.1.0",
	ConversionImage: "registry.example/virt-v2v:2.13",
}

// migration builds a migration that reached Converting: inventoried, its
// disks initialised as the state machine does, its target named, its spec
// applied. Modifiers shape it.
func migration(name string, inv v1alpha1.SourceInventory, mods ...func(*v1alpha1.VirtualMachineMigration)) *v1alpha1.VirtualMachineMigration {
	m := &v1alpha1.VirtualMachineMigration{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "VirtualMachineMigration"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "apps", UID: "6a1f0c2e-3b4d-4e5f-8a9b-0c1d2e3f4a5b", Generation: 1,
		},
		Spec: v1alpha1.VirtualMachineMigrationSpec{
			Source: v1alpha1.SourceSpec{
				URL:                  "https://vcenter.example.com/sdk",
				CredentialsSecretRef: v1alpha1.SecretReference{Name: "vcenter-credentials"},
				VM:                   v1alpha1.VMSelector{Name: inv.Name},
			},
			Staging: v1alpha1.StagingSpec{StorageClassName: "staging-fs"},
		},
	}
	m.Status.Phase = v1alpha1.PhaseConverting
	m.Status.Source = inv.DeepCopy()
	for i, d := range inv.Disks {
		m.Status.Disks = append(m.Status.Disks, v1alpha1.DiskStatus{
			Key: d.Key, Name: naming.DiskName(i), StagingClaim: naming.StagingClaim(name, d.Key), CapacityBytes: d.CapacityBytes,
		})
	}
	m.Status.Target = &v1alpha1.TargetStatus{Name: naming.DNS1123Label(inv.Name)}
	for _, mod := range mods {
		mod(m)
	}
	if m.Status.AppliedSpec == nil {
		m.Status.AppliedSpec = m.Spec.DeepCopy()
	}
	return m
}

// linuxBIOS: a BIOS Linux VM with one disk and one NIC on the pod network.
func linuxBIOS() *v1alpha1.VirtualMachineMigration {
	return migration("web-01-migration", v1alpha1.SourceInventory{
		Name: "web-01", MoRef: "vm-42", InventoryPath: "/dc1/vm/web/web-01",
		BIOSUUID: "421a2b3c-4d5e-6f70-8192-a3b4c5d6e7f8", InstanceUUID: "503e6b7a-1c2d-4e5f-9a8b-7c6d5e4f3a2b",
		Server: "0f9e8d7c-6b5a-4c3d-2e1f-0a9b8c7d6e5f", Datacenter: "dc1", Host: "esxi-01.example.com",
		CPU: v1alpha1.CPUTopology{Sockets: 2, CoresPerSocket: 2}, MemoryMiB: 4096,
		Firmware: v1alpha1.FirmwareBIOS, GuestID: "rhel9_64Guest", GuestFamily: "linuxGuest",
		Disks: []v1alpha1.SourceDisk{{
			Key: 2000, Label: "Hard disk 1", CapacityBytes: 20 * gib, FileName: "[datastore1] web-01/web-01.vmdk",
			Datastore: "datastore1", ControllerType: "scsi", ControllerModel: "pvscsi",
		}},
		NICs: []v1alpha1.SourceNIC{{Key: 4000, Label: "Network adapter 1", MAC: "00:50:56:AA:BB:01", Network: "VM Network", AdapterType: "vmxnet3"}},
	}, func(m *v1alpha1.VirtualMachineMigration) {
		m.Spec.Target.Networks = []v1alpha1.NetworkMapping{{Source: "VM Network", Type: v1alpha1.NetworkTypePod}}
		m.Spec.Target.Storage.Default = &v1alpha1.StorageTarget{StorageClassName: "ceph-rbd"}
	})
}

// windowsEFI: an EFI secure-boot Windows VM with three disks on two
// datastores and controllers, two NICs on two Multus networks, a custom
// conversion image, and a spec changed after the cutover (ignored).
func windowsEFI() *v1alpha1.VirtualMachineMigration {
	block := corev1.PersistentVolumeBlock
	fs := corev1.PersistentVolumeFilesystem
	return migration("sql-02", v1alpha1.SourceInventory{
		Name: "SQL-02 (prod)", MoRef: "vm-1017", BIOSUUID: "4223F0E1D2C3B4A5968778695A4B3C2D",
		Server: "0f9e8d7c-6b5a-4c3d-2e1f-0a9b8c7d6e5f", Datacenter: "dc1",
		CPU: v1alpha1.CPUTopology{Sockets: 2, CoresPerSocket: 4}, MemoryMiB: 16384,
		Firmware: v1alpha1.FirmwareEFI, SecureBoot: true,
		GuestID: "windows2019srv_64Guest", GuestFamily: "windowsGuest", GuestFullName: "Microsoft Windows Server 2019 (64-bit)",
		Disks: []v1alpha1.SourceDisk{
			{Key: 2000, Label: "Hard disk 1", CapacityBytes: 80 * gib, FileName: "[ds-gold] SQL-02/SQL-02.vmdk", Datastore: "ds-gold", ControllerType: "scsi"},
			{Key: 2001, Label: "Hard disk 2", CapacityBytes: 500*gib + 3*(1<<20), FileName: "[ds-bulk] SQL-02/SQL-02_1.vmdk", Datastore: "ds-bulk", ControllerType: "scsi", UnitNumber: 1},
			{Key: 16000, Label: "Hard disk 3", CapacityBytes: 10 * gib, FileName: "[ds-gold] SQL-02/SQL-02_2.vmdk", Datastore: "ds-gold", ControllerType: "sata"},
		},
		NICs: []v1alpha1.SourceNIC{
			{Key: 4000, Label: "Network adapter 1", MAC: "00:50:56:9a:01:02", Network: "Prod-VLAN20", AdapterType: "vmxnet3"},
			{Key: 4001, Label: "Network adapter 2", MAC: "00:50:56:9a:01:03", Network: "Backup", AdapterType: "e1000e"},
		},
	}, func(m *v1alpha1.VirtualMachineMigration) {
		m.Spec.Conversion.Image = "registry.example/virt-v2v-win:2.13"
		m.Spec.Staging.SizeOverheadPercent = ptr.To[int32](5)
		m.Spec.Target.Networks = []v1alpha1.NetworkMapping{
			{Source: "Prod-VLAN20", Type: v1alpha1.NetworkTypeMultus, MultusNetworkName: "net-system/vlan20"},
			{Source: "Backup", Type: v1alpha1.NetworkTypeMultus, MultusNetworkName: "backup"},
		}
		m.Spec.Target.Storage = v1alpha1.StorageMapping{
			Default:    &v1alpha1.StorageTarget{StorageClassName: "standard"},
			Datastores: []v1alpha1.DatastoreStorageMapping{{Datastore: "ds-bulk", Target: v1alpha1.StorageTarget{StorageClassName: "bulk-hdd", VolumeMode: &fs}}},
			Disks: []v1alpha1.DiskStorageMapping{{DiskKey: 2000, Target: v1alpha1.StorageTarget{
				StorageClassName: "fast-block", VolumeMode: &block, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}}}},
		}
		m.Status.AppliedSpec = m.Spec.DeepCopy()
		// Changed after the cutover: none of it may show.
		m.Spec.Conversion.Image = "registry.example/other:latest"
		m.Spec.Target.Storage.Default.StorageClassName = "changed-later"
		m.Spec.Staging.StorageClassName = "changed-later"
	})
}

// ignoredNIC: a VM with a NIC mapped to Ignore, MACs not preserved.
func ignoredNIC() *v1alpha1.VirtualMachineMigration {
	return migration("appliance", v1alpha1.SourceInventory{
		Name: "appliance-7", MoRef: "vm-7", BIOSUUID: "not-a-uuid",
		CPU: v1alpha1.CPUTopology{Sockets: 1, CoresPerSocket: 1}, MemoryMiB: 1024,
		Firmware: v1alpha1.FirmwareEFI, SecureBoot: false, GuestID: "otherLinux64Guest",
		Disks: []v1alpha1.SourceDisk{{Key: 3000, CapacityBytes: 8*gib + 512, FileName: "[local] appliance-7/appliance-7.vmdk", Datastore: "local", ControllerType: "ide"}},
		NICs: []v1alpha1.SourceNIC{
			{Key: 4000, Label: "Network adapter 1", MAC: "00:50:56:01:02:03", Network: "Mgmt"},
			{Key: 4001, Label: "Network adapter 2", MAC: "00:50:56:01:02:04", Network: "Service"},
		},
	}, func(m *v1alpha1.VirtualMachineMigration) {
		m.Spec.Staging.StorageClassName = ""
		m.Spec.Target.Name = "appliance"
		m.Status.Target.Name = "appliance"
		m.Spec.Target.PreserveMACAddresses = ptr.To(false)
		m.Spec.Target.Networks = []v1alpha1.NetworkMapping{
			{Source: "Mgmt", Type: v1alpha1.NetworkTypeIgnore},
			{Source: "Service", Type: v1alpha1.NetworkTypePod},
		}
	})
}
