package transfer

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"platform.example/vm-migration/pkg/transfer/wire"
	"platform.example/vm-migration/pkg/vsphere"
)

// Planner resolves a job spec against vSphere.
type Planner struct {
	// Client is a logged-in vim25 client; its SOAP client carries the
	// session cookie and TLS settings to the datastore HTTP interface.
	Client *vim25.Client
	// DatacenterPath is the datacenter's inventory path without the
	// leading slash, the dcPath of datastore URLs (for example "DC0").
	DatacenterPath string
	// AllowPoweredOn skips the power state check (a person copying a
	// disk of a running VM by hand, knowingly: the copy is not consistent).
	AllowPoweredOn bool
}

// Plan checks that the VM exists and is powered off, that every disk of
// the spec is one of its disks with the same backing file and capacity,
// reads each disk's descriptor and extent sizes, and asks vSphere for its
// allocated areas (readAreas). It fails on the first disk that cannot be
// copied, before anything is written.
func (p *Planner) Plan(ctx context.Context, spec *wire.JobSpec) ([]DiskPlan, error) {
	var vm mo.VirtualMachine
	ref := types.ManagedObjectReference{Type: "VirtualMachine", Value: spec.VMMoRef}
	props := append([]string{"name", "runtime.powerState", "config.hardware.device"}, vmAreaProperties...)
	err := property.DefaultCollector(p.Client).RetrieveOne(ctx, ref, props, &vm)
	if err != nil {
		switch vsphere.Classify(err) {
		case vsphere.ClassNotFound:
			return nil, fmt.Errorf("%w: virtual machine %s not found", ErrInvalidSource, spec.VMMoRef)
		case vsphere.ClassAuth, vsphere.ClassPermission:
			return nil, fmt.Errorf("%w: reading virtual machine %s: %w", ErrNotAuthorized, spec.VMMoRef, err)
		}
		return nil, fmt.Errorf("reading virtual machine %s: %w", spec.VMMoRef, err)
	}
	vm.Self = ref
	if vm.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOff && !p.AllowPoweredOn {
		return nil, fmt.Errorf("%w: virtual machine %s (%s) is %s: power it off first, its disks change while it runs",
			ErrInvalidSource, vm.Name, spec.VMMoRef, vm.Runtime.PowerState)
	}
	var devices object.VirtualDeviceList
	if vm.Config != nil {
		devices = vm.Config.Hardware.Device
	}
	disks := map[int32]*types.VirtualDisk{}
	var keys []string
	for _, d := range devices.SelectByType((*types.VirtualDisk)(nil)) {
		disk := d.(*types.VirtualDisk)
		disks[disk.Key] = disk
		keys = append(keys, fmt.Sprint(disk.Key))
	}
	slices.Sort(keys)
	plans := make([]DiskPlan, 0, len(spec.Disks))
	for _, ds := range spec.Disks {
		disk, ok := disks[ds.Key]
		if !ok {
			return nil, fmt.Errorf("%w: virtual machine %s has no disk with key %d (its disks: %s)", ErrInvalidSource, vm.Name, ds.Key, strings.Join(keys, ", "))
		}
		if err := checkBacking(disk, ds); err != nil {
			return nil, fmt.Errorf("disk %d: %w", ds.Key, err)
		}
		plan, err := p.planDisk(ctx, ds)
		if err != nil {
			return nil, fmt.Errorf("disk %d: %w", ds.Key, err)
		}
		if err := p.readAreas(ctx, spec, &vm, disk, &plan); err != nil {
			return nil, fmt.Errorf("disk %d: %w", ds.Key, err)
		}
		plans = append(plans, plan)
	}
	return plans, nil
}

// checkBacking compares a VM's disk with the spec's entry: backing file,
// capacity, and a backing that is a whole base disk.
func checkBacking(disk *types.VirtualDisk, ds wire.DiskSpec) error {
	var file string
	switch b := disk.Backing.(type) {
	case *types.VirtualDiskFlatVer2BackingInfo:
		if b.Parent != nil {
			return fmt.Errorf("%w (backing %s has parent %s)", ErrSnapshotDelta, b.FileName, b.Parent.FileName)
		}
		file = b.FileName
	case *types.VirtualDiskSeSparseBackingInfo, *types.VirtualDiskSparseVer2BackingInfo, *types.VirtualDiskSparseVer1BackingInfo:
		return fmt.Errorf("%w (backing %T)", ErrSnapshotDelta, b)
	case *types.VirtualDiskRawDiskMappingVer1BackingInfo:
		return fmt.Errorf("%w: raw device mapping %s", ErrUnsupportedDisk, b.FileName)
	default:
		return fmt.Errorf("%w: backing %T", ErrUnsupportedDisk, disk.Backing)
	}
	if file != ds.FileName {
		return fmt.Errorf("%w: backing file is %q, the spec says %q", ErrInvalidSource, file, ds.FileName)
	}
	if disk.CapacityInBytes != ds.CapacityBytes {
		return fmt.Errorf("%w: capacity is %d bytes, the spec says %d", ErrInvalidSource, disk.CapacityInBytes, ds.CapacityBytes)
	}
	return nil
}

// planDisk reads the disk's descriptor and the sizes of its extent files.
func (p *Planner) planDisk(ctx context.Context, ds wire.DiskSpec) (DiskPlan, error) {
	descPath, err := wire.ParseDatastorePath(ds.FileName)
	if err != nil {
		return DiskPlan{}, err
	}
	data, err := p.file(descPath).ReadSmall(ctx, MaxDescriptorSize)
	if err != nil {
		return DiskPlan{}, fmt.Errorf("reading descriptor: %w", err)
	}
	desc, err := ParseDescriptor(data)
	if err != nil {
		return DiskPlan{}, fmt.Errorf("descriptor %s: %w", descPath, err)
	}
	if desc.Size() != ds.CapacityBytes {
		return DiskPlan{}, fmt.Errorf("%w: descriptor %s describes %d bytes, the disk's capacity is %d", ErrInvalidSource, descPath, desc.Size(), ds.CapacityBytes)
	}
	plan := DiskPlan{Spec: ds, Checkpoint: ds.Checkpoint}
	ident := []string{descPath.String(), "cid=" + desc.CID}
	var start int64
	for _, e := range desc.Extents {
		xp, err := descPath.Sibling(e.File)
		if err != nil {
			return DiskPlan{}, fmt.Errorf("descriptor %s: %w", descPath, err)
		}
		f := p.file(xp)
		info, err := f.Stat(ctx)
		if err != nil {
			return DiskPlan{}, fmt.Errorf("extent: %w", err)
		}
		length := e.Sectors * wire.SectorSize
		fileOff := e.OffsetSectors * wire.SectorSize
		if info.Size != fileOff+length {
			return DiskPlan{}, fmt.Errorf("%w: extent %s is %d bytes, the descriptor says %d", ErrBadResponse, xp, info.Size, fileOff+length)
		}
		plan.Extents = append(plan.Extents, ExtentPlan{File: f, Start: start, Length: length, FileOffset: fileOff, FileSize: info.Size})
		ident = append(ident, fmt.Sprintf("%s:%d:%s", xp, info.Size, info.Validator))
		start += length
	}
	plan.Source = strings.Join(ident, "|")
	return plan, nil
}

// file is a datastore file served by the endpoint's /folder interface.
func (p *Planner) file(dp wire.DatastorePath) *DatastoreFile {
	u := object.NewDatastoreURL(*p.Client.URL(), p.DatacenterPath, dp.Datastore, dp.Path)
	return &DatastoreFile{Client: p.Client, URL: u, Name: dp.String()}
}

// KeepAlive touches the session every interval until ctx ends, so a long
// transfer, which makes no SOAP call, does not let it expire. With a
// client that logs in again on NotAuthenticated, an expired session is
// renewed by the first touch after it expired.
func KeepAlive(ctx context.Context, c *vim25.Client, interval time.Duration, logf func(string, ...any)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := Touch(ctx, c); err != nil && ctx.Err() == nil {
				logf("keeping the vSphere session alive: %v", err)
			}
		}
	}
}

// Touch makes one authenticated call (reading the current session).
func Touch(ctx context.Context, c *vim25.Client) error {
	var sm mo.SessionManager
	return property.DefaultCollector(c).RetrieveOne(ctx, *c.ServiceContent.SessionManager, []string{"currentSession"}, &sm)
}
