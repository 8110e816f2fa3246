package statemachine

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/test/builders"
)

// phaseEvents are the messages of the decision's phase-change events.
func phaseEvents(d Decision) []string {
	var out []string
	for _, e := range d.Events {
		if strings.Contains(e.Message, " -> ") {
			out = append(out, e.Message)
		}
	}
	return out
}

// TestRefusedBeforeTheStopEndsFailedAtOnce: a migration refused before its
// source VM was touched has nothing to roll back: it goes from the phase
// that refused it straight to Failed (no RollingBack), and every message
// says that nothing was rolled back. A failure after the stop still rolls
// back.
func TestRefusedBeforeTheStopEndsFailedAtOnce(t *testing.T) {
	refused := func(from v1alpha1.Phase) func(*testing.T, Decision) {
		return func(t *testing.T, d Decision) {
			require.NotNil(t, d.Status.LastError)
			assert.Equal(t, from, d.Status.LastError.Phase)
			assert.Equal(t, []string{string(from) + " -> Failed: refused (" + d.Status.LastError.Reason + ") before the source VM was touched: nothing to roll back"},
				phaseEvents(d), "the phase path")
			for _, e := range d.Events {
				assert.NotContains(t, e.Message, "RollingBack")
				assert.NotContains(t, e.Message, "restored")
			}
			wantCond(t, d, ConditionFailed, metav1.ConditionTrue, d.Status.LastError.Reason)
			wantCond(t, d, ConditionSucceeded, metav1.ConditionFalse, d.Status.LastError.Reason)
			assertTime(t, builders.At(0), d.Status.CompletionTime, "completionTime")
			assert.True(t, SourceUntouched(&d.Status), "SourceUntouched of the refused status")
		}
	}
	suspendedStop := newMigration(builders.Reached(v1alpha1.PhaseStoppingSource), builders.WithSourceControl(func(sc *v1alpha1.SourceControlStatus) {
		sc.ShutdownRequestedAt, sc.PoweredOffAt = nil, nil
	}), builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) { s.Disks = nil }))
	runCases(t, map[string]decideCase{
		"a blocking finding in Validating": {
			m: newMigration(builders.Reached(v1alpha1.PhaseValidating)), obs: newObs(sourceInventory, preflight(v1alpha1.SeverityBlocking, "RDMDisk")),
			phase: v1alpha1.PhaseFailed, check: refused(v1alpha1.PhaseValidating),
		},
		"the source VM is gone in Validating": {
			m: newMigration(builders.Reached(v1alpha1.PhaseValidating)), obs: newObs(sourceError(ErrorGone, ReasonSourceVMNotFound)),
			phase: v1alpha1.PhaseFailed, check: refused(v1alpha1.PhaseValidating),
		},
		"refused by the dry run right before the stop": {
			m: newMigration(builders.Reached(v1alpha1.PhaseQueued)), obs: newObs(slot(true), sourceOn(true),
				dryRun(v1alpha1.PhaseQueued, dryRunObject("VirtualMachine", "vm", v1alpha1.DryRunRefused, "denied")),
				preflight(v1alpha1.SeverityBlocking, "DryRunRefused")),
			phase: v1alpha1.PhaseFailed, check: refused(v1alpha1.PhaseQueued),
		},
		"found suspended when the stop was to begin": {
			m: suspendedStop, obs: newObs(func(o *Observation) { o.Source.Observed, o.Source.PowerState = true, PowerStateSuspended }),
			phase: v1alpha1.PhaseFailed,
			check: func(t *testing.T, d Decision) {
				assert.True(t, SourceUntouched(&d.Status))
				assert.Equal(t, []string{"StoppingSource -> Failed: refused (SourceSuspended) before the source VM was touched: nothing to roll back"}, phaseEvents(d))
			},
		},
		"a failure after the stop still rolls back": {
			m: newMigration(builders.Reached(v1alpha1.PhaseTransferringDisks), builders.RetryLimit(0), builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
				s.Transfer = &v1alpha1.JobStatus{JobName: "j", Attempt: 1}
			})),
			obs:   newObs(claims(stagingClaims()...), transferJob(JobObservation{Name: "j", Failed: true, Message: "BackoffLimitExceeded"})),
			phase: v1alpha1.PhaseRollingBack,
			check: func(t *testing.T, d Decision) {
				require.Len(t, phaseEvents(d), 1)
				assert.True(t, strings.HasPrefix(phaseEvents(d)[0], "TransferringDisks -> RollingBack: "), phaseEvents(d)[0])
				assert.False(t, SourceUntouched(&d.Status), "a failure after the stop counts as one before it")
			},
		},
	})
}

// refusedInValidating is a migration that failed in Validating, its
// source never touched, with the conditions the failure set; its spec
// then changed generation times (1: never).
func refusedInValidating(generation int64, mods ...builders.MigrationMod) *v1alpha1.VirtualMachineMigration {
	m := newMigration(builders.Reached(v1alpha1.PhaseValidating))
	d := decide(m, newObs(sourceInventory, preflight(v1alpha1.SeverityBlocking, "ChildNameTaken"),
		proof(v1alpha1.ComponentTransfer, false, proofResult(v1alpha1.ComponentTransfer, v1alpha1.ProofFailed, "ErrImagePull", "no registry")),
		proof(v1alpha1.ComponentConversion, false, proofResult(v1alpha1.ComponentConversion, v1alpha1.ProofPassed, "", ""))))
	m = after(m, d)
	m.Generation = generation
	for _, mod := range mods {
		mod(m)
	}
	return m
}

// TestRefusedBeforeTheStopValidatesAgainOnASpecChange: a migration
// refused before its source was touched is fixed in place: a change of
// its spec (a new generation) validates it again, the failure reset. A
// migration that failed after the stop, or once its cutover was
// committed, stays Failed.
func TestRefusedBeforeTheStopValidatesAgainOnASpecChange(t *testing.T) {
	require.Equal(t, v1alpha1.PhaseFailed, refusedInValidating(1).Status.Phase, "the fixture")
	require.True(t, RefusedBeforeCutover(&refusedInValidating(1).Status), "the fixture")
	committed := newMigration(builders.Reached(v1alpha1.PhaseStoppingSource))
	committed = after(committed, decide(committed, newObs(func(o *Observation) { o.Source.Observed, o.Source.PowerState = true, PowerStateSuspended })))
	require.Equal(t, v1alpha1.PhaseFailed, committed.Status.Phase, "the committed fixture")
	committed.Generation = 2
	runCases(t, map[string]decideCase{
		"a new generation: validating again, the failure reset": {
			m: refusedInValidating(2), obs: newObs(),
			phase: v1alpha1.PhaseValidating, requeue: ms,
			check: func(t *testing.T, d Decision) {
				assert.Nil(t, d.Status.LastError, "the failure of the last validation, kept")
				assert.Nil(t, d.Status.CompletionTime)
				wantTime(t, "startTime (the retry deadline counts from it)", d.Status.StartTime, 0)
				wantTime(t, "phaseStartTime", d.Status.PhaseStartTime, 0)
				wantNoCond(t, d, ConditionFailed)
				wantNoCond(t, d, ConditionSucceeded)
				wantCond(t, d, ConditionReady, metav1.ConditionFalse, string(v1alpha1.PhaseValidating))
				require.Len(t, d.Status.ImageProofs, 1, "the failed proof is forgotten, the passed one kept")
				assert.Equal(t, v1alpha1.ProofPassed, d.Status.ImageProofs[0].Result)
				require.Len(t, d.Events, 1)
				assert.False(t, d.Events[0].Warning)
				assert.Equal(t, PhaseChangedReason(v1alpha1.PhaseValidating), d.Events[0].Reason)
				assert.Equal(t, "Failed -> Validating: the spec changed (generation 2) after the migration was refused (PreflightFailed) before its source VM was touched: validating again",
					d.Events[0].Message)
			},
		},
		"the same generation: stays Failed": {
			m: refusedInValidating(1), obs: newObs(),
			phase: v1alpha1.PhaseFailed,
			check: func(t *testing.T, d Decision) { assert.Empty(t, d.Events) },
		},
		"failed after the stop: stays Failed, whatever the spec": {
			m: newMigration(builders.Reached(v1alpha1.PhaseFailed), builders.WithGeneration(2)), obs: newObs(),
			phase: v1alpha1.PhaseFailed,
		},
		"failed once the cutover was committed: stays Failed": {
			m: committed, obs: newObs(),
			phase: v1alpha1.PhaseFailed,
		},
		"being deleted: cancelled, not validated again": {
			m: refusedInValidating(2, builders.Deleted), obs: newObs(),
			phase: v1alpha1.PhaseFailed, action: ActionRemoveFinalizer,
		},
	})
}
