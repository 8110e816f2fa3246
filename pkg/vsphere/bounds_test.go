package vsphere

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"

	"platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/untrusted"
	"platform.example/vm-migration/test/crdschema"
)

// TestInventoryOf100KBStringsIsBound: an endpoint, and VMware Tools from
// inside the guest, that report 100 KB names, paths and guest OS names
// give an inventory status can keep: each value cut to its bound, the cut
// marked, none past the schema's maxLength.
func TestInventoryOf100KBStringsIsBound(t *testing.T) {
	schema, err := crdschema.Load()
	require.NoError(t, err)
	env := newSim(t, vpx, nil)
	s := env.connect(t)
	ctx := testCtx(t)
	vm := buildVM(t, s, "long-vm", richDisks[:2], richNICs(vpx)[:1])
	snap, err := vm.CreateSnapshot(ctx, "base", "", false, false)
	require.NoError(t, err)
	require.NoError(t, snap.Wait(ctx))

	huge, accented := strings.Repeat("x", 100<<10), strings.Repeat("é", 50<<10)
	reg := env.model.Map()
	sim := reg.Get(vm.Reference()).(*simulator.VirtualMachine)
	sim.Name = accented
	sim.Config.GuestId, sim.Config.GuestFullName = huge, huge
	sim.Guest.GuestId, sim.Guest.GuestFullName, sim.Guest.GuestFamily, sim.Guest.ToolsRunningStatus = huge, accented, huge, huge
	sim.Snapshot.RootSnapshotList[0].Name = huge
	reg.Get(*sim.Parent).(*simulator.Folder).Name = huge
	reg.Get(*sim.Runtime.Host).(*simulator.HostSystem).Name = huge
	ds := reg.Get(sim.Datastore[0]).(*simulator.Datastore)
	ds.Name, ds.Summary.Url = huge, huge
	for _, dev := range sim.Config.Hardware.Device {
		switch d := dev.(type) {
		case *types.VirtualDisk:
			d.DeviceInfo.GetDescription().Label = huge
			d.Backing.(*types.VirtualDiskFlatVer2BackingInfo).FileName = "[" + huge + "] " + huge + ".vmdk"
		case types.BaseVirtualEthernetCard:
			e := d.GetVirtualEthernetCard()
			e.DeviceInfo.GetDescription().Label = huge
			if b, ok := e.Backing.(*types.VirtualEthernetCardNetworkBackingInfo); ok {
				b.DeviceName, b.Network = huge, nil
			}
		}
	}

	inv, err := Inventory(ctx, s, vm)
	require.NoError(t, err)

	violations, err := schema.Violations("status.source", inv)
	require.NoError(t, err)
	assert.Empty(t, violations, "what the API server would refuse")
	require.Len(t, inv.Disks, 2)
	require.Len(t, inv.NICs, 1)
	fed := map[string]string{
		"name": inv.Name, "inventoryPath": inv.InventoryPath, "host": inv.Host,
		"guestID": inv.GuestID, "guestFullName": inv.GuestFullName, "detectedGuestID": inv.DetectedGuestID,
		"detectedGuestFullName": inv.DetectedGuestFullName, "guestFamily": inv.GuestFamily,
		"toolsRunningStatus": inv.ToolsRunningStatus, "snapshots[0]": inv.Snapshots[0],
		"nics[0].label": inv.NICs[0].Label, "nics[0].network": inv.NICs[0].Network,
	}
	for i, d := range inv.Disks {
		for field, v := range map[string]string{"label": d.Label, "fileName": d.FileName, "datastore": d.Datastore, "datastoreURL": d.DatastoreURL} {
			fed[fmt.Sprintf("disks[%d].%s", i, field)] = v
		}
	}
	for field, v := range fed {
		node := schema.At("status.source." + strings.ReplaceAll(strings.ReplaceAll(field, "[0]", "[]"), "[1]", "[]"))
		require.NotNil(t, node, field)
		max, ok := node.Int("maxLength")
		require.True(t, ok, "%s has no maxLength", field)
		assert.LessOrEqual(t, len(v), max, "%s: bytes", field)
		assert.True(t, strings.HasSuffix(v, untrusted.CutMarker), "%s: the cut is not marked: %.40q", field, v)
	}
}

// TestInventoryRefusesMoreNICsThanStatusKeeps: a VM with more NICs than
// status keeps is refused with the count, not migrated without some.
func TestInventoryRefusesMoreNICsThanStatusKeeps(t *testing.T) {
	env := newSim(t, vpx, nil)
	s := env.connect(t)
	var nics []nicSpec
	for i := range v1alpha1.MaxNICs + 1 {
		nics = append(nics, nicSpec{adapter: "vmxnet3", network: "VM Network", mac: fmt.Sprintf("00:50:56:aa:01:%02x", i)})
	}
	vm := buildVM(t, s, "many-nics", richDisks[:1], nics)

	_, err := Inventory(testCtx(t), s, vm)

	var count *v1alpha1.CountError
	require.ErrorAs(t, err, &count)
	assert.Equal(t, v1alpha1.CountError{What: "NICs", Count: v1alpha1.MaxNICs + 1, Max: v1alpha1.MaxNICs}, *count)
}
