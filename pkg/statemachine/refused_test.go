package statemachine

import (
	"strings"
	"testing"
	"time"

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

// refusedInQueued is a migration approved, then refused by the dry run
// right before the stop, its spec then changed to the given generation.
func refusedInQueued(generation int64) *v1alpha1.VirtualMachineMigration {
	m := newMigration(builders.Reached(v1alpha1.PhaseQueued), builders.RequireApproval, builders.Approved, builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
		s.Evidence = append(s.Evidence, v1alpha1.CheckpointEvidence{Phase: v1alpha1.PhaseAwaitingApproval, ReachedAt: builders.At(-30 * time.Minute), Observed: "approved"})
		s.AppliedSpec = nil
	}))
	m = after(m, decide(m, newObs(slot(true), sourceOn(true),
		dryRun(v1alpha1.PhaseQueued, dryRunObject("VirtualMachine", "vm", v1alpha1.DryRunRefused, "denied")),
		preflight(v1alpha1.SeverityBlocking, "DryRunRefused"))))
	m.Generation = generation
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
		"refused right before the stop, once approved: validating again without the evidence of before (issue 46)": {
			m: refusedInQueued(2), obs: newObs(),
			phase: v1alpha1.PhaseValidating, requeue: ms,
			check: func(t *testing.T, d Decision) {
				var passed []v1alpha1.Phase
				for _, e := range d.Status.Evidence {
					passed = append(passed, e.Phase)
				}
				assert.Equal(t, []v1alpha1.Phase{v1alpha1.PhasePending}, passed,
					"the checkpoints of the refused validation (Validating, an approval) are not this one's: no timeline shows them, and the migration holds no claim while it only validates")
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

// occurrences counts the conditions and the events of a decision whose
// message holds text.
func occurrences(d Decision, text string) (conditions, events []string) {
	for _, c := range d.Status.Conditions {
		if strings.Contains(c.Message, text) {
			conditions = append(conditions, c.Type)
		}
	}
	for _, e := range d.Events {
		if strings.Contains(e.Message, text) {
			events = append(events, e.Reason)
		}
	}
	return conditions, events
}

// TestFailureSaidOnce: a failure's message is said once where it belongs,
// beside status.lastError: in the Failed condition once the migration
// ended (the one scripts wait on), in Ready while it rolls back, and in
// one event of its reason; the other conditions and the phase change
// name the reason and refer to it.
func TestFailureSaidOnce(t *testing.T) {
	const msg = "ChildNameTaken: DataVolume/web-01-prod-disk-0 already exists in this namespace and does not belong to this migration"
	refusal := newObs(sourceInventory, func(o *Observation) {
		o.Preflight = append(o.Preflight, v1alpha1.PreflightFinding{Reason: "ChildNameTaken", Severity: v1alpha1.SeverityBlocking,
			Message: strings.TrimPrefix(msg, "ChildNameTaken: ")})
	})
	d := decide(newMigration(builders.Reached(v1alpha1.PhaseValidating)), refusal)
	require.Equal(t, v1alpha1.PhaseFailed, d.Status.Phase)
	conds, events := occurrences(d, msg)
	assert.Equal(t, []string{ConditionFailed}, conds, "the conditions that say the failure's message")
	assert.Equal(t, []string{ReasonPreflightFailed}, events, "the events that say it")
	for _, typ := range []string{ConditionReady, ConditionProgressing, ConditionSucceeded} {
		c := cond(t, d, typ)
		assert.Equal(t, ReasonPreflightFailed, c.Reason, "%s names the failure's reason", typ)
		assert.Contains(t, c.Message, "the Failed condition", "%s refers to the message", typ)
	}

	late := newMigration(builders.Reached(v1alpha1.PhaseTransferringDisks), builders.RetryLimit(0), builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
		s.Transfer = &v1alpha1.JobStatus{JobName: "j", Attempt: 1}
	}))
	const jobMsg = "pod web01-mig-transfer-1-x: vm-transfer: reading disk 2000 from esxi-01.example.com: connection reset by peer"
	d = decide(late, newObs(claims(stagingClaims()...), transferJob(JobObservation{Name: "j", Failed: true, Message: jobMsg})))
	require.Equal(t, v1alpha1.PhaseRollingBack, d.Status.Phase)
	conds, events = occurrences(d, jobMsg)
	assert.Equal(t, []string{ConditionReady}, conds, "while rolling back, the conditions that say the failure's message")
	assert.Equal(t, []string{ReasonTransferFailed}, events, "the events that say it")
	assert.Equal(t, []string{"TransferringDisks -> RollingBack: failed (TransferFailed; status.lastError says why): rolling back"}, phaseEvents(d))

	for m := after(late, d); m.Status.Phase == v1alpha1.PhaseRollingBack; m = after(m, d) {
		d = decide(m, newObs(sourceOn(true)))
	}
	require.Equal(t, v1alpha1.PhaseFailed, d.Status.Phase, "the rollback ends")
	conds, _ = occurrences(d, jobMsg)
	assert.Equal(t, []string{ConditionFailed}, conds, "once Failed, the conditions that say the failure's message")
}

// TestFailedActionSaidOnce: an action whose failure fails the migration
// says the message in one event, not in its ActionFailed event and again
// in the failure's.
func TestFailedActionSaidOnce(t *testing.T) {
	m := newMigration(builders.Reached(v1alpha1.PhaseValidating))
	d := ActionFailed(Input{Migration: m, Now: builders.At(0)}, Action{Type: ActionCreateProofJob, Name: v1alpha1.ComponentTransfer},
		ObservedError{Class: ErrorPermanent, Reason: "Invalid", Message: `Job.batch "x" is invalid: spec.template.spec.containers[0].image: Required value`})
	require.Equal(t, v1alpha1.PhaseFailed, d.Status.Phase)
	_, events := occurrences(d, "is invalid: spec.template")
	assert.Len(t, events, 1, "the events that say the failed action's message: %v", events)
}
