package vsphere

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// diskSpec describes a disk the builder adds.
type diskSpec struct {
	ctrl    string // pvscsi, lsilogic, sata, nvme, ide
	bus     int32
	sizeMiB int64
	prov    string // Thin, Thick, EagerZeroedThick
	mode    types.VirtualDiskMode
	sharing types.VirtualDiskSharing
}

// nicSpec describes a NIC the builder adds.
type nicSpec struct {
	adapter string // vmxnet3, e1000, e1000e...
	network string
	mac     string
}

func (d diskSpec) kind() string {
	switch d.ctrl {
	case "pvscsi", "lsilogic", "lsilogic-sas", "buslogic":
		return ControllerSCSI
	case "sata":
		return ControllerSATA
	case "nvme":
		return ControllerNVMe
	}
	return ControllerIDE
}

func readDevices(t testing.TB, s *Session, vm *object.VirtualMachine) object.VirtualDeviceList {
	t.Helper()
	var m mo.VirtualMachine
	require.NoError(t, property.DefaultCollector(s.Client()).RetrieveOne(testCtx(t), vm.Reference(), []string{"config.hardware.device"}, &m))
	return m.Config.Hardware.Device
}

func reconfigure(t testing.TB, vm *object.VirtualMachine, spec types.VirtualMachineConfigSpec) {
	t.Helper()
	ctx := testCtx(t)
	task, err := vm.Reconfigure(ctx, spec)
	require.NoError(t, err)
	require.NoError(t, task.Wait(ctx))
}

// buildVM creates a VM with the given disks and NICs through the
// reconfigure API, the way an administrator would.
func buildVM(t testing.TB, s *Session, name string, disks []diskSpec, nics []nicSpec) *object.VirtualMachine {
	t.Helper()
	ctx := testCtx(t)
	vm := createVMIn(t, s, nil, name)

	// Controllers first, so disks can name their real keys.
	type ctrlID struct {
		model string
		bus   int32
	}
	devices := readDevices(t, s, vm)
	var add []types.BaseVirtualDeviceConfigSpec
	want := map[ctrlID]bool{}
	for _, d := range disks {
		if d.ctrl == "ide" {
			continue
		}
		id := ctrlID{d.ctrl, d.bus}
		if want[id] {
			continue
		}
		want[id] = true
		var c types.BaseVirtualDevice
		var err error
		switch d.ctrl {
		case "sata":
			c, err = devices.CreateSATAController()
		case "nvme":
			c, err = devices.CreateNVMEController()
		default:
			c, err = devices.CreateSCSIController(d.ctrl)
		}
		require.NoError(t, err)
		c.(types.BaseVirtualController).GetVirtualController().BusNumber = d.bus
		devices = append(devices, c)
		add = append(add, &types.VirtualDeviceConfigSpec{Operation: types.VirtualDeviceConfigSpecOperationAdd, Device: c})
	}
	if len(add) > 0 {
		reconfigure(t, vm, types.VirtualMachineConfigSpec{DeviceChange: add})
	}

	devices = readDevices(t, s, vm)
	controllerFor := func(d diskSpec) types.BaseVirtualController {
		for _, dev := range devices {
			c, ok := dev.(types.BaseVirtualController)
			if !ok || c.GetVirtualController().BusNumber != d.bus {
				continue
			}
			info, ok := describeController(dev)
			if ok && info.kind == d.kind() && (d.ctrl == "ide" || info.model == map[string]string{"sata": "ahci"}[d.ctrl] || info.model == d.ctrl) {
				return c
			}
		}
		require.FailNowf(t, "no controller for the disk", "want a %s controller on bus %d", d.ctrl, d.bus)
		return nil
	}
	finder := find.NewFinder(s.Client(), true)
	dc, err := s.Datacenter(ctx)
	require.NoError(t, err)
	finder.SetDatacenter(dc)
	ds, err := finder.DefaultDatastore(ctx)
	require.NoError(t, err)

	add = nil
	for i, d := range disks {
		disk := devices.CreateDisk(controllerFor(d), ds.Reference(), fmt.Sprintf("[%s] %s/%s_%d.vmdk", ds.Name(), name, name, i))
		disk.CapacityInKB = d.sizeMiB * 1024
		b := disk.Backing.(*types.VirtualDiskFlatVer2BackingInfo)
		switch d.prov {
		case ProvisioningThick:
			b.ThinProvisioned = types.NewBool(false)
		case ProvisioningEagerZeroedThick:
			b.ThinProvisioned = types.NewBool(false)
			b.EagerlyScrub = types.NewBool(true)
		}
		if d.mode != "" {
			b.DiskMode = string(d.mode)
		}
		if d.sharing != "" {
			b.Sharing = string(d.sharing)
		}
		devices = append(devices, disk)
		add = append(add, &types.VirtualDeviceConfigSpec{
			Operation:     types.VirtualDeviceConfigSpecOperationAdd,
			FileOperation: types.VirtualDeviceConfigSpecFileOperationCreate,
			Device:        disk,
		})
	}
	for _, n := range nics {
		net, err := finder.Network(ctx, n.network)
		require.NoError(t, err)
		backing, err := net.EthernetCardBackingInfo(ctx)
		require.NoError(t, err)
		card, err := devices.CreateEthernetCard(n.adapter, backing)
		require.NoError(t, err)
		e := card.(types.BaseVirtualEthernetCard).GetVirtualEthernetCard()
		if n.mac != "" {
			e.AddressType = string(types.VirtualEthernetCardMacTypeManual)
			e.MacAddress = n.mac
		}
		devices = append(devices, card)
		add = append(add, &types.VirtualDeviceConfigSpec{Operation: types.VirtualDeviceConfigSpecOperationAdd, Device: card})
	}
	if len(add) > 0 {
		reconfigure(t, vm, types.VirtualMachineConfigSpec{DeviceChange: add})
	}
	return vm
}

// createVMIn is createVM for testing.TB.
func createVMIn(t testing.TB, s *Session, folder *object.Folder, name string) *object.VirtualMachine {
	t.Helper()
	ctx := testCtx(t)
	dc, err := s.Datacenter(ctx)
	require.NoError(t, err)
	finder := find.NewFinder(s.Client(), true).SetDatacenter(dc)
	if folder == nil {
		folders, err := dc.Folders(ctx)
		require.NoError(t, err)
		folder = folders.VmFolder
	}
	vms, err := finder.VirtualMachineList(ctx, "*")
	require.NoError(t, err)
	pool, err := vms[0].ResourcePool(ctx)
	require.NoError(t, err)
	ds, err := finder.DefaultDatastore(ctx)
	require.NoError(t, err)
	spec := types.VirtualMachineConfigSpec{
		Name:     name,
		GuestId:  string(types.VirtualMachineGuestOsIdentifierRhel9_64Guest),
		NumCPUs:  4,
		MemoryMB: 2048,
		Files:    &types.VirtualMachineFileInfo{VmPathName: "[" + ds.Name() + "]"},
	}
	spec.NumCoresPerSocket = types.NewInt32(2)
	task, err := folder.CreateVM(ctx, spec, pool, nil)
	require.NoError(t, err)
	info, err := task.WaitForResult(ctx, nil)
	require.NoError(t, err)
	return object.NewVirtualMachine(s.Client(), info.Result.(types.ManagedObjectReference))
}
