package source

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/vsphere"
	"platform.example/vm-migration/test/builders"
)

// A restore must not be declared done while a stop the controller issued
// can still land: these tests drive the state machine with this step
// against vcsim, where the VM's power-off task stays queued (a busy
// vCenter) or its guest takes its time to shut down.

// lateVM is the simulator's VM with power-off tasks that stay queued and
// a guest shutdown that stops VMware Tools and leaves the VM on, until the
// test lets them finish.
type lateVM struct {
	*simulator.VirtualMachine

	mu      sync.Mutex
	hold    bool                           // queue power-off tasks
	queued  []types.ManagedObjectReference // the tasks held
	asked   int                            // guest shutdowns asked
	offCall int                            // power-off calls received
}

func (vm *lateVM) PowerOffVMTask(ctx *simulator.Context, req *types.PowerOffVM_Task) soap.HasFault {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	vm.offCall++
	if !vm.hold {
		return vm.VirtualMachine.PowerOffVMTask(ctx, req)
	}
	// A task vCenter queued and has not run: registered (so that it is
	// among the VM's recent tasks), never started.
	task := simulator.CreateTask(req.This, "powerOff", nil)
	ref := ctx.Map.Put(task).Reference()
	task.Info.Key, task.Info.Task = ref.Value, ref
	vm.queued = append(vm.queued, ref)
	return &methods.PowerOffVM_TaskBody{Res: &types.PowerOffVM_TaskResponse{Returnval: ref}}
}

func (vm *lateVM) ShutdownGuest(ctx *simulator.Context, req *types.ShutdownGuest) soap.HasFault {
	vm.mu.Lock()
	vm.asked++
	vm.mu.Unlock()
	// The guest begins to shut down: VMware Tools stop early, the VM
	// stays on until the guest is done.
	ctx.Update(vm, []types.PropertyChange{{Name: "guest.toolsRunningStatus", Val: string(types.VirtualMachineToolsRunningStatusGuestToolsNotRunning)}})
	return &methods.ShutdownGuestBody{Res: new(types.ShutdownGuestResponse)}
}

// simVM is the simulated source VM of e's migration (DC0_H0_VM0), powered
// on with VMware Tools running, replaced in the simulator by a lateVM.
func simVM(t *testing.T, e *env) (*lateVM, *object.VirtualMachine) {
	t.Helper()
	reg := e.model.Map()
	obj := reg.Any("VirtualMachine").(*simulator.VirtualMachine)
	for _, o := range reg.All("VirtualMachine") {
		if o.Entity().Name == "DC0_H0_VM0" {
			obj = o.(*simulator.VirtualMachine)
		}
	}
	ctx := &simulator.Context{Context: context.Background(), Map: reg}
	ctx.WithLock(obj, func() {
		ctx.Update(obj, []types.PropertyChange{
			{Name: "guest.toolsRunningStatus", Val: string(types.VirtualMachineToolsRunningStatusGuestToolsRunning)},
		})
	})
	late := &lateVM{VirtualMachine: obj}
	reg.Put(late)
	sess, err := vsphere.Connect(context.Background(), vsphere.Endpoint{URL: "https://" + e.server.URL.Host + "/sdk"},
		vsphere.Credentials{Username: user, Password: password, Thumbprint: soap.ThumbprintSHA256(e.server.Certificate())})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sess.Logout(context.Background()) })
	return late, object.NewVirtualMachine(sess.Client(), obj.Self)
}

// setTools sets the VM's VMware Tools running status, as its guest does.
func setTools(e *env, vm *lateVM, running bool) {
	status := types.VirtualMachineToolsRunningStatusGuestToolsNotRunning
	if running {
		status = types.VirtualMachineToolsRunningStatusGuestToolsRunning
	}
	ctx := &simulator.Context{Context: context.Background(), Map: e.model.Map()}
	ctx.WithLock(vm, func() {
		ctx.Update(vm, []types.PropertyChange{{Name: "guest.toolsRunningStatus", Val: string(status)}})
	})
}

// driver decides for the migration with observations this step makes,
// and carries out the decisions' source actions, as the controller does;
// the state machine's clock advances by tick per decision.
type driver struct {
	t    *testing.T
	e    *env
	m    *v1alpha1.VirtualMachineMigration
	now  time.Duration
	tick time.Duration
	log  []string
}

// newDriver prepares e's migration, its spec changed by mods, as
// inventoried and committed to the cutover (StoppingSource, the source
// found on).
func newDriver(t *testing.T, e *env, tick time.Duration, mods ...builders.MigrationMod) *driver {
	t.Helper()
	inv := e.step.Observe(context.Background(), e.m, statemachine.SourceNeedInventory)
	require.Nil(t, inv.Error, "inventory")
	m := e.m.DeepCopy()
	builders.WithFinalizer(m)
	for _, mod := range mods {
		mod(m)
	}
	m.Status = v1alpha1.VirtualMachineMigrationStatus{Phase: v1alpha1.PhaseStoppingSource, StartTime: builders.TP(-time.Minute),
		PhaseStartTime: builders.TP(0), Source: inv.Inventory, AppliedSpec: m.Spec.DeepCopy(),
		SourceControl: &v1alpha1.SourceControlStatus{OriginalPowerState: statemachine.PowerStateOn}}
	return &driver{t: t, e: e, m: m, tick: tick}
}

// step makes one decision and carries out its action.
func (d *driver) step() statemachine.Decision {
	d.t.Helper()
	ctx := context.Background()
	var obs statemachine.Observation
	if need := statemachine.NeedsSource(d.m); need != statemachine.SourceNeedNothing {
		obs.Source = d.e.step.Observe(ctx, d.m, need)
	}
	if statemachine.NeedsLiveTargetInstance(d.m, &obs) {
		// As the controller reads it: there is no cluster here, so the
		// API server has no instance of the target.
		obs.LiveVMI = &statemachine.LiveVMIObservation{}
	}
	in := statemachine.Input{Migration: d.m, Observation: obs, Now: builders.At(d.now)}
	dec := statemachine.Decide(in)
	d.m = d.m.DeepCopy()
	d.m.Status = dec.Status
	if err := d.act(ctx, dec.Action); err != nil {
		e, ok := err.(*statemachine.ObservedError)
		require.True(d.t, ok, "a step's failure comes classified: %v", err)
		in.Migration = d.m
		d.m.Status = statemachine.ActionFailed(in, dec.Action, *e).Status
	}
	d.log = append(d.log, string(dec.Action.Type))
	d.now += d.tick
	return dec
}

func (d *driver) act(ctx context.Context, a statemachine.Action) error {
	switch a.Type {
	case statemachine.ActionShutdownGuest:
		return d.e.step.ShutdownGuest(ctx, d.m)
	case statemachine.ActionPowerOffSource:
		return d.e.step.PowerOff(ctx, d.m)
	case statemachine.ActionPowerOnSource:
		return d.e.step.PowerOn(ctx, d.m)
	case statemachine.ActionRemoveFinalizer:
		d.m.Finalizers = nil
	case statemachine.ActionNone:
	default:
		d.t.Fatalf("the driver does not play %s", a.Type)
	}
	return nil
}

// cancel deletes the migration.
func (d *driver) cancel() { d.m.DeletionTimestamp = builders.TP(d.now) }

// released reports whether the finalizer is gone.
func (d *driver) released() bool { return len(d.m.Finalizers) == 0 }

// untilReleased decides until the finalizer is released, at most n times.
func (d *driver) untilReleased(n int) {
	d.t.Helper()
	for range n {
		if d.released() {
			return
		}
		d.step()
	}
	require.True(d.t, d.released(), "finalizer not released after %d decisions: %v (status %+v)", n, d.log, d.m.Status.SourceControl)
}

func powerState(t *testing.T, vm *object.VirtualMachine) types.VirtualMachinePowerState {
	t.Helper()
	st, err := vm.PowerState(context.Background())
	require.NoError(t, err)
	return st
}

// TestRestoreWaitsForALatePowerOffTask: the power-off the controller asked
// for is queued on a busy vCenter when the migration is cancelled. The
// source, still on, must not count as restored (nor the finalizer go)
// while that task can still run; once it ran (the VM off), the source is
// powered on and the restore ends.
func TestRestoreWaitsForALatePowerOffTask(t *testing.T) {
	e := newEnv(t, credentials(password))
	e.step.CallTimeout = 3 * time.Second
	late, vm := simVM(t, e)
	late.hold = true
	d := newDriver(t, e, 15*time.Second, builders.PowerOffMode)

	dec := d.step()
	require.Equal(t, statemachine.ActionPowerOffSource, dec.Action.Type, "the stop")
	require.Len(t, late.queued, 1, "one power-off task, queued")
	d.cancel()
	for range 12 { // three minutes
		d.step()
		require.False(t, d.released(), "finalizer released while the power-off task is queued: %v", d.log)
		require.Nil(t, d.m.Status.SourceControl.RestoredAt, "restored while the power-off task is queued: %v", d.log)
	}
	assert.Equal(t, types.VirtualMachinePowerStatePoweredOn, powerState(t, vm))
	assert.Equal(t, late.queued[0].Value, d.m.Status.SourceControl.PowerOffTask, "the queued task is recorded")

	// vCenter runs the task at last: the VM goes off.
	late.mu.Lock()
	late.hold = false
	late.mu.Unlock()
	task, err := vm.PowerOff(context.Background())
	require.NoError(t, err)
	require.NoError(t, task.Wait(context.Background()))
	require.NoError(t, object.NewTask(vm.Client(), late.queued[0]).SetState(context.Background(), types.TaskInfoStateSuccess, nil, nil))
	d.untilReleased(10)
	assert.Equal(t, types.VirtualMachinePowerStatePoweredOn, powerState(t, vm), "the source after the restore: %v", d.log)
	assert.Contains(t, d.log, string(statemachine.ActionPowerOnSource), "powered on after the late power-off")
	assert.NotNil(t, d.m.Status.SourceControl.RestoredAt)
}

// TestRestoreWaitsForASlowGuestShutdown: the guest shutdown the controller
// asked for is under way when the migration is cancelled (VMware Tools
// stopped, the VM still on) and lasts past the shutdown timeout. The
// source must not count as restored while the guest can still power it
// off; once it did, the source is powered on and the restore ends.
func TestRestoreWaitsForASlowGuestShutdown(t *testing.T) {
	e := newEnv(t, credentials(password))
	late, vm := simVM(t, e)
	d := newDriver(t, e, time.Minute, builders.ShutdownTimeout(5*time.Minute))

	dec := d.step()
	require.Equal(t, statemachine.ActionShutdownGuest, dec.Action.Type, "the stop")
	require.Equal(t, 1, late.asked)
	d.cancel()
	for range 10 { // ten minutes, twice the shutdown timeout
		d.step()
		require.False(t, d.released(), "finalizer released while the guest is shutting down: %v", d.log)
		require.Nil(t, d.m.Status.SourceControl.RestoredAt, "restored while the guest is shutting down: %v", d.log)
	}
	assert.NotContains(t, d.log, string(statemachine.ActionPowerOnSource))
	assert.Equal(t, 0, late.offCall, "the controller powered the source off itself")

	// The guest is done: it powers the VM off.
	task, err := vm.PowerOff(context.Background())
	require.NoError(t, err)
	require.NoError(t, task.Wait(context.Background()))
	d.untilReleased(10)
	assert.Equal(t, types.VirtualMachinePowerStatePoweredOn, powerState(t, vm), "the source after the restore: %v", d.log)
	assert.Contains(t, d.log, string(statemachine.ActionPowerOnSource), "powered on after the guest's shutdown")
}

// TestRestoreEndsWhenTheGuestAbandonsItsShutdown: the guest shutdown is
// under way when the migration is cancelled, then VMware Tools run again
// on the powered-on VM (the guest abandoned the shutdown, or rebooted):
// the stop can no longer land, the source is on as it was found, and the
// restore ends without powering it off and on.
func TestRestoreEndsWhenTheGuestAbandonsItsShutdown(t *testing.T) {
	e := newEnv(t, credentials(password))
	late, vm := simVM(t, e)
	d := newDriver(t, e, time.Minute, builders.ShutdownTimeout(5*time.Minute))
	require.Equal(t, statemachine.ActionShutdownGuest, d.step().Action.Type, "the stop")
	d.cancel()
	for range 7 {
		d.step()
	}
	require.False(t, d.released(), "finalizer released while the guest is shutting down: %v", d.log)
	setTools(e, late, true)
	d.untilReleased(5)
	assert.Equal(t, types.VirtualMachinePowerStatePoweredOn, powerState(t, vm))
	assert.NotContains(t, d.log, string(statemachine.ActionPowerOnSource), "the source was never off")
	assert.Equal(t, 0, late.offCall)
}
