package statemachine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/test/builders"
)

func powerOffTasks(tasks ...TaskObservation) obsOpt {
	return func(o *Observation) { o.Source.PowerOffTasks = tasks }
}

// TestRestoreWaitsUntilTheStopCanNoLongerLand: a restore is not done while
// a stop the controller issued may still power the source off: a
// power-off task that has not ended, or a guest shutdown under way
// (VMware Tools stopped on a powered-on VM), whatever the time; past the
// shutdown timeout the wait says what a person can do. A shutdown the
// guest abandoned (Tools running on the powered-on VM after the timeout)
// and a power-off task that ended no longer hold the restore.
func TestRestoreWaitsUntilTheStopCanNoLongerLand(t *testing.T) {
	poweringOff := builders.WithSourceControl(func(sc *v1alpha1.SourceControlStatus) {
		*sc = v1alpha1.SourceControlStatus{OriginalPowerState: PowerStateOn, PowerOffRequestedAt: builders.TP(-time.Minute)}
	})
	shuttingDown := builders.WithSourceControl(func(sc *v1alpha1.SourceControlStatus) {
		*sc = v1alpha1.SourceControlStatus{OriginalPowerState: PowerStateOn, ShutdownRequestedAt: builders.TP(-6 * time.Minute)}
	})
	cancelling := func(mods ...builders.MigrationMod) *v1alpha1.VirtualMachineMigration {
		return newMigration(append([]builders.MigrationMod{builders.Reached(v1alpha1.PhaseStoppingSource), builders.Deleted,
			builders.InPhase(v1alpha1.PhaseCancelling)}, mods...)...)
	}
	queued := TaskObservation{Ref: "task-7", State: TaskQueued}
	notRestored := func(t *testing.T, d Decision) {
		assert.Nil(t, d.Status.SourceControl.RestoredAt, "restored while the stop may still land")
		assert.Nil(t, d.Status.SourceControl.RestoreRequestedAt, "power-on requested while the stop may still land")
	}
	personWaits := func(t *testing.T, d Decision) {
		notRestored(t, d)
		c := wantCond(t, d, ConditionProgressing, metav1.ConditionFalse, ReasonSourceStopPending)
		assert.Contains(t, c.Message, "in vSphere", "the condition says what a person can do")
	}
	runCases(t, map[string]decideCase{
		"on, its power-off task queued: wait, the task recorded": {
			m: cancelling(poweringOff), obs: newObs(sourceOn(true), powerOffTasks(queued)),
			phase: v1alpha1.PhaseCancelling, action: ActionNone,
			check: func(t *testing.T, d Decision) {
				notRestored(t, d)
				assert.Equal(t, "task-7", d.Status.SourceControl.PowerOffTask, "the task is recorded")
				c := wantCond(t, d, ConditionProgressing, metav1.ConditionTrue, ReasonWorking)
				assert.Contains(t, c.Message, "power-off task task-7 is queued")
			},
		},
		"on, its power-off task queued past the shutdown timeout: a person may have to act": {
			m: cancelling(poweringOff), obs: newObs(sourceOn(true), powerOffTasks(queued)), now: 5 * time.Minute,
			phase: v1alpha1.PhaseCancelling, action: ActionNone, check: personWaits,
		},
		"off, its power-off task still running: do not power on yet": {
			m: cancelling(poweringOff), obs: newObs(sourceOff, powerOffTasks(TaskObservation{Ref: "task-7", State: TaskRunning})),
			phase: v1alpha1.PhaseCancelling, action: ActionNone, check: notRestored,
		},
		"off, its power-off task ended: power on": {
			m: cancelling(poweringOff), obs: newObs(sourceOff, powerOffTasks(TaskObservation{Ref: "task-7", State: TaskSucceeded}), liveVMI(nil)),
			phase: v1alpha1.PhaseCancelling, action: ActionPowerOnSource,
		},
		"on, its power-off task failed long ago: restored": {
			m: cancelling(poweringOff), obs: newObs(sourceOn(true), powerOffTasks(TaskObservation{Ref: "task-7", State: TaskFailed})),
			phase: v1alpha1.PhaseCancelling,
			check: func(t *testing.T, d Decision) { wantTime(t, "restoredAt", d.Status.SourceControl.RestoredAt, 0) },
		},
		"on, VMware Tools stopped past the shutdown timeout: the guest is still shutting down": {
			m: cancelling(shuttingDown), obs: newObs(sourceOn(false)),
			phase: v1alpha1.PhaseCancelling, action: ActionNone, check: personWaits,
		},
		"on, VMware Tools running past the shutdown timeout: abandoned, restored": {
			m: cancelling(shuttingDown), obs: newObs(sourceOn(true)),
			phase: v1alpha1.PhaseCancelling,
			check: func(t *testing.T, d Decision) { wantTime(t, "restoredAt", d.Status.SourceControl.RestoredAt, 0) },
		},
		"off after the guest shutdown: power on": {
			m: cancelling(shuttingDown), obs: newObs(sourceOff, liveVMI(nil)),
			phase: v1alpha1.PhaseCancelling, action: ActionPowerOnSource,
		},
	})
}

// TestStoppingWatchesThePowerOffTask: while the source is stopped, the
// power-off task is waited for (not asked for again); a failed one is
// asked for again (transient) or fails the migration (permanent).
func TestStoppingWatchesThePowerOffTask(t *testing.T) {
	stopping := newMigration(builders.Reached(v1alpha1.PhaseStoppingSource), builders.InPhase(v1alpha1.PhaseStoppingSource),
		builders.PowerOffMode, builders.WithSourceControl(func(sc *v1alpha1.SourceControlStatus) {
			*sc = v1alpha1.SourceControlStatus{OriginalPowerState: PowerStateOn, PowerOffRequestedAt: builders.TP(-time.Minute), PowerOffTask: "task-7"}
		}))
	failed := func(class ErrorClass) obsOpt {
		return powerOffTasks(TaskObservation{Ref: "task-7", State: TaskFailed, Error: &ObservedError{Class: class, Reason: "SourceError", Message: "it broke"}})
	}
	runCases(t, map[string]decideCase{
		"the task queued: wait for it": {
			m: stopping, obs: newObs(sourceOn(false), powerOffTasks(TaskObservation{Ref: "task-7", State: TaskQueued})),
			phase: v1alpha1.PhaseStoppingSource, action: ActionNone, requeue: DefaultPollInterval,
		},
		"the task queued past the retry deadline: fail, the rollback waits for it": {
			m: stopping, obs: newObs(sourceOn(false), powerOffTasks(TaskObservation{Ref: "task-7", State: TaskQueued})), now: 24 * time.Hour,
			phase: v1alpha1.PhaseRollingBack,
			check: func(t *testing.T, d Decision) {
				wantLastError(t, d, v1alpha1.PhaseStoppingSource, ReasonSourceStopPending)
			},
		},
		"the task failed for now: ask again, say why": {
			m: stopping, obs: newObs(sourceOn(false), failed(ErrorTransient)),
			phase: v1alpha1.PhaseStoppingSource, action: ActionPowerOffSource,
			check: func(t *testing.T, d Decision) {
				wantLastError(t, d, v1alpha1.PhaseStoppingSource, "SourceError")
				assert.Empty(t, d.Status.SourceControl.PowerOffTask, "a new request forgets the old task")
				wantTime(t, "powerOffRequestedAt", d.Status.SourceControl.PowerOffRequestedAt, 0)
			},
		},
		"the task failed for good: fail": {
			m: stopping, obs: newObs(sourceOn(false), failed(ErrorPermanent)),
			phase: v1alpha1.PhaseRollingBack,
		},
		"the task ran: off, go on": {
			m: stopping, obs: newObs(sourceOff, powerOffTasks(TaskObservation{Ref: "task-7", State: TaskSucceeded})),
			phase: v1alpha1.PhaseTransferringDisks,
		},
	})
}
