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
			m: rollingBack, obs: newObs(sourceOff, targetVM(true, RunStrategyHalted)),
			phase: v1alpha1.PhaseRollingBack, action: ActionPowerOnSource,
		},
		"cancelling, the halted target's instance still runs: wait": {
			m: cancelling, obs: halting, phase: v1alpha1.PhaseCancelling, action: ActionNone, check: waits,
		},
		"the instance's node declared lost: power the source on, and say so": {
			m: rollingBack, obs: newObs(sourceOff, targetVM(true, RunStrategyHalted), func(o *Observation) {
				o.VMI = &VMIObservation{Phase: VMIFailed, Reason: VMINodeLost, NodeName: "worker-3", Deleting: true}
			}),
			phase: v1alpha1.PhaseRollingBack, action: ActionPowerOnSource,
			check: func(t *testing.T, d Decision) {
				c := wantCond(t, d, ConditionTargetNodeLost, metav1.ConditionTrue, ReasonTargetNodeLost)
				assert.Contains(t, c.Message, "worker-3")
				assert.Contains(t, eventReasons(d), ReasonTargetNodeLost, "a warning event says the node was lost")
			},
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
			m: cancelling, obs: newObs(sourceOff, targetVM(true, RunStrategyHalted)),
			phase: v1alpha1.PhaseCancelling, action: ActionPowerOnSource,
		},
	})
}
