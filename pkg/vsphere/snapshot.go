package vsphere

import (
	"context"
	"fmt"
	"sort"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
	"k8s.io/klog/v2"
)

const kindSnapshot = "snapshot"

// FindSnapshot returns the VM's snapshot with the given name. None fails
// with a *NotFoundError, several with an *AmbiguousError. It never changes
// anything.
func FindSnapshot(ctx context.Context, vm *object.VirtualMachine, name string) (types.ManagedObjectReference, error) {
	var m mo.VirtualMachine
	if err := property.DefaultCollector(vm.Client()).RetrieveOne(ctx, vm.Reference(), []string{"snapshot"}, &m); err != nil {
		return types.ManagedObjectReference{}, fmt.Errorf("reading snapshots of virtual machine %s: %w", vm.Reference().Value, err)
	}
	var found []types.VirtualMachineSnapshotTree
	if m.Snapshot != nil {
		var walk func([]types.VirtualMachineSnapshotTree)
		walk = func(trees []types.VirtualMachineSnapshotTree) {
			for _, t := range trees {
				if t.Name == name {
					found = append(found, t)
				}
				walk(t.ChildSnapshotList)
			}
		}
		walk(m.Snapshot.RootSnapshotList)
	}
	key := fmt.Sprintf("name %q on virtual machine %s", name, vm.Reference().Value)
	switch len(found) {
	case 0:
		return types.ManagedObjectReference{}, &NotFoundError{Kind: kindSnapshot, Key: key}
	case 1:
		return found[0].Snapshot, nil
	}
	candidates := make([]string, 0, len(found))
	for _, t := range found {
		candidates = append(candidates, t.Snapshot.Value)
	}
	sort.Strings(candidates)
	return types.ManagedObjectReference{}, &AmbiguousError{Kind: kindSnapshot, Key: key, Candidates: candidates}
}

// CreateSnapshot makes a snapshot of the VM's disks (no memory, no
// quiescing) with a name the caller chose deterministically, and waits for
// it. A snapshot with that name already there is returned as is, so calling
// again after a crash leaves one snapshot.
func CreateSnapshot(ctx context.Context, vm *object.VirtualMachine, name string) (types.ManagedObjectReference, error) {
	ref, err := FindSnapshot(ctx, vm, name)
	if err == nil {
		return ref, nil
	}
	if Classify(err) != ClassNotFound {
		return types.ManagedObjectReference{}, fmt.Errorf("creating snapshot %q: %w", name, err)
	}
	klog.FromContext(ctx).V(2).Info("Creating snapshot", "vm", vm.Reference().Value, "snapshot", name)
	task, err := vm.CreateSnapshot(ctx, name, "created by the vm-migration controller", false, false)
	if err != nil {
		return types.ManagedObjectReference{}, fmt.Errorf("creating snapshot %q of virtual machine %s: %w", name, vm.Reference().Value, err)
	}
	info, err := task.WaitForResult(ctx, nil)
	if err != nil {
		return types.ManagedObjectReference{}, fmt.Errorf("creating snapshot %q of virtual machine %s: %w", name, vm.Reference().Value, err)
	}
	if r, ok := info.Result.(types.ManagedObjectReference); ok {
		return r, nil
	}
	// The task answered without a reference: look it up.
	return FindSnapshot(ctx, vm, name)
}

// RemoveSnapshot deletes the VM's snapshot with the given name, keeping its
// children and consolidating its data into the disks, and waits for it. A
// snapshot already gone is success, so calling again leaves none.
func RemoveSnapshot(ctx context.Context, vm *object.VirtualMachine, name string) error {
	ref, err := FindSnapshot(ctx, vm, name)
	if Classify(err) == ClassNotFound {
		return nil
	}
	if err != nil {
		return fmt.Errorf("removing snapshot %q: %w", name, err)
	}
	klog.FromContext(ctx).V(2).Info("Removing snapshot", "vm", vm.Reference().Value, "snapshot", name, "moRef", ref.Value)
	res, err := methods.RemoveSnapshot_Task(ctx, vm.Client(), &types.RemoveSnapshot_Task{
		This: ref, RemoveChildren: false, Consolidate: types.NewBool(true),
	})
	if err == nil {
		err = object.NewTask(vm.Client(), res.Returnval).Wait(ctx)
	}
	if err != nil {
		if Classify(err) == ClassNotFound {
			return nil // removed meanwhile
		}
		return fmt.Errorf("removing snapshot %q (%s) of virtual machine %s: %w", name, ref.Value, vm.Reference().Value, err)
	}
	return nil
}
