package vsphere

import (
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// richDisks has one disk per interesting combination, deliberately not in
// source order.
var richDisks = []diskSpec{
	{ctrl: "nvme", bus: 0, sizeMiB: 3072, prov: ProvisioningThin},
	{ctrl: "pvscsi", bus: 0, sizeMiB: 4096, prov: ProvisioningThin},
	{ctrl: "pvscsi", bus: 0, sizeMiB: 2048, prov: ProvisioningThick, mode: types.VirtualDiskModeIndependent_persistent},
	{ctrl: "sata", bus: 0, sizeMiB: 1024, prov: ProvisioningEagerZeroedThick, sharing: types.VirtualDiskSharingSharingMultiWriter},
	{ctrl: "lsilogic", bus: 1, sizeMiB: 512, prov: ProvisioningThick},
	{ctrl: "ide", bus: 0, sizeMiB: 256, prov: ProvisioningThin},
}

func richNICs(kind modelKind) []nicSpec {
	nics := []nicSpec{
		{adapter: "vmxnet3", network: "VM Network", mac: "00:50:56:aa:00:01"},
		{adapter: "e1000e", network: "VM Network", mac: "00:50:56:aa:00:02"},
	}
	if kind == vpx {
		nics = append(nics, nicSpec{adapter: "e1000", network: "DC0_DVPG0", mac: "00:50:56:aa:00:03"})
	} else {
		nics = append(nics, nicSpec{adapter: "e1000", network: "VM Network", mac: "00:50:56:aa:00:03"})
	}
	return nics
}

func TestInventory(t *testing.T) {
	for _, kind := range bothModels {
		t.Run(string(kind), func(t *testing.T) {
			env := newSim(t, kind, nil)
			s := env.connect(t)
			ctx := testCtx(t)
			nics := richNICs(kind)
			vm := buildVM(t, s, "rich-vm", richDisks, nics)
			// EFI with secure boot, CBT on, a vTPM.
			reconfigure(t, vm, types.VirtualMachineConfigSpec{
				Firmware:              string(types.GuestOsDescriptorFirmwareTypeEfi),
				BootOptions:           &types.VirtualMachineBootOptions{EfiSecureBootEnabled: types.NewBool(true)},
				ChangeTrackingEnabled: types.NewBool(true),
				DeviceChange: []types.BaseVirtualDeviceConfigSpec{&types.VirtualDeviceConfigSpec{
					Operation: types.VirtualDeviceConfigSpecOperationAdd,
					Device:    &types.VirtualTPM{VirtualDevice: types.VirtualDevice{Key: -500}},
				}},
			})
			snap, err := vm.CreateSnapshot(ctx, "before-upgrade", "", false, false)
			require.NoError(t, err)
			require.NoError(t, snap.Wait(ctx))

			inv, err := Inventory(ctx, s, vm)
			require.NoError(t, err)

			// What the simulator holds, read from its registry.
			sim := env.model.Map().Get(vm.Reference()).(*simulator.VirtualMachine)
			cfg := sim.Config
			hostRef := *sim.Runtime.Host
			host := env.model.Map().Get(hostRef).(*simulator.HostSystem)
			dcName := "DC0"
			if kind == esx {
				dcName = "ha-datacenter"
			}
			assert.Equal(t, "rich-vm", inv.Name)
			assert.Equal(t, sim.Self.Value, inv.MoRef)
			assert.Equal(t, "/"+dcName+"/vm/rich-vm", inv.InventoryPath)
			assert.Equal(t, cfg.Uuid, inv.BIOSUUID)
			assert.Equal(t, cfg.InstanceUuid, inv.InstanceUUID)
			assert.Equal(t, s.Client().ServiceContent.About.InstanceUuid, inv.Server)
			assert.Equal(t, dcName, inv.Datacenter)
			assert.Equal(t, host.Name, inv.Host)
			assert.Equal(t, hostRef.Value, inv.HostMoRef)
			require.NotNil(t, host.Summary.Hardware)
			assert.Equal(t, host.Summary.Hardware.Uuid, inv.HostUUID)
			assert.NotEmpty(t, inv.HostUUID)
			assert.Equal(t, v1alpha1.CPUTopology{Sockets: 2, CoresPerSocket: 2}, inv.CPU)
			assert.Equal(t, int64(cfg.Hardware.MemoryMB), inv.MemoryMiB)
			assert.Equal(t, int64(2048), inv.MemoryMiB)
			assert.Equal(t, v1alpha1.FirmwareEFI, inv.Firmware)
			assert.True(t, inv.SecureBoot)
			assert.Equal(t, cfg.GuestId, inv.GuestID)
			assert.Equal(t, cfg.GuestFullName, inv.GuestFullName)
			assert.Equal(t, "linuxGuest", inv.GuestFamily)
			assert.Equal(t, sim.Guest.ToolsRunningStatus, inv.ToolsRunningStatus)
			assert.Equal(t, string(sim.Runtime.PowerState), inv.PowerState)
			assert.Equal(t, []string{"before-upgrade"}, inv.Snapshots)
			assert.True(t, inv.CBTEnabled)
			assert.False(t, inv.Encrypted)
			assert.True(t, inv.VTPM)

			// Disks: every simulator disk, field by field, in source order.
			simDevices := map[int32]types.BaseVirtualDevice{}
			var simDisks []*types.VirtualDisk
			for _, d := range cfg.Hardware.Device {
				simDevices[d.GetVirtualDevice().Key] = d
				if vd, ok := d.(*types.VirtualDisk); ok {
					simDisks = append(simDisks, vd)
				}
			}
			require.Len(t, inv.Disks, len(richDisks))
			require.Len(t, simDisks, len(richDisks))
			gotKeys := map[int32]v1alpha1.SourceDisk{}
			for _, d := range inv.Disks {
				gotKeys[d.Key] = d
			}
			for _, sd := range simDisks {
				got, ok := gotKeys[sd.Key]
				require.True(t, ok, "disk %d missing", sd.Key)
				b := sd.Backing.(*types.VirtualDiskFlatVer2BackingInfo)
				ds := env.model.Map().Get(*b.Datastore).(*simulator.Datastore)
				ctrl, _ := describeController(simDevices[sd.ControllerKey])
				assert.Equal(t, sd.DeviceInfo.GetDescription().Label, got.Label)
				assert.Equal(t, sd.CapacityInBytes, got.CapacityBytes)
				assert.Equal(t, b.FileName, got.FileName)
				assert.Equal(t, ds.Name, got.Datastore)
				assert.Equal(t, ds.Summary.Url, got.DatastoreURL)
				assert.NotEmpty(t, got.DatastoreURL)
				assert.Equal(t, ctrl.kind, got.ControllerType)
				assert.Equal(t, ctrl.model, got.ControllerModel)
				assert.Equal(t, ctrl.bus, got.BusNumber)
				assert.Equal(t, *sd.UnitNumber, got.UnitNumber)
				assert.Equal(t, b.DiskMode, got.DiskMode)
				assert.Equal(t, b.Sharing, got.Sharing)
				assert.False(t, got.RDM)
				assert.Equal(t, b.Parent != nil, got.SnapshotDelta)
			}
			// And against what the builder asked for, in source order.
			want := append([]diskSpec(nil), richDisks...)
			sort.SliceStable(want, func(i, j int) bool {
				if controllerRank[want[i].kind()] != controllerRank[want[j].kind()] {
					return controllerRank[want[i].kind()] < controllerRank[want[j].kind()]
				}
				return want[i].bus < want[j].bus
			})
			for i, w := range want {
				got := inv.Disks[i]
				assert.Equal(t, w.kind(), got.ControllerType, "disk %d", i)
				assert.Equal(t, w.bus, got.BusNumber, "disk %d", i)
				assert.Equal(t, w.sizeMiB<<20, got.CapacityBytes, "disk %d", i)
				assert.Equal(t, w.prov, got.Provisioning, "disk %d", i)
				if w.mode != "" {
					assert.Equal(t, string(w.mode), got.DiskMode, "disk %d", i)
				}
				if w.sharing != "" {
					assert.Equal(t, string(w.sharing), got.Sharing, "disk %d", i)
				}
				if i > 0 {
					prev := inv.Disks[i-1]
					if prev.ControllerType == got.ControllerType && prev.BusNumber == got.BusNumber {
						assert.Less(t, prev.UnitNumber, got.UnitNumber, "disk %d out of order", i)
					}
				}
			}

			// NICs, field by field, by key.
			require.Len(t, inv.NICs, len(nics))
			for i, n := range nics {
				got := inv.NICs[i]
				sd := simDevices[got.Key].(types.BaseVirtualEthernetCard)
				e := sd.GetVirtualEthernetCard()
				assert.Equal(t, e.DeviceInfo.GetDescription().Label, got.Label)
				assert.Equal(t, e.MacAddress, got.MAC)
				assert.Equal(t, n.mac, got.MAC)
				assert.Equal(t, n.adapter, got.AdapterType)
				assert.Equal(t, n.network, got.Network)
			}
		})
	}
}

func TestInventoryDefaultVM(t *testing.T) {
	for _, kind := range bothModels {
		t.Run(string(kind), func(t *testing.T) {
			env := newSim(t, kind, nil)
			s := env.connect(t)
			want := firstVM(t, s)
			vm, err := FindVM(testCtx(t), s, v1alpha1.VMSelector{Name: want.name})
			require.NoError(t, err)
			inv, err := Inventory(testCtx(t), s, vm)
			require.NoError(t, err)
			assert.Equal(t, want.path, inv.InventoryPath)
			assert.Equal(t, v1alpha1.FirmwareBIOS, inv.Firmware)
			assert.NotEmpty(t, inv.Disks)
			assert.NotEmpty(t, inv.NICs)
			assert.NotEmpty(t, inv.Disks[0].Datastore)
			assert.NotEmpty(t, inv.NICs[0].Network)
		})
	}
}

func TestInventoryPathInVApp(t *testing.T) {
	env := newSim(t, vpx, nil)
	s := env.connect(t)
	ctx := testCtx(t)
	dc, err := s.Datacenter(ctx)
	require.NoError(t, err)
	folders, err := dc.Folders(ctx)
	require.NoError(t, err)
	apps, err := folders.VmFolder.CreateFolder(ctx, "apps")
	require.NoError(t, err)
	pool, err := object.NewVirtualMachine(s.Client(), firstVM(t, s).ref).ResourcePool(ctx)
	require.NoError(t, err)
	vapp, err := pool.CreateVApp(ctx, "shop", vappResources(), simulator.NewVAppConfigSpec(), apps)
	require.NoError(t, err)
	task, err := vapp.CreateChildVM(ctx, types.VirtualMachineConfigSpec{
		Name: "shop-db", GuestId: string(types.VirtualMachineGuestOsIdentifierOtherGuest),
		Files: &types.VirtualMachineFileInfo{VmPathName: "[LocalDS_0]"},
	}, nil)
	require.NoError(t, err)
	info, err := task.WaitForResult(ctx, nil)
	require.NoError(t, err)
	vm := object.NewVirtualMachine(s.Client(), info.Result.(types.ManagedObjectReference))

	inv, err := Inventory(ctx, s, vm)
	require.NoError(t, err)
	// govmomi's own ancestry walk is the reference (vcsim parents a vApp
	// child VM to the vApp's folder; vCenter leaves parent unset and sets
	// parentVApp, which the inventory follows too).
	want, err := find.InventoryPath(ctx, s.Client(), vm.Reference())
	require.NoError(t, err)
	assert.Equal(t, want, inv.InventoryPath)
	assert.Equal(t, "DC0", inv.Datacenter)
	found, err := FindVM(ctx, s, v1alpha1.VMSelector{InventoryPath: inv.InventoryPath})
	require.NoError(t, err)
	assert.Equal(t, vm.Reference(), found.Reference())
}

func vappResources() types.ResourceConfigSpec {
	alloc := func() *types.ResourceAllocationInfo {
		return &types.ResourceAllocationInfo{
			Reservation: types.NewInt64(0), ExpandableReservation: types.NewBool(true), Limit: types.NewInt64(-1),
			Shares: &types.SharesInfo{Level: types.SharesLevelNormal},
		}
	}
	return types.ResourceConfigSpec{CpuAllocation: *alloc(), MemoryAllocation: *alloc()}
}

// TestInventoryPathVAppChildAsVCenterModelsIt checks the path of a VM whose
// parent is unset and whose parentVApp is set, as vCenter reports a vApp
// child (vcsim sets parent instead).
func TestInventoryPathVAppChildAsVCenterModelsIt(t *testing.T) {
	ref := func(typ, v string) types.ManagedObjectReference {
		return types.ManagedObjectReference{Type: typ, Value: v}
	}
	ptr := func(r types.ManagedObjectReference) *types.ManagedObjectReference { return &r }
	me := func(self types.ManagedObjectReference, name string, parent *types.ManagedObjectReference) mo.ManagedEntity {
		return mo.ManagedEntity{ExtensibleManagedObject: mo.ExtensibleManagedObject{Self: self}, Name: name, Parent: parent}
	}
	vmRef, vapp, pool := ref("VirtualMachine", "vm-1"), ref("VirtualApp", "resgroup-v9"), ref("ResourcePool", "resgroup-8")
	apps, vmFolder, dc, root := ref("Folder", "group-v7"), ref("Folder", "group-v3"), ref("Datacenter", "datacenter-2"), ref("Folder", "group-d1")
	objs := []any{
		mo.VirtualMachine{ManagedEntity: me(vmRef, "shop-db", nil), ParentVApp: ptr(vapp)},
		mo.VirtualApp{ResourcePool: mo.ResourcePool{ManagedEntity: me(vapp, "shop", ptr(pool))}, ParentFolder: ptr(apps)},
		mo.ResourcePool{ManagedEntity: me(pool, "Resources", nil)},
		mo.Folder{ManagedEntity: me(apps, "apps", ptr(vmFolder))},
		mo.Folder{ManagedEntity: me(vmFolder, "vm", ptr(dc))},
		mo.Datacenter{ManagedEntity: me(dc, "DC0", ptr(root))},
		mo.Folder{ManagedEntity: me(root, "Datacenters", nil)},
	}
	r := newInventoryResult(vmRef, objs)
	require.NotNil(t, r.vm)
	assert.Equal(t, "/DC0/vm/apps/shop/shop-db", r.inventoryPath())
	assert.Equal(t, "DC0", r.datacenter)
}

// TestInventoryGuestAsToolsReport: VMware Tools' report of the running
// guest (guest.guestId, guest.guestFullName) is read beside the guest OS
// the VM was configured with, and gives the family when Tools give none.
func TestInventoryGuestAsToolsReport(t *testing.T) {
	env := newSim(t, vpx, nil)
	s := env.connect(t)
	ctx := testCtx(t)
	vm := buildVM(t, s, "guest-vm", richDisks[:1], nil)
	reconfigure(t, vm, types.VirtualMachineConfigSpec{GuestId: "otherGuest64"})
	sim := env.model.Map().Get(vm.Reference()).(*simulator.VirtualMachine)
	sim.Guest.GuestId, sim.Guest.GuestFullName, sim.Guest.GuestFamily = "windows2019srv_64Guest", "Microsoft Windows Server 2019 (64-bit)", ""

	inv, err := Inventory(ctx, s, vm)
	require.NoError(t, err)
	assert.Equal(t, "otherGuest64", inv.GuestID, "the configured guest OS")
	assert.Equal(t, "windows2019srv_64Guest", inv.DetectedGuestID, "VMware Tools' report")
	assert.Equal(t, "Microsoft Windows Server 2019 (64-bit)", inv.DetectedGuestFullName)
	assert.Equal(t, "windowsGuest", inv.GuestFamily, "the family of the reported guest")
}
