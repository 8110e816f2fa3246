package vsphere

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// stubbornGuestVM accepts ShutdownGuest and ignores it, like a guest that
// hangs in its shutdown scripts.
type stubbornGuestVM struct {
	*simulator.VirtualMachine
}

func (vm *stubbornGuestVM) ShutdownGuest(ctx *simulator.Context, req *types.ShutdownGuest) soap.HasFault {
	return &methods.ShutdownGuestBody{Res: new(types.ShutdownGuestResponse)}
}

// failingPowerOffVM answers PowerOffVM_Task with a task that fails.
type failingPowerOffVM struct {
	*simulator.VirtualMachine
	fault types.BaseMethodFault
}

func (vm *failingPowerOffVM) PowerOffVMTask(ctx *simulator.Context, req *types.PowerOffVM_Task) soap.HasFault {
	task := simulator.CreateTask(req.This, "powerOff", func(*simulator.Task) (types.AnyType, types.BaseMethodFault) {
		return nil, vm.fault
	})
	return &methods.PowerOffVM_TaskBody{Res: &types.PowerOffVM_TaskResponse{Returnval: task.Run(ctx)}}
}

// poweredOnVM returns a running VM with tools running, and its simulator
// object.
func poweredOnVM(t *testing.T, env *simEnv, s *Session) (*object.VirtualMachine, *simulator.VirtualMachine) {
	t.Helper()
	ref := firstVM(t, s).ref
	sim := env.model.Map().Get(ref).(*simulator.VirtualMachine)
	vm := object.NewVirtualMachine(s.Client(), ref)
	require.NoError(t, PowerOn(testCtx(t), vm))
	sim.Guest.ToolsRunningStatus = string(types.VirtualMachineToolsRunningStatusGuestToolsRunning)
	return vm, sim
}

func TestPowerGracefulShutdownAndRestore(t *testing.T) {
	for _, kind := range bothModels {
		t.Run(string(kind), func(t *testing.T) {
			env := newSim(t, kind, nil)
			s := env.connect(t)
			ctx := testCtx(t)
			vm, _ := poweredOnVM(t, env, s)

			obs, err := ObservePower(ctx, vm)
			require.NoError(t, err)
			assert.Equal(t, PowerObservation{State: types.VirtualMachinePowerStatePoweredOn, ToolsRunning: true}, obs)

			require.NoError(t, ShutdownGuest(ctx, vm))
			require.NoError(t, WaitForPowerState(ctx, vm, types.VirtualMachinePowerStatePoweredOff, 50*time.Millisecond))
			require.NoError(t, ShutdownGuest(ctx, vm), "a second shutdown of an off VM is success")
			require.NoError(t, PowerOff(ctx, vm), "powering off an off VM is success")

			// Restore.
			require.NoError(t, PowerOn(ctx, vm))
			state, err := PowerState(ctx, vm)
			require.NoError(t, err)
			assert.Equal(t, types.VirtualMachinePowerStatePoweredOn, state)
			require.NoError(t, PowerOn(ctx, vm), "powering on a running VM is success")
		})
	}
}

func TestPowerForcedOffAfterTimeout(t *testing.T) {
	for _, kind := range bothModels {
		t.Run(string(kind), func(t *testing.T) {
			env := newSim(t, kind, nil)
			s := env.connect(t)
			ctx := testCtx(t)
			vm, sim := poweredOnVM(t, env, s)
			env.model.Map().Put(&stubbornGuestVM{sim})

			require.NoError(t, ShutdownGuest(ctx, vm))
			waitCtx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			err := WaitForPowerState(waitCtx, vm, types.VirtualMachinePowerStatePoweredOff, 50*time.Millisecond)
			require.Error(t, err, "the guest ignores the shutdown")
			assert.Equal(t, ClassTransient, Classify(err))
			assert.Contains(t, err.Error(), "it was poweredOn")

			require.NoError(t, PowerOff(ctx, vm))
			state, err := PowerState(ctx, vm)
			require.NoError(t, err)
			assert.Equal(t, types.VirtualMachinePowerStatePoweredOff, state)
		})
	}
}

func TestShutdownGuestWithoutTools(t *testing.T) {
	env := newSim(t, vpx, nil)
	s := env.connect(t)
	vm, sim := poweredOnVM(t, env, s)
	sim.Guest.ToolsRunningStatus = string(types.VirtualMachineToolsRunningStatusGuestToolsNotRunning)
	err := ShutdownGuest(testCtx(t), vm)
	require.ErrorIs(t, err, ErrToolsNotRunning)
	assert.Equal(t, ClassInvalidState, Classify(err))

	// Real vCenter answers ToolsUnavailable when tools stop between the
	// observation and the call: inject it.
	sim.Guest.ToolsRunningStatus = string(types.VirtualMachineToolsRunningStatusGuestToolsRunning)
	env.model.Service.AddFaultRule(&simulator.FaultInjectionRule{
		MethodName: "ShutdownGuest", ObjectType: "VirtualMachine", ObjectName: "*",
		Probability: 1, FaultType: simulator.FaultTypeCustom, Fault: &types.ToolsUnavailable{}, MaxCount: 1, Enabled: true,
	})
	err = ShutdownGuest(testCtx(t), vm)
	require.Error(t, err)
	assert.Equal(t, ClassInvalidState, Classify(err), err.Error())
}

func TestPowerOffRaceIsSuccess(t *testing.T) {
	env := newSim(t, esx, nil)
	s := env.connect(t)
	vm, _ := poweredOnVM(t, env, s)
	// Observed on, but another actor powers it off first: the server
	// answers InvalidPowerState with existing state poweredOff.
	env.model.Service.AddFaultRule(&simulator.FaultInjectionRule{
		MethodName: "PowerOffVM_Task", ObjectType: "VirtualMachine", ObjectName: "*", Probability: 1,
		FaultType: simulator.FaultTypeCustom, MaxCount: 1, Enabled: true,
		Fault: &types.InvalidPowerState{RequestedState: types.VirtualMachinePowerStatePoweredOn, ExistingState: types.VirtualMachinePowerStatePoweredOff},
	})
	require.NoError(t, PowerOff(testCtx(t), vm))
}

func TestPowerOffTaskFailureIsClassified(t *testing.T) {
	tests := map[string]struct {
		fault types.BaseMethodFault
		want  Class
	}{
		"task in progress":  {&types.TaskInProgress{}, ClassTransient},
		"no permission":     {&types.NoPermission{PrivilegeId: "VirtualMachine.Interact.PowerOff"}, ClassPermission},
		"invalid state":     {&types.InvalidState{}, ClassInvalidState},
		"generic vm config": {&types.GenericVmConfigFault{Reason: "disk locked"}, ClassPermanent},
	}
	for _, kind := range bothModels {
		t.Run(string(kind), func(t *testing.T) {
			env := newSim(t, kind, nil)
			s := env.connect(t)
			vm, sim := poweredOnVM(t, env, s)
			for name, tc := range tests {
				t.Run(name, func(t *testing.T) {
					env.model.Map().Put(&failingPowerOffVM{VirtualMachine: sim, fault: tc.fault})
					defer env.model.Map().Put(sim)
					err := PowerOff(testCtx(t), vm)
					require.Error(t, err)
					assert.Equal(t, tc.want, Classify(err), err.Error())
					assert.Contains(t, err.Error(), "powering off virtual machine "+vm.Reference().Value)
				})
			}
		})
	}
}

func TestSnapshotsIdempotent(t *testing.T) {
	for _, kind := range bothModels {
		t.Run(string(kind), func(t *testing.T) {
			env := newSim(t, kind, nil)
			s := env.connect(t)
			ctx := testCtx(t)
			vm := object.NewVirtualMachine(s.Client(), firstVM(t, s).ref)
			const name = "vm-migration-1234"

			_, err := FindSnapshot(ctx, vm, name)
			assert.Equal(t, ClassNotFound, Classify(err))

			first, err := CreateSnapshot(ctx, vm, name)
			require.NoError(t, err)
			second, err := CreateSnapshot(ctx, vm, name)
			require.NoError(t, err)
			assert.Equal(t, first, second, "a second create returns the same snapshot")
			found, err := FindSnapshot(ctx, vm, name)
			require.NoError(t, err)
			assert.Equal(t, first, found)
			inv, err := Inventory(ctx, s, vm)
			require.NoError(t, err)
			assert.Equal(t, []string{name}, inv.Snapshots, "exactly one snapshot")

			require.NoError(t, RemoveSnapshot(ctx, vm, name))
			require.NoError(t, RemoveSnapshot(ctx, vm, name), "a second remove is success")
			inv, err = Inventory(ctx, s, vm)
			require.NoError(t, err)
			assert.Empty(t, inv.Snapshots)
		})
	}
}

func TestSnapshotAmbiguous(t *testing.T) {
	env := newSim(t, vpx, nil)
	s := env.connect(t)
	ctx := testCtx(t)
	vm := object.NewVirtualMachine(s.Client(), firstVM(t, s).ref)
	for range 2 {
		task, err := vm.CreateSnapshot(ctx, "dup", "", false, false)
		require.NoError(t, err)
		require.NoError(t, task.Wait(ctx))
	}
	_, err := CreateSnapshot(ctx, vm, "dup")
	require.Error(t, err)
	assert.Equal(t, ClassPermanent, Classify(err))
	assert.Contains(t, err.Error(), "ambiguous")
}
