package builders

import (
	"time"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// GiB is a gibibyte.
const GiB = int64(1) << 30

// Disk keys and capacities of Inventory.
const (
	DiskKey0 = int32(2000)
	DiskKey1 = int32(2001)
	DiskCap0 = 10 * GiB
	DiskCap1 = 20 * GiB
)

// InventoryMod changes one thing of an inventory.
type InventoryMod = func(*v1alpha1.SourceInventory)

// Inventory is the default source VM as the controller reads it: a powered
// on EFI RHEL guest with tools running, 2x2 vCPU, 8 GiB, two disks on two
// datastores of host esxi-01, two NICs (VM Network, backup).
func Inventory(mods ...InventoryMod) *v1alpha1.SourceInventory {
	inv := &v1alpha1.SourceInventory{
		Name:               SourceVMName,
		MoRef:              "vm-42",
		InventoryPath:      "/dc1/vm/prod/" + SourceVMName,
		BIOSUUID:           "4210a6c2-7f0e-4b1a-9b55-0a1b2c3d4e5f",
		InstanceUUID:       "5010a6c2-7f0e-4b1a-9b55-0a1b2c3d4e5f",
		Datacenter:         "dc1",
		Host:               "esxi-01.example.com",
		HostMoRef:          "host-7",
		CPU:                v1alpha1.CPUTopology{Sockets: 2, CoresPerSocket: 2},
		MemoryMiB:          8192,
		Firmware:           v1alpha1.FirmwareEFI,
		GuestID:            "rhel9_64Guest",
		ToolsRunningStatus: "guestToolsRunning",
		PowerState:         "poweredOn",
		Disks: []v1alpha1.SourceDisk{
			{Key: DiskKey0, Label: "Hard disk 1", CapacityBytes: DiskCap0, FileName: "[ds1] web01/web01.vmdk", Datastore: "ds1", ControllerType: "scsi", ControllerModel: "pvscsi"},
			{Key: DiskKey1, Label: "Hard disk 2", CapacityBytes: DiskCap1, FileName: "[ds2] web01/web01_1.vmdk", Datastore: "ds2", ControllerType: "scsi", ControllerModel: "pvscsi", UnitNumber: 1},
		},
		NICs: []v1alpha1.SourceNIC{
			{Key: 4000, Label: "Network adapter 1", MAC: "00:50:56:aa:bb:01", Network: "VM Network", AdapterType: "vmxnet3"},
			{Key: 4001, Label: "Network adapter 2", MAC: "00:50:56:aa:bb:02", Network: "backup", AdapterType: "e1000e"},
		},
		InventoriedAt: TP(-time.Hour),
	}
	for _, mod := range mods {
		mod(inv)
	}
	return inv
}

// LinuxBIOSInventory is a BIOS Linux VM with one 20 GiB disk and one NIC.
func LinuxBIOSInventory() *v1alpha1.SourceInventory {
	return &v1alpha1.SourceInventory{
		Name: "web-01", MoRef: "vm-42", InventoryPath: "/dc1/vm/web/web-01",
		BIOSUUID: "421a2b3c-4d5e-6f70-8192-a3b4c5d6e7f8", InstanceUUID: "503e6b7a-1c2d-4e5f-9a8b-7c6d5e4f3a2b",
		Server: "0f9e8d7c-6b5a-4c3d-2e1f-0a9b8c7d6e5f", Datacenter: "dc1", Host: "esxi-01.example.com",
		CPU: v1alpha1.CPUTopology{Sockets: 2, CoresPerSocket: 2}, MemoryMiB: 4096,
		Firmware: v1alpha1.FirmwareBIOS, GuestID: "rhel9_64Guest", GuestFamily: "linuxGuest",
		Disks: []v1alpha1.SourceDisk{{
			Key: 2000, Label: "Hard disk 1", CapacityBytes: 20 * GiB, FileName: "[datastore1] web-01/web-01.vmdk",
			Datastore: "datastore1", ControllerType: "scsi", ControllerModel: "pvscsi",
		}},
		NICs: []v1alpha1.SourceNIC{{Key: 4000, Label: "Network adapter 1", MAC: "00:50:56:AA:BB:01", Network: "VM Network", AdapterType: "vmxnet3"}},
	}
}

// WindowsEFIInventory is an EFI secure-boot Windows VM with three disks on
// two datastores and two controllers, and two NICs.
func WindowsEFIInventory() *v1alpha1.SourceInventory {
	return &v1alpha1.SourceInventory{
		Name: "SQL-02 (prod)", MoRef: "vm-1017", BIOSUUID: "4223F0E1D2C3B4A5968778695A4B3C2D",
		Server: "0f9e8d7c-6b5a-4c3d-2e1f-0a9b8c7d6e5f", Datacenter: "dc1",
		CPU: v1alpha1.CPUTopology{Sockets: 2, CoresPerSocket: 4}, MemoryMiB: 16384,
		Firmware: v1alpha1.FirmwareEFI, SecureBoot: true,
		GuestID: "windows2019srv_64Guest", GuestFamily: "windowsGuest", GuestFullName: "Microsoft Windows Server 2019 (64-bit)",
		Disks: []v1alpha1.SourceDisk{
			{Key: 2000, Label: "Hard disk 1", CapacityBytes: 80 * GiB, FileName: "[ds-gold] SQL-02/SQL-02.vmdk", Datastore: "ds-gold", ControllerType: "scsi"},
			{Key: 2001, Label: "Hard disk 2", CapacityBytes: 500*GiB + 3*(1<<20), FileName: "[ds-bulk] SQL-02/SQL-02_1.vmdk", Datastore: "ds-bulk", ControllerType: "scsi", UnitNumber: 1},
			{Key: 16000, Label: "Hard disk 3", CapacityBytes: 10 * GiB, FileName: "[ds-gold] SQL-02/SQL-02_2.vmdk", Datastore: "ds-gold", ControllerType: "sata"},
		},
		NICs: []v1alpha1.SourceNIC{
			{Key: 4000, Label: "Network adapter 1", MAC: "00:50:56:9a:01:02", Network: "Prod-VLAN20", AdapterType: "vmxnet3"},
			{Key: 4001, Label: "Network adapter 2", MAC: "00:50:56:9a:01:03", Network: "Backup", AdapterType: "e1000e"},
		},
	}
}

// ApplianceInventory is a small EFI appliance (no secure boot) with one
// IDE disk of an odd size, two NICs and a BIOS UUID that is not a UUID.
func ApplianceInventory() *v1alpha1.SourceInventory {
	return &v1alpha1.SourceInventory{
		Name: "appliance-7", MoRef: "vm-7", BIOSUUID: "not-a-uuid",
		CPU: v1alpha1.CPUTopology{Sockets: 1, CoresPerSocket: 1}, MemoryMiB: 1024,
		Firmware: v1alpha1.FirmwareEFI, SecureBoot: false, GuestID: "otherLinux64Guest",
		Disks: []v1alpha1.SourceDisk{{Key: 3000, CapacityBytes: 8*GiB + 512, FileName: "[local] appliance-7/appliance-7.vmdk", Datastore: "local", ControllerType: "ide"}},
		NICs: []v1alpha1.SourceNIC{
			{Key: 4000, Label: "Network adapter 1", MAC: "00:50:56:01:02:03", Network: "Mgmt"},
			{Key: 4001, Label: "Network adapter 2", MAC: "00:50:56:01:02:04", Network: "Service"},
		},
	}
}
