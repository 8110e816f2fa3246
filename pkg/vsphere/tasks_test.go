package vsphere

import (
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

// queuedPowerOffVM answers PowerOffVM_Task with a task vCenter queued and
// has not run (a busy vCenter): registered, never started.
type queuedPowerOffVM struct {
	*simulator.VirtualMachine
}

func (vm *queuedPowerOffVM) PowerOffVMTask(ctx *simulator.Context, req *types.PowerOffVM_Task) soap.HasFault {
	task := simulator.CreateTask(req.This, "powerOff", nil)
	ref := ctx.Map.Put(task).Reference()
	task.Info.Key, task.Info.Task = ref.Value, ref
	return &methods.PowerOffVM_TaskBody{Res: &types.PowerOffVM_TaskResponse{Returnval: ref}}
}

// TestPowerOffTasksFollowATaskToItsEnd: StartPowerOff returns the task it
// started without waiting for it, and PowerOffTasks shows that task queued
// among the VM's recent tasks, then ended; a recorded task the server no
// longer knows shows with no state.
func TestPowerOffTasksFollowATaskToItsEnd(t *testing.T) {
	for _, kind := range bothModels {
		t.Run(string(kind), func(t *testing.T) {
			env := newSim(t, kind, nil)
			s := env.connect(t)
			ctx := testCtx(t)
			vm, sim := poweredOnVM(t, env, s)
			env.model.Map().Put(&queuedPowerOffVM{sim})

			ref, err := StartPowerOff(ctx, vm)
			require.NoError(t, err)
			require.NotEmpty(t, ref, "the task started")
			tasks, err := PowerOffTasks(ctx, vm, ref)
			require.NoError(t, err)
			require.Len(t, tasks, 1, "the VM's power-off tasks: %+v", tasks)
			assert.Equal(t, ref, tasks[0].Ref)
			assert.Equal(t, types.TaskInfoStateQueued, tasks[0].State)
			assert.False(t, tasks[0].Ended(), "a queued task may still run")
			state, err := PowerState(ctx, vm)
			require.NoError(t, err)
			assert.Equal(t, types.VirtualMachinePowerStatePoweredOn, state, "the task has not run")

			task := object.NewTask(s.Client(), types.ManagedObjectReference{Type: "Task", Value: ref})
			require.NoError(t, task.SetState(ctx, types.TaskInfoStateSuccess, nil, nil))
			tasks, err = PowerOffTasks(ctx, vm, ref)
			require.NoError(t, err)
			require.Len(t, tasks, 1)
			assert.Equal(t, types.TaskInfoStateSuccess, tasks[0].State)
			assert.True(t, tasks[0].Ended())

			tasks, err = PowerOffTasks(ctx, vm, "task-404")
			require.NoError(t, err)
			require.Len(t, tasks, 2, "the recorded task, then the recent ones: %+v", tasks)
			assert.Equal(t, TaskState{Ref: "task-404"}, tasks[0], "a task the server forgot ended long ago")
			assert.True(t, tasks[0].Ended())
		})
	}
}

// TestPowerOffTaskFailureIsSeen: a power-off task that fails after
// StartPowerOff returned shows failed, with its fault classified.
func TestPowerOffTaskFailureIsSeen(t *testing.T) {
	env := newSim(t, vpx, nil)
	s := env.connect(t)
	ctx := testCtx(t)
	vm, sim := poweredOnVM(t, env, s)
	env.model.Map().Put(&failingPowerOffVM{VirtualMachine: sim, fault: &types.NoPermission{PrivilegeId: "VirtualMachine.Interact.PowerOff"}})

	ref, err := StartPowerOff(ctx, vm)
	require.NoError(t, err, "the call succeeds; the task fails later")
	require.Eventually(t, func() bool {
		tasks, err := PowerOffTasks(ctx, vm, ref)
		return err == nil && len(tasks) == 1 && tasks[0].Ended()
	}, 10*time.Second, 10*time.Millisecond)
	tasks, err := PowerOffTasks(ctx, vm, ref)
	require.NoError(t, err)
	assert.Equal(t, types.TaskInfoStateError, tasks[0].State)
	require.Error(t, tasks[0].Err)
	assert.Equal(t, ClassPermission, Classify(tasks[0].Err), tasks[0].Err.Error())
}

// TestStartPowerOffOfAnOffVM: nothing to do, no task.
func TestStartPowerOffOfAnOffVM(t *testing.T) {
	env := newSim(t, esx, nil)
	s := env.connect(t)
	ctx := testCtx(t)
	vm, _ := poweredOnVM(t, env, s)
	require.NoError(t, PowerOff(ctx, vm))
	ref, err := StartPowerOff(ctx, vm)
	require.NoError(t, err)
	assert.Empty(t, ref)
}
