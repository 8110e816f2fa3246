package statemachine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/test/builders"
)

// startedTarget is what a migration whose target was asked to run has in
// status.
var startedTarget = builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
	s.Target.StartRequestedAt = builders.TP(-2 * time.Minute)
})

// TestSourceStaysOffUntilTheTargetInstanceIsGone: after a rollback or a
// cancellation once the target was started, the target VM is halted, and
// the source is powered on only once the target's VirtualMachineInstance
// is gone (KubeVirt keeps it for its termination grace period, 30 s by
// default, unbounded on an unreachable node): never two copies of the
// machine running with the same MAC addresses. Meanwhile the migration
// says what it waits for.
func TestSourceStaysOffUntilTheTargetInstanceIsGone(t *testing.T) {
	rollingBack := newMigration(builders.Reached(v1alpha1.PhaseRollingBack), startedTarget)
	cancelling := newMigration(builders.Reached(v1alpha1.PhaseCancelling), builders.Deleted, startedTarget)
	halting := newObs(sourceOff, targetVM(true, RunStrategyHalted), targetVMI(VMIRunning, false))
	waits := func(t *testing.T, d Decision) {
		assert.Nil(t, d.Status.SourceControl.RestoreRequestedAt, "power-on requested while the target's instance runs")
		c := wantCond(t, d, ConditionProgressing, metav1.ConditionFalse, "")
		assert.Contains(t, c.Message, "VirtualMachineInstance", "the condition names what it waits for: %+v", c)
	}
	runCases(t, map[string]decideCase{
		"rolling back, the halted target's instance still runs: wait": {
			m: rollingBack, obs: halting, phase: v1alpha1.PhaseRollingBack, action: ActionNone, check: waits,
		},
		"rolling back, the instance gone: power the source on": {
			m: rollingBack, obs: newObs(sourceOff, targetVM(true, RunStrategyHalted), liveVMI(nil)),
			phase: v1alpha1.PhaseRollingBack, action: ActionPowerOnSource,
		},
		"cancelling, the halted target's instance still runs: wait": {
			m: cancelling, obs: halting, phase: v1alpha1.PhaseCancelling, action: ActionNone, check: waits,
		},
		"the instance's node declared lost, the cache and the API server agree: power the source on, and say so": {
			m: rollingBack, obs: newObs(sourceOff, targetVM(true, RunStrategyHalted), func(o *Observation) {
				o.VMI = &VMIObservation{Phase: VMIFailed, Reason: VMINodeLost, NodeName: "worker-3", Deleting: true}
				o.LiveVMI = &LiveVMIObservation{VMI: o.VMI}
			}),
			phase: v1alpha1.PhaseRollingBack, action: ActionPowerOnSource,
			check: func(t *testing.T, d Decision) {
				c := wantCond(t, d, ConditionTargetNodeLost, metav1.ConditionTrue, ReasonTargetNodeLost)
				assert.Contains(t, c.Message, "worker-3")
				assert.Contains(t, eventReasons(d), ReasonTargetNodeLost, "a warning event says the node was lost")
			},
		},
		"the cache's instance failed with its node, not read live yet: wait (KubeVirt may have replaced it) (issue 46)": {
			m: rollingBack, obs: newObs(sourceOff, targetVM(true, RunStrategyHalted), func(o *Observation) {
				o.VMI = &VMIObservation{Phase: VMIFailed, Reason: VMINodeLost, NodeName: "worker-3", Deleting: true}
			}),
			phase: v1alpha1.PhaseRollingBack, action: ActionNone, check: waits,
		},
		"the cache's instance failed with its node, the API server's is a new one, running: wait (issue 46)": {
			m: rollingBack, obs: newObs(sourceOff, targetVM(true, RunStrategyHalted), func(o *Observation) {
				o.VMI = &VMIObservation{Phase: VMIFailed, Reason: VMINodeLost, NodeName: "worker-3", Deleting: true}
				o.LiveVMI = &LiveVMIObservation{VMI: &VMIObservation{Phase: VMIRunning, NodeName: "worker-4"}}
			}),
			phase: v1alpha1.PhaseRollingBack, action: ActionNone, check: waits,
		},
		"a failed instance on a node that answers: still wait": {
			m: rollingBack, obs: newObs(sourceOff, targetVM(true, RunStrategyHalted), func(o *Observation) {
				o.VMI = &VMIObservation{Phase: VMIFailed, NodeName: "worker-3", Deleting: true}
			}),
			phase: v1alpha1.PhaseRollingBack, action: ActionNone, check: waits,
		},
		"the source was off when found: nothing to wait for": {
			m: newMigration(builders.Reached(v1alpha1.PhaseRollingBack), startedTarget,
				builders.WithSourceControl(func(sc *v1alpha1.SourceControlStatus) { sc.OriginalPowerState = PowerStateOff })),
			obs: halting, phase: v1alpha1.PhaseFailed,
		},
		"cancelling, the instance gone: power the source on": {
			m: cancelling, obs: newObs(sourceOff, targetVM(true, RunStrategyHalted), liveVMI(nil)),
			phase: v1alpha1.PhaseCancelling, action: ActionPowerOnSource,
		},
	})
}

// readLive adds to o, as the controller does, the target's instance read
// live from the API server (vmi, nil when there is none) when the
// decision needs it.
func readLive(m *v1alpha1.VirtualMachineMigration, o *Observation, vmi *VMIObservation) {
	if NeedsLiveTargetInstance(m, o) {
		o.LiveVMI = &LiveVMIObservation{VMI: vmi}
	}
}

// liveVMI is the target's instance as the API server answered for it:
// vmi, nil when there is none.
func liveVMI(vmi *VMIObservation) obsOpt {
	return func(o *Observation) { o.LiveVMI = &LiveVMIObservation{VMI: vmi} }
}

// vmReports sets what the target VM reports of its instance.
func vmReports(created bool, printable string) obsOpt {
	return func(o *Observation) { o.VM.Created, o.VM.PrintableStatus = created, printable }
}

// TestNoCacheLagPowersTheSourceOn: the instance cache can lag behind
// KubeVirt (the instance created just before the halt, the VM's informer
// already showing Halted while the instance's has not delivered it yet).
// The source is powered on again only when the cache, the instance read
// live from the API server and what the VM itself reports (status.created,
// printableStatus) all say there is no instance; a live read that failed
// or was not made keeps the source off and tries again a poll later.
func TestNoCacheLagPowersTheSourceOn(t *testing.T) {
	rollingBack := newMigration(builders.Reached(v1alpha1.PhaseRollingBack), startedTarget)
	cancelling := newMigration(builders.Reached(v1alpha1.PhaseCancelling), builders.Deleted, startedTarget)
	running := &VMIObservation{Phase: VMIRunning, NodeName: "worker-2"}
	keepsOff := func(what string) func(t *testing.T, d Decision) {
		return func(t *testing.T, d Decision) {
			assert.Nil(t, d.Status.SourceControl.RestoreRequestedAt, "power-on requested: %s", what)
			c := wantCond(t, d, ConditionProgressing, metav1.ConditionFalse, ReasonWaitingForTargetInstance)
			assert.Contains(t, c.Message, what, "the condition says why the source stays off")
			assert.Equal(t, DefaultPollInterval, d.RequeueAfter, "looked at again a poll later")
		}
	}
	runCases(t, map[string]decideCase{
		"the cache has no instance, the API server has one: keep the source off": {
			m: rollingBack, obs: newObs(sourceOff, targetVM(true, RunStrategyHalted), liveVMI(running)),
			phase: v1alpha1.PhaseRollingBack, check: keepsOff("worker-2"),
		},
		"cancelling, the cache has no instance, the API server has one: keep the source off": {
			m: cancelling, obs: newObs(sourceOff, targetVM(true, RunStrategyHalted), liveVMI(running)),
			phase: v1alpha1.PhaseCancelling, check: keepsOff("worker-2"),
		},
		"the VM reports its instance created, none seen: keep the source off": {
			m: rollingBack, obs: newObs(sourceOff, targetVM(true, RunStrategyHalted), vmReports(true, "Stopping"), liveVMI(nil)),
			phase: v1alpha1.PhaseRollingBack, check: keepsOff("Stopping"),
		},
		"the VM reports Running, none seen: keep the source off": {
			m: rollingBack, obs: newObs(sourceOff, targetVM(true, RunStrategyHalted), vmReports(false, "Running"), liveVMI(nil)),
			phase: v1alpha1.PhaseRollingBack, check: keepsOff("Running"),
		},
		"cancelling, the VM reports Starting, none seen: keep the source off": {
			m: cancelling, obs: newObs(sourceOff, targetVM(true, RunStrategyHalted), vmReports(false, "Starting"), liveVMI(nil)),
			phase: v1alpha1.PhaseCancelling, check: keepsOff("Starting"),
		},
		"the live read failed: keep the source off, try again": {
			m: rollingBack, obs: newObs(sourceOff, targetVM(true, RunStrategyHalted), func(o *Observation) {
				o.LiveVMI = &LiveVMIObservation{Error: &ObservedError{Class: ErrorTransient, Reason: "APIUnavailable", Message: "the server is currently unable to handle the request"}}
			}),
			phase: v1alpha1.PhaseRollingBack, check: keepsOff("unable to handle the request"),
		},
		"no live read was made: keep the source off": {
			m: rollingBack, obs: newObs(sourceOff, targetVM(true, RunStrategyHalted)),
			phase: v1alpha1.PhaseRollingBack, check: keepsOff("read from the API server"),
		},
		"nothing anywhere says there is an instance: power the source on": {
			m: rollingBack, obs: newObs(sourceOff, targetVM(true, RunStrategyHalted), vmReports(false, "Stopped"), liveVMI(nil)),
			phase: v1alpha1.PhaseRollingBack, action: ActionPowerOnSource,
		},
		"cancelling, the target VM gone, no instance live: power the source on": {
			m: cancelling, obs: newObs(sourceOff, liveVMI(nil)),
			phase: v1alpha1.PhaseCancelling, action: ActionPowerOnSource,
		},
		"the live instance's node declared lost: power the source on, and say so": {
			m: rollingBack, obs: newObs(sourceOff, targetVM(true, RunStrategyHalted), vmReports(true, "Unknown"),
				liveVMI(&VMIObservation{Phase: VMIFailed, Reason: VMINodeLost, NodeName: "worker-3"})),
			phase: v1alpha1.PhaseRollingBack, action: ActionPowerOnSource,
			check: func(t *testing.T, d Decision) {
				wantCond(t, d, ConditionTargetNodeLost, metav1.ConditionTrue, ReasonTargetNodeLost)
			},
		},
		"the source is already on: no read is needed, it is restored": {
			m: rollingBack, obs: newObs(sourceOn(true), targetVM(true, RunStrategyHalted)),
			phase: v1alpha1.PhaseRollingBack,
			check: func(t *testing.T, d Decision) { assert.NotNil(t, d.Status.SourceControl.RestoredAt) },
		},
	})
}

// TestNeedsLiveTargetInstance: the controller reads the target's instance
// from the API server only when the decision may power the source on
// again (rolling back or cancelling, the source stopped by the controller,
// not restored, seen not running) and the cache shows no instance; never
// otherwise, so that a reconcile elsewhere reads nothing live.
func TestNeedsLiveTargetInstance(t *testing.T) {
	rollingBack := newMigration(builders.Reached(v1alpha1.PhaseRollingBack), startedTarget)
	tests := map[string]struct {
		m    *v1alpha1.VirtualMachineMigration
		obs  Observation
		want bool
	}{
		"rolling back, source off, no instance cached": {m: rollingBack, obs: newObs(sourceOff), want: true},
		"cancelling, source off, no instance cached": {
			m: newMigration(builders.Reached(v1alpha1.PhaseCancelling), builders.Deleted), obs: newObs(sourceOff), want: true,
		},
		"an instance cached: the decision waits anyway":  {m: rollingBack, obs: newObs(sourceOff, targetVMI(VMIRunning, false))},
		"the source seen on: nothing to power on":        {m: rollingBack, obs: newObs(sourceOn(true))},
		"the source not readable: nothing is powered on": {m: rollingBack, obs: newObs(sourceError(ErrorTransient, "VCenterUnreachable"))},
		"restored already": {
			m: newMigration(builders.Reached(v1alpha1.PhaseRollingBack), builders.WithSourceControl(func(sc *v1alpha1.SourceControlStatus) {
				sc.RestoredAt = builders.TP(-time.Second)
			})), obs: newObs(sourceOff),
		},
		"the source was off when found": {
			m: newMigration(builders.Reached(v1alpha1.PhaseRollingBack),
				builders.WithSourceControl(func(sc *v1alpha1.SourceControlStatus) { sc.OriginalPowerState = PowerStateOff })),
			obs: newObs(sourceOff),
		},
		"transferring: no power-on": {m: newMigration(builders.Reached(v1alpha1.PhaseTransferringDisks)), obs: newObs(sourceOff)},
		"no target named yet": {
			m:   newMigration(builders.Reached(v1alpha1.PhaseRollingBack), builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) { s.Target = nil })),
			obs: newObs(sourceOff),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, NeedsLiveTargetInstance(tc.m, &tc.obs))
		})
	}
}
