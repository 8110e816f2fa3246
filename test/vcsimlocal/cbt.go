package vcsimlocal

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sync"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
	"golang.org/x/sys/unix"

	"platform.example/vm-migration/pkg/transfer"
)

// ChangeGranule is the unit of the areas the simulator reports: a disk's
// allocation rounded out to 64 KiB, the block changed-block tracking
// counts in on small disks.
const ChangeGranule = 64 << 10

// DefaultPageAreas is how many areas one answer of QueryChangedDiskAreas
// lists at most before the caller must ask again from where it ends.
const DefaultPageAreas = 64

// ChangeTracking answers QueryChangedDiskAreas for the VMs of a
// simulator, which vcsim does not implement, as ESXi does: with changeId
// "*" and no snapshot, for a powered-off VM with change tracking on, the
// areas of the disk in use, read from the real allocation of its flat
// extents on the simulator's datastore (SEEK_DATA and SEEK_HOLE), rounded
// out to ChangeGranule, at most PageAreas per answer, each answer saying
// how far it mapped. A powered-on VM without a snapshot gets
// InvalidPowerState, a VM with change tracking off a FileFault, an unknown
// device key or a start past the disk InvalidArgument. A snapshot is
// answered from the disk's current content (vcsim makes no delta disks).
type ChangeTracking struct {
	model *simulator.Model

	mu        sync.Mutex
	pageAreas int
	calls     int
	faults    map[string]types.BaseMethodFault // by VM moref value
	sparse    map[string]bool                  // VMs whose answers leave areas out
	tampered  map[string]func(*types.DiskChangeInfo)
}

// ServeChangeTracking installs the QueryChangedDiskAreas handler on a
// simulator's registry (before it serves requests) and returns it.
//
// vcsim dispatches a call to the object its session's registry holds for
// the call's target, else to the global one. A query therefore puts the
// VM, wrapped with the method, in the caller's session registry for that
// call, and the next call on the VM takes it out again: the global
// registry, which the rest of the simulator reads (and type-asserts),
// keeps the VM itself.
func ServeChangeTracking(m *simulator.Model) *ChangeTracking {
	ct := &ChangeTracking{model: m, pageAreas: DefaultPageAreas, faults: map[string]types.BaseMethodFault{}, sparse: map[string]bool{},
		tampered: map[string]func(*types.DiskChangeInfo){}}
	m.Map().Handler = func(ctx *simulator.Context, method *simulator.Method) (mo.Reference, types.BaseMethodFault) {
		if ctx.Session == nil || method.This.Type != "VirtualMachine" {
			return nil, nil
		}
		_, wrapped := ctx.Session.Registry.Get(method.This).(*trackedVM)
		switch {
		case method.Name != "QueryChangedDiskAreas":
			if wrapped {
				ctx.Session.Registry.Remove(ctx, method.This)
			}
		case !wrapped:
			if vm, ok := ctx.Map.Get(method.This).(*simulator.VirtualMachine); ok {
				ctx.Session.Registry.Put(&trackedVM{VirtualMachine: vm, ct: ct})
			}
		}
		return nil, nil
	}
	return ct
}

// SetPageAreas sets how many areas one answer lists at most (0: the default).
func (ct *ChangeTracking) SetPageAreas(n int) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if n <= 0 {
		n = DefaultPageAreas
	}
	ct.pageAreas = n
}

// Fail makes every query about a VM answer with fault; nil removes it.
func (ct *ChangeTracking) Fail(vm types.ManagedObjectReference, fault types.BaseMethodFault) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if fault == nil {
		delete(ct.faults, vm.Value)
		return
	}
	ct.faults[vm.Value] = fault
}

// Underreport makes the answers about a VM leave out every second area,
// as a map that covers less than the disk uses would: a client must not
// trust it.
func (ct *ChangeTracking) Underreport(vm types.ManagedObjectReference, on bool) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	ct.sparse[vm.Value] = on
}

// Tamper passes every answer about a VM through rewrite before it is
// sent, as a faulty or hostile vCenter, ESXi host or proxy could change
// it: a client must refuse what does not describe the disk. nil stops.
func (ct *ChangeTracking) Tamper(vm types.ManagedObjectReference, rewrite func(*types.DiskChangeInfo)) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if rewrite == nil {
		delete(ct.tampered, vm.Value)
		return
	}
	ct.tampered[vm.Value] = rewrite
}

// Calls is how many queries were answered (with areas or a fault).
func (ct *ChangeTracking) Calls() int {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	return ct.calls
}

// Enable turns change tracking on or off for a VM, as a reconfiguration
// with changeTrackingEnabled does, and, as ESXi does once tracking is
// active, gives each of its disks a change ID (and takes them away when
// off).
func (ct *ChangeTracking) Enable(vm types.ManagedObjectReference, on bool) error {
	return ct.withVM(vm, func(v *simulator.VirtualMachine) error {
		v.Config.ChangeTrackingEnabled = types.NewBool(on)
		for _, d := range object.VirtualDeviceList(v.Config.Hardware.Device).SelectByType((*types.VirtualDisk)(nil)) {
			disk := d.(*types.VirtualDisk)
			b, ok := disk.Backing.(*types.VirtualDiskFlatVer2BackingInfo)
			if !ok {
				continue
			}
			b.ChangeId = ""
			if on {
				b.ChangeId = changeID(vm.Value, disk.Key)
			}
		}
		return nil
	})
}

// changeID is a change ID in ESXi's form: a UUID, "/", a sequence number.
func changeID(vm string, key int32) string {
	return fmt.Sprintf("52 %02x 9c 1e 5d 0a 44 7b-8e %02x %02x 11 3c 6f 20 %02x/1", len(vm), byte(key>>8), byte(key), len(vm)*int(key)%251)
}

// RefreshUsage records, for each disk of a VM, its flat extents' space
// in use on the datastore as the size of their layoutEx entries (what
// ESXi reports for a thin disk): the allocated bytes, not the file's
// length. Call it once the extents hold their content.
func (ct *ChangeTracking) RefreshUsage(vm types.ManagedObjectReference) error {
	return ct.withVM(vm, func(v *simulator.VirtualMachine) error {
		if v.LayoutEx == nil {
			return nil
		}
		for i := range v.LayoutEx.File {
			f := &v.LayoutEx.File[i]
			if f.Type != string(types.VirtualMachineFileLayoutExFileTypeDiskExtent) {
				continue
			}
			local, err := ct.localPath(f.Name)
			if err != nil {
				return err
			}
			var st unix.Stat_t
			if err := unix.Stat(local, &st); errors.Is(err, unix.ENOENT) {
				continue // an empty disk (DiskSpec.Empty) has no extent
			} else if err != nil {
				return fmt.Errorf("disk extent %s: %w", f.Name, err)
			}
			f.Size, f.UniqueSize = st.Blocks*512, st.Blocks*512
		}
		return nil
	})
}

// withVM runs fn on a VM of the simulator under its lock.
func (ct *ChangeTracking) withVM(ref types.ManagedObjectReference, fn func(*simulator.VirtualMachine) error) error {
	reg := ct.model.Map()
	vm, ok := reg.Get(ref).(*simulator.VirtualMachine)
	if !ok {
		return fmt.Errorf("no virtual machine %s in the simulator", ref.Value)
	}
	var err error
	reg.WithLock(ct.model.Service.Context, vm, func() { err = fn(vm) })
	return err
}

// localPath is the file behind a datastore path of the simulator.
func (ct *ChangeTracking) localPath(name string) (string, error) {
	var p object.DatastorePath
	if !p.FromString(name) {
		return "", fmt.Errorf("%q is not a datastore path", name)
	}
	for _, e := range ct.model.Map().All("Datastore") {
		if ds := e.(*simulator.Datastore); ds.Name == p.Datastore {
			return filepath.Join(ds.Summary.Url, filepath.FromSlash(p.Path)), nil
		}
	}
	return "", fmt.Errorf("no datastore %s in the simulator", p.Datastore)
}

// trackedVM is a VM of the simulator with QueryChangedDiskAreas: the
// registry's handler hands it out for that method alone.
type trackedVM struct {
	*simulator.VirtualMachine
	ct *ChangeTracking
}

// QueryChangedDiskAreas answers one query (the simulator holds the VM's lock).
func (vm *trackedVM) QueryChangedDiskAreas(req *types.QueryChangedDiskAreas) soap.HasFault {
	body := &methods.QueryChangedDiskAreasBody{}
	info, msg, fault := vm.ct.answer(vm.VirtualMachine, req)
	if fault != nil {
		body.Fault_ = simulator.Fault(msg, fault)
		return body
	}
	body.Res = &types.QueryChangedDiskAreasResponse{Returnval: *info}
	return body
}

// answer computes the answer to a query, or its fault and message.
func (ct *ChangeTracking) answer(vm *simulator.VirtualMachine, req *types.QueryChangedDiskAreas) (*types.DiskChangeInfo, string, types.BaseMethodFault) {
	ct.mu.Lock()
	ct.calls++
	forced, pageAreas, sparse, rewrite := ct.faults[vm.Self.Value], ct.pageAreas, ct.sparse[vm.Self.Value], ct.tampered[vm.Self.Value]
	ct.mu.Unlock()
	if forced != nil {
		return nil, "injected fault", forced
	}
	disk, backing := findDisk(vm, req.DeviceKey)
	switch {
	case disk == nil:
		return nil, fmt.Sprintf("the virtual machine has no disk with key %d", req.DeviceKey), &types.InvalidArgument{InvalidProperty: "deviceKey"}
	case vm.Config.ChangeTrackingEnabled == nil || !*vm.Config.ChangeTrackingEnabled:
		return nil, "change tracking is not enabled on the virtual machine", &types.FileFault{File: backing.FileName}
	case req.Snapshot == nil && vm.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOff:
		return nil, "changes against the current state need a powered-off virtual machine",
			&types.InvalidPowerState{RequestedState: types.VirtualMachinePowerStatePoweredOff, ExistingState: vm.Runtime.PowerState}
	case req.StartOffset < 0 || req.StartOffset >= disk.CapacityInBytes:
		return nil, fmt.Sprintf("start offset %d is outside the disk (%d bytes)", req.StartOffset, disk.CapacityInBytes), &types.InvalidArgument{InvalidProperty: "startOffset"}
	case req.ChangeId != "*" && (req.ChangeId == "" || req.ChangeId != backing.ChangeId):
		return nil, fmt.Sprintf("change ID %q is not valid for the disk", req.ChangeId), &types.InvalidArgument{InvalidProperty: "changeId"}
	}
	info := &types.DiskChangeInfo{StartOffset: req.StartOffset, Length: disk.CapacityInBytes - req.StartOffset}
	if req.ChangeId != "*" {
		return info, "", nil // no change since the disk's current change ID
	}
	areas, err := ct.allocated(backing, disk.CapacityInBytes)
	if err != nil {
		return nil, err.Error(), &types.FileFault{File: backing.FileName}
	}
	page(info, areas, pageAreas, sparse)
	if rewrite != nil {
		rewrite(info)
	}
	return info, "", nil
}

// findDisk is the VM's disk with the key, and its flat backing.
func findDisk(vm *simulator.VirtualMachine, key int32) (*types.VirtualDisk, *types.VirtualDiskFlatVer2BackingInfo) {
	for _, d := range object.VirtualDeviceList(vm.Config.Hardware.Device).SelectByType((*types.VirtualDisk)(nil)) {
		disk := d.(*types.VirtualDisk)
		if b, ok := disk.Backing.(*types.VirtualDiskFlatVer2BackingInfo); ok && disk.Key == key {
			return disk, b
		}
	}
	return nil, nil
}

// page fills an answer from startOffset on: at most pageAreas areas, the
// answer's span ending after the last of them when more remain, at the
// disk's end otherwise. sparse leaves every second area out.
func page(info *types.DiskChangeInfo, areas []types.DiskChangeExtent, pageAreas int, sparse bool) {
	from, end := info.StartOffset, info.StartOffset+info.Length
	for i, a := range areas {
		if a.Start+a.Length <= from {
			continue
		}
		if len(info.ChangedArea) == pageAreas {
			info.Length = info.ChangedArea[len(info.ChangedArea)-1].Start + info.ChangedArea[len(info.ChangedArea)-1].Length - from
			return
		}
		if a.Start < from {
			a.Length -= from - a.Start
			a.Start = from
		}
		if sparse && i%2 == 1 {
			continue
		}
		info.ChangedArea = append(info.ChangedArea, types.DiskChangeExtent{Start: a.Start, Length: min(a.Length, end-a.Start)})
	}
}

// allocated reads a disk's descriptor on the datastore and lists the
// areas of the image its flat extents hold data in, rounded out to
// ChangeGranule and merged.
func (ct *ChangeTracking) allocated(backing *types.VirtualDiskFlatVer2BackingInfo, capacity int64) ([]types.DiskChangeExtent, error) {
	desc, err := ct.localPath(backing.FileName)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(desc)
	if err != nil {
		return nil, fmt.Errorf("reading the descriptor of %s: %w", backing.FileName, err)
	}
	d, err := transfer.ParseDescriptor(data)
	if err != nil {
		return nil, fmt.Errorf("descriptor %s: %w", backing.FileName, err)
	}
	var areas []types.DiskChangeExtent
	var base int64
	for _, e := range d.Extents {
		length := e.Sectors * SectorSize
		runs, err := dataRuns(filepath.Join(filepath.Dir(desc), path.Base(e.File)), e.OffsetSectors*SectorSize, length)
		if err != nil {
			return nil, err
		}
		for _, r := range runs {
			areas = addArea(areas, base+r[0], base+r[1], min(capacity, base+length))
		}
		base += length
	}
	return areas, nil
}

// addArea appends [start, end) rounded out to ChangeGranule (within
// limit), merging it with the last area when they touch.
func addArea(areas []types.DiskChangeExtent, start, end, limit int64) []types.DiskChangeExtent {
	start = start / ChangeGranule * ChangeGranule
	end = min((end+ChangeGranule-1)/ChangeGranule*ChangeGranule, limit)
	if n := len(areas); n > 0 && areas[n-1].Start+areas[n-1].Length >= start {
		areas[n-1].Length = max(areas[n-1].Length, end-areas[n-1].Start)
		return areas
	}
	return append(areas, types.DiskChangeExtent{Start: start, Length: end - start})
}

// dataRuns lists the runs of data of a file in [off, off+length), as
// offsets relative to off: SEEK_DATA and SEEK_HOLE.
func dataRuns(file string, off, length int64) ([][2]int64, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("opening disk extent: %w", err)
	}
	defer f.Close()
	fd := int(f.Fd())
	var runs [][2]int64
	for at, end := off, off+length; at < end; {
		data, err := unix.Seek(fd, at, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) || (err == nil && data >= end) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("mapping %s: %w", file, err)
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			return nil, fmt.Errorf("mapping %s: %w", file, err)
		}
		hole = min(hole, end)
		runs = append(runs, [2]int64{data - off, hole - off})
		at = hole
	}
	return runs, nil
}
