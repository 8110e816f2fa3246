package vsphere

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/task"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
	"k8s.io/klog/v2"
)

// PowerObservation is a VM's power state and whether its guest can take a
// graceful shutdown.
type PowerObservation struct {
	// State is poweredOn, poweredOff or suspended.
	State types.VirtualMachinePowerState
	// ToolsRunning says VMware Tools run in the guest, so ShutdownGuest
	// can work.
	ToolsRunning bool
}

// ObservePower reads the power state and the tools status in one call.
// It never changes anything.
func ObservePower(ctx context.Context, vm *object.VirtualMachine) (PowerObservation, error) {
	var m mo.VirtualMachine
	err := property.DefaultCollector(vm.Client()).RetrieveOne(ctx, vm.Reference(),
		[]string{"runtime.powerState", "guest.toolsRunningStatus"}, &m)
	if err != nil {
		return PowerObservation{}, fmt.Errorf("reading power state of virtual machine %s: %w", vm.Reference().Value, err)
	}
	obs := PowerObservation{State: m.Runtime.PowerState}
	if m.Guest != nil {
		obs.ToolsRunning = m.Guest.ToolsRunningStatus == string(types.VirtualMachineToolsRunningStatusGuestToolsRunning)
	}
	return obs, nil
}

// PowerState reads the VM's power state. It never changes anything.
func PowerState(ctx context.Context, vm *object.VirtualMachine) (types.VirtualMachinePowerState, error) {
	obs, err := ObservePower(ctx, vm)
	return obs.State, err
}

// ErrToolsNotRunning says a graceful guest shutdown is impossible because
// VMware Tools do not run in the guest. Classify puts it in
// ClassInvalidState: power the VM off instead.
var ErrToolsNotRunning = errors.New("vmware tools are not running in the guest")

// ShutdownGuest asks the guest to shut down through VMware Tools. It does
// not wait: the guest shuts down on its own time, and the caller polls
// PowerState (vSphere sends no events) and calls PowerOff when its timeout
// passes. A VM already powered off is success; a suspended VM or a guest
// without running tools fails with ClassInvalidState.
func ShutdownGuest(ctx context.Context, vm *object.VirtualMachine) error {
	obs, err := ObservePower(ctx, vm)
	if err != nil {
		return err
	}
	ref := vm.Reference().Value
	switch obs.State {
	case types.VirtualMachinePowerStatePoweredOff:
		return nil
	case types.VirtualMachinePowerStateSuspended:
		return fmt.Errorf("shutting down the guest of virtual machine %s: %w", ref,
			soap.WrapVimFault(&types.InvalidPowerState{RequestedState: types.VirtualMachinePowerStatePoweredOn, ExistingState: obs.State}))
	}
	if !obs.ToolsRunning {
		return fmt.Errorf("shutting down the guest of virtual machine %s: %w", ref, ErrToolsNotRunning)
	}
	klog.FromContext(ctx).V(2).Info("Requesting guest shutdown", "vm", ref)
	if err := vm.ShutdownGuest(ctx); err != nil {
		if alreadyInState(err, types.VirtualMachinePowerStatePoweredOff) {
			return nil
		}
		return fmt.Errorf("shutting down the guest of virtual machine %s: %w", ref, err)
	}
	return nil
}

// PowerOff powers the VM off and waits for the task. A VM already powered
// off is success, whether observed before the call or reported by the
// server (InvalidPowerState with existing state poweredOff).
func PowerOff(ctx context.Context, vm *object.VirtualMachine) error {
	return setPower(ctx, vm, types.VirtualMachinePowerStatePoweredOff)
}

// PowerOn powers the VM on and waits for the task, to restore a source VM
// the controller stopped. A VM already powered on is success.
func PowerOn(ctx context.Context, vm *object.VirtualMachine) error {
	return setPower(ctx, vm, types.VirtualMachinePowerStatePoweredOn)
}

func setPower(ctx context.Context, vm *object.VirtualMachine, want types.VirtualMachinePowerState) error {
	ref := vm.Reference().Value
	verb := "powering off"
	if want == types.VirtualMachinePowerStatePoweredOn {
		verb = "powering on"
	}
	state, err := PowerState(ctx, vm)
	if err != nil {
		return err
	}
	if state == want {
		return nil
	}
	klog.FromContext(ctx).V(2).Info("Changing power state", "vm", ref, "from", state, "to", want)
	var task *object.Task
	if want == types.VirtualMachinePowerStatePoweredOn {
		task, err = vm.PowerOn(ctx)
	} else {
		task, err = vm.PowerOff(ctx)
	}
	if err == nil {
		err = task.Wait(ctx)
	}
	if err != nil {
		if alreadyInState(err, want) {
			return nil
		}
		return fmt.Errorf("%s virtual machine %s: %w", verb, ref, err)
	}
	return nil
}

// alreadyInState says err is InvalidPowerState because the VM already is
// in the wanted state.
func alreadyInState(err error, want types.VirtualMachinePowerState) bool {
	if ips, ok := vimFault(err).(*types.InvalidPowerState); ok {
		return ips.ExistingState == want
	}
	return false
}

// WaitForPowerState polls the VM every interval until it reaches want or
// ctx ends. vSphere sends no events the controller could wait on; the
// controller normally requeues instead, and this is for callers that can
// block, such as the transfer command and tests.
func WaitForPowerState(ctx context.Context, vm *object.VirtualMachine, want types.VirtualMachinePowerState, interval time.Duration) error {
	if interval <= 0 {
		interval = time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	var last types.VirtualMachinePowerState = "unknown"
	for {
		state, err := PowerState(ctx, vm)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("waiting for virtual machine %s to be %s (it was %s): %w", vm.Reference().Value, want, last, ctx.Err())
			}
			return err
		}
		last = state
		if state == want {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for virtual machine %s to be %s (it was %s): %w", vm.Reference().Value, want, state, ctx.Err())
		case <-t.C:
		}
	}
}

// StartPowerOff asks vSphere to power the VM off and returns at once with
// the power-off task's reference, without waiting for it: on a busy
// vCenter the task can stay queued for minutes, and whoever restores the
// VM must wait for it to end (PowerOffTasks). A VM already powered off is
// success with no task ("").
func StartPowerOff(ctx context.Context, vm *object.VirtualMachine) (string, error) {
	ref := vm.Reference().Value
	state, err := PowerState(ctx, vm)
	if err != nil {
		return "", err
	}
	if state == types.VirtualMachinePowerStatePoweredOff {
		return "", nil
	}
	task, err := vm.PowerOff(ctx)
	if err != nil {
		if alreadyInState(err, types.VirtualMachinePowerStatePoweredOff) {
			return "", nil
		}
		return "", fmt.Errorf("powering off virtual machine %s: %w", ref, err)
	}
	klog.FromContext(ctx).V(2).Info("Power-off requested", "vm", ref, "task", task.Reference().Value)
	return task.Reference().Value, nil
}

// TaskState is what was seen of a vSphere task.
type TaskState struct {
	// Ref is the task's managed object reference value.
	Ref string
	// State is queued, running, success or error; empty for a task the
	// server no longer knows (it ended long ago).
	State types.TaskInfoState
	// QueuedAt is when the server queued it.
	QueuedAt time.Time
	// Err is the task's failure, when State is error.
	Err error
}

// Ended reports whether the task can no longer change anything.
func (t TaskState) Ended() bool {
	return t.State != types.TaskInfoStateQueued && t.State != types.TaskInfoStateRunning
}

// powerOffTaskID is the description ID of a VM's power-off task.
const powerOffTaskID = "VirtualMachine.powerOff"

// PowerOffTasks lists the VM's power-off tasks the server knows, oldest
// first: those among its recent tasks (vCenter keeps every queued and
// running task there, and ended ones for a while), and the task recorded,
// when it is not among them (it ended; State is empty once the server
// forgot it). It never changes anything.
func PowerOffTasks(ctx context.Context, vm *object.VirtualMachine, recorded string) ([]TaskState, error) {
	pc := property.DefaultCollector(vm.Client())
	var m mo.VirtualMachine
	if err := pc.RetrieveOne(ctx, vm.Reference(), []string{"recentTask"}, &m); err != nil {
		return nil, fmt.Errorf("reading the recent tasks of virtual machine %s: %w", vm.Reference().Value, err)
	}
	var tasks []mo.Task
	if len(m.RecentTask) > 0 {
		if err := pc.Retrieve(ctx, m.RecentTask, []string{"info"}, &tasks); err != nil {
			return nil, fmt.Errorf("reading the recent tasks of virtual machine %s: %w", vm.Reference().Value, err)
		}
	}
	var out []TaskState
	found := recorded == ""
	for _, t := range tasks {
		if t.Info.DescriptionId != powerOffTaskID {
			continue
		}
		out = append(out, taskState(t.Info))
		found = found || t.Info.Key == recorded || t.Self.Value == recorded
	}
	slices.SortStableFunc(out, func(a, b TaskState) int { return a.QueuedAt.Compare(b.QueuedAt) })
	if !found {
		st, err := recordedTask(ctx, pc, recorded)
		if err != nil {
			return nil, err
		}
		out = append([]TaskState{st}, out...)
	}
	return out, nil
}

// recordedTask reads one task by reference; a task the server no longer
// knows ended long ago.
func recordedTask(ctx context.Context, pc *property.Collector, ref string) (TaskState, error) {
	var t mo.Task
	err := pc.RetrieveOne(ctx, types.ManagedObjectReference{Type: "Task", Value: ref}, []string{"info"}, &t)
	if Classify(err) == ClassNotFound {
		return TaskState{Ref: ref}, nil
	}
	if err != nil {
		return TaskState{}, fmt.Errorf("reading task %s: %w", ref, err)
	}
	return taskState(t.Info), nil
}

func taskState(info types.TaskInfo) TaskState {
	st := TaskState{Ref: info.Task.Value, State: info.State, QueuedAt: info.QueueTime}
	if st.Ref == "" {
		st.Ref = info.Key
	}
	if info.State == types.TaskInfoStateError && info.Error != nil {
		st.Err = fmt.Errorf("task %s: %w", st.Ref, task.Error{LocalizedMethodFault: info.Error, Description: info.Description})
	}
	return st
}
