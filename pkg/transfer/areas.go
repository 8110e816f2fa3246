package transfer

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"strings"

	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"platform.example/vm-migration/pkg/transfer/wire"
	"platform.example/vm-migration/pkg/vsphere"
)

// WholeDisk is the map of a disk read from its first byte to its last.
const WholeDisk = "whole disk"

// usedSlack is how far below the datastore's figure for a disk's space in
// use its allocated-area map may fall and still be trusted: one VMFS
// block, for rounding and the file system's own metadata.
const usedSlack = 1 << 20

// vmAreaProperties are the VM properties readAreas needs.
var vmAreaProperties = []string{"config.changeTrackingEnabled", "layoutEx.file"}

// readAreas decides which parts of a disk are read: the areas vSphere
// reports in use, when the VM is powered off with changed block tracking
// on, the query answers and its map holds against the space the datastore
// reports in use; otherwise the whole disk, and why. Only a cancelled
// context is an error: any other failure of the query means a full copy.
func (p *Planner) readAreas(ctx context.Context, spec *wire.JobSpec, vm *mo.VirtualMachine, disk *types.VirtualDisk, plan *DiskPlan) error {
	plan.Map = WholeDisk
	switch {
	case spec.FullCopy:
		plan.FullCopyReason = "allocated-only copy is turned off for this transfer"
	case vm.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOff:
		plan.FullCopyReason = fmt.Sprintf("the VM is %s: vSphere maps the allocated areas of a powered-off VM's disks only", vm.Runtime.PowerState)
	case vm.Config == nil || vm.Config.ChangeTrackingEnabled == nil || !*vm.Config.ChangeTrackingEnabled:
		plan.FullCopyReason = "changed block tracking is off on the VM, so vSphere cannot map the disk's allocated areas"
	}
	if plan.FullCopyReason != "" {
		return nil
	}
	areas, err := vsphere.AllocatedAreas(ctx, p.Client, vm.Self, disk.Key, plan.Spec.CapacityBytes)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		plan.FullCopyReason = "vSphere did not map the disk's allocated areas: " + oneLine(err.Error())
		return nil
	}
	allocated := vsphere.AreasBytes(areas)
	plan.AllocatedBytes = &allocated
	used, known := usedBytes(vm, plan.Extents)
	switch {
	case !known:
		plan.FullCopyReason = "the datastore reports no usable figure of the space in use for the disk's extents to check vSphere's map against"
	case allocated < used-usedSlack: // both at least 0 (AllocatedAreas, usedBytes): neither side can wrap
		plan.FullCopyReason = fmt.Sprintf("vSphere's map of the disk's allocated areas covers %d bytes, less than the %d bytes the datastore reports in use", allocated, used)
	default:
		plan.Areas = areas
		plan.Map = areasMap(disk, areas)
	}
	return nil
}

// usedBytes is the space the datastore reports in use for a disk's
// extents: the sizes of their layoutEx entries (for a thin disk, what it
// allocated). It is not known when an extent has no entry, or one of
// negative size, or when the sizes add up past the largest int64: a sum
// that wrapped could fall below any map.
func usedBytes(vm *mo.VirtualMachine, extents []ExtentPlan) (int64, bool) {
	if vm.LayoutEx == nil {
		return 0, false
	}
	var used int64
	for _, e := range extents {
		f, ok := e.File.(*DatastoreFile)
		if !ok {
			return 0, false
		}
		found := false
		for _, lf := range vm.LayoutEx.File {
			if lf.Name == f.Name {
				if lf.Size < 0 || lf.Size > math.MaxInt64-used {
					return 0, false // no figure: negative, or the sum would wrap
				}
				used, found = used+lf.Size, true
				break
			}
		}
		if !found {
			return 0, false
		}
	}
	return used, true
}

// areasMap identifies a map: the disk's change ID and a digest of its areas.
func areasMap(disk *types.VirtualDisk, areas []vsphere.DiskArea) string {
	changeID := ""
	if b, ok := disk.Backing.(*types.VirtualDiskFlatVer2BackingInfo); ok {
		changeID = b.ChangeId
	}
	h := sha256.New()
	var buf [16]byte
	for _, a := range areas {
		binary.BigEndian.PutUint64(buf[:8], uint64(a.Start))
		binary.BigEndian.PutUint64(buf[8:], uint64(a.Length))
		h.Write(buf[:])
	}
	return fmt.Sprintf("allocated areas of disk %d, changeId %q, %d areas, sha256 %s", disk.Key, changeID, len(areas), hex.EncodeToString(h.Sum(nil))[:16])
}

// allocatedOnly says a map is of allocated areas, not the whole disk.
func allocatedOnly(mapID string) bool { return strings.HasPrefix(mapID, "allocated areas") }
