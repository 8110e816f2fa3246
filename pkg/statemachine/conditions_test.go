package statemachine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/test/builders"
)

func TestConditionsCarryObservedGeneration(t *testing.T) {
	m := newMigration(builders.WithGeneration(7), builders.Reached(v1alpha1.PhaseTransferringDisks), builders.Insecure, builders.Paused)
	m.Status.ObservedGeneration = 6
	d := decide(m, newObs())
	assert.Equal(t, int64(7), d.Status.ObservedGeneration, "observedGeneration, want the new generation 7")
	require.GreaterOrEqual(t, len(d.Status.Conditions), 4, "want at least 4 conditions: %+v", d.Status.Conditions)
	for _, c := range d.Status.Conditions {
		assert.Equal(t, int64(7), c.ObservedGeneration, "%s observedGeneration, want the new generation 7", c.Type)
	}
}

func TestLastTransitionTimeMovesOnlyOnFlips(t *testing.T) {
	m := newMigration(builders.Reached(v1alpha1.PhaseValidating))
	d := decide(m, newObs(sourceInventory)) // Validating -> Queued
	ready := cond(t, d, ConditionReady)
	progressing := cond(t, d, ConditionProgressing)

	// Queued, waiting for a slot, a minute later: Ready stays False (its
	// reason changes), Progressing flips to False.
	m = after(m, d)
	d = decideAt(m, newObs(slot(false)), time.Minute)
	c := cond(t, d, ConditionReady)
	assertTime(t, ready.LastTransitionTime, &c.LastTransitionTime, "Ready = %+v: transition time moved without a flip (was %s)", c, ready.LastTransitionTime)
	assert.Equal(t, string(v1alpha1.PhaseQueued), c.Reason, "Ready = %+v, want the reason Queued", c)
	c = cond(t, d, ConditionProgressing)
	assert.Equal(t, metav1.ConditionFalse, c.Status, "Progressing = %+v, want flipped to False at t0+1m (was %+v)", c, progressing)
	assertTime(t, builders.At(time.Minute), &c.LastTransitionTime, "Progressing = %+v, want flipped to False at t0+1m (was %+v)", c, progressing)

	// The same again, later: nothing moves.
	m = after(m, d)
	d2 := decideAt(m, newObs(slot(false)), 2*time.Minute)
	assertSemanticEqual(t, m.Status, d2.Status, "an unchanged wait rewrote the status:\n%+v\n%+v", m.Status.Conditions, d2.Status.Conditions)
}

func TestSpecChangeIgnored(t *testing.T) {
	base := func(opts ...builders.MigrationMod) *v1alpha1.VirtualMachineMigration {
		return newMigration(append([]builders.MigrationMod{builders.Reached(v1alpha1.PhaseTransferringDisks)}, opts...)...)
	}
	cases := map[string]struct {
		m      *v1alpha1.VirtualMachineMigration
		fields []string // nil: no condition
	}{
		"no change": {m: base()},
		"spec.target.name changed": {
			m:      base(builders.WithSpec(func(s *v1alpha1.VirtualMachineMigrationSpec) { s.Target.Name = "other" })),
			fields: []string{"spec.target"},
		},
		"shutdown mode and conversion changed": {
			m: base(builders.WithSpec(func(s *v1alpha1.VirtualMachineMigrationSpec) {
				s.Policy.Shutdown.Mode = v1alpha1.ShutdownModePowerOff
				s.Conversion.Skip = true
			})),
			fields: []string{"spec.conversion", "spec.policy.shutdown"},
		},
		"only live fields changed": {
			m: base(builders.WithSpec(func(s *v1alpha1.VirtualMachineMigrationSpec) {
				s.Policy.Paused = true
				s.Policy.Retry.Limit = ptr.To[int32](10)
				s.Policy.Retry.Deadline = &v1alpha1.Duration{Duration: time.Hour}
				s.Policy.Cleanup = v1alpha1.CleanupPolicyRetain
				s.Policy.StallTimeout = &v1alpha1.Duration{Duration: time.Hour}
			})),
		},
		"before the cutover nothing is ignored": {
			m: newMigration(builders.Reached(v1alpha1.PhaseQueued), builders.WithSpec(func(s *v1alpha1.VirtualMachineMigrationSpec) { s.Target.Name = "other" })),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := decide(tc.m, newObs())
			if tc.fields == nil {
				wantNoCond(t, d, ConditionSpecChangeIgnored)
				return
			}
			c := wantCond(t, d, ConditionSpecChangeIgnored, metav1.ConditionTrue, ReasonSpecChangeIgnored)
			for _, f := range tc.fields {
				assert.Contains(t, c.Message, f, "the message names the changed field %s", f)
			}
			assert.Empty(t, d.Status.AppliedSpec.Target.Name, "appliedSpec changed: %+v", d.Status.AppliedSpec.Target)
		})
	}

	// Reverting the change turns the condition false.
	m := base(builders.WithSpec(func(s *v1alpha1.VirtualMachineMigrationSpec) { s.Target.Name = "other" }))
	d := decide(m, newObs())
	m = after(m, d)
	m.Spec.Target.Name = ""
	d = decideAt(m, newObs(), time.Minute)
	wantCond(t, d, ConditionSpecChangeIgnored, metav1.ConditionFalse, ReasonSpecApplied)
}

// The spec in force after the cutover is status.appliedSpec: a changed
// target name does not rename the DataVolumes or the VM.
func TestAppliedSpecIsInForce(t *testing.T) {
	m := newMigration(builders.Reached(v1alpha1.PhaseCreatingVM), builders.WithSpec(func(s *v1alpha1.VirtualMachineMigrationSpec) { s.Target.Name = "renamed" }))
	d := decide(m, newObs())
	assert.Equal(t, ActionCreateVM, d.Action.Type, "action = %+v, want CreateVM %s", d.Action, builders.DefaultTarget)
	assert.Equal(t, builders.DefaultTarget, d.Action.Name, "action = %+v, want CreateVM %s", d.Action, builders.DefaultTarget)
}

func TestInsecureConnection(t *testing.T) {
	m := newMigration(builders.Insecure)
	d := decide(m, newObs())
	wantCond(t, d, ConditionInsecureConnection, metav1.ConditionTrue, ReasonInsecureSkipVerify)
	assert.Contains(t, eventReasons(d), ReasonInsecureSkipVerify, "want a warning event on the transition: %+v", d.Events)
	m = after(m, d)
	d = decideAt(m, newObs(), time.Second)
	assert.NotContains(t, eventReasons(d), ReasonInsecureSkipVerify, "warning event repeated without a transition")
	m = after(m, d)
	m.Spec.Source.InsecureSkipVerify = false
	d = decideAt(m, newObs(), 2*time.Second)
	wantCond(t, d, ConditionInsecureConnection, metav1.ConditionFalse, ReasonVerifiedTLS)
	assert.NotContains(t, eventReasons(d), ReasonInsecureSkipVerify, "warning event when TLS verification is back on")

	// Never set: no condition at all.
	d = decide(newMigration(), newObs())
	wantNoCond(t, d, ConditionInsecureConnection)
}

func TestStalled(t *testing.T) {
	running := newObs(claims(stagingClaims()...), transferJob(JobObservation{Name: naming.TransferJob(builders.Name, 1)}))
	withTransfer := builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
		s.Transfer = &v1alpha1.JobStatus{JobName: naming.TransferJob(builders.Name, 1), Attempt: 1}
	})
	idleFor := func(d time.Duration) builders.MigrationMod {
		return builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) { s.LastProgressTime = builders.TP(-d) })
	}
	runCases(t, map[string]decideCase{
		"no progress for the stall timeout": {
			m:   newMigration(builders.Reached(v1alpha1.PhaseTransferringDisks), withTransfer, idleFor(30*time.Minute)),
			obs: running, phase: v1alpha1.PhaseTransferringDisks, requeue: DefaultPollInterval,
			check: func(t *testing.T, d Decision) {
				c := wantCond(t, d, ConditionStalled, metav1.ConditionTrue, ReasonNoProgress)
				assert.Contains(t, c.Message, "TransferringDisks", "the Stalled message names the phase")
			},
		},
		"custom stall timeout": {
			m: newMigration(func(m *v1alpha1.VirtualMachineMigration) {
				m.Spec.Policy.StallTimeout = &v1alpha1.Duration{Duration: 2 * time.Minute}
			}, builders.Reached(v1alpha1.PhaseTransferringDisks), withTransfer, idleFor(3*time.Minute)),
			obs: running, phase: v1alpha1.PhaseTransferringDisks,
			check: func(t *testing.T, d Decision) {
				wantCond(t, d, ConditionStalled, metav1.ConditionTrue, ReasonNoProgress)
			},
		},
		"stall timeout close: look again then": {
			m:   newMigration(builders.Reached(v1alpha1.PhaseTransferringDisks), withTransfer, idleFor(30*time.Minute-time.Second)),
			obs: running, phase: v1alpha1.PhaseTransferringDisks, requeue: time.Second,
			check: func(t *testing.T, d Decision) { wantNoCond(t, d, ConditionStalled) },
		},
		"progress again: Stalled turns false": {
			m: newMigration(builders.Reached(v1alpha1.PhaseTransferringDisks), withTransfer, idleFor(time.Hour), builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
				s.Conditions = []metav1.Condition{{Type: ConditionStalled, Status: metav1.ConditionTrue, Reason: ReasonNoProgress, LastTransitionTime: builders.At(-30 * time.Minute)}}
			})),
			obs: newObs(claims(stagingClaims()...), transferJob(JobObservation{Name: naming.TransferJob(builders.Name, 1),
				Progress: []DiskProgress{{Key: builders.DiskKey0, BytesDone: 1}}})),
			phase: v1alpha1.PhaseTransferringDisks,
			check: func(t *testing.T, d Decision) {
				wantCond(t, d, ConditionStalled, metav1.ConditionFalse, ReasonProgressing)
			},
		},
		"waiting on a person does not stall": {
			m:   newMigration(builders.Reached(v1alpha1.PhaseValidating), idleFor(time.Hour)),
			obs: newObs(sourceError(ErrorNeedsUser, "CredentialsSecretMissing")), phase: v1alpha1.PhaseValidating,
			check: func(t *testing.T, d Decision) { wantNoCond(t, d, ConditionStalled) },
		},
		"ended Failed: Stalled, with the failure's reason (kstatus reads Failed)": {
			m:   newMigration(builders.Reached(v1alpha1.PhaseValidating)),
			obs: newObs(sourceInventory, preflight(v1alpha1.SeverityBlocking, "RDMDisk")), phase: v1alpha1.PhaseFailed,
			check: func(t *testing.T, d Decision) {
				c := wantCond(t, d, ConditionStalled, metav1.ConditionTrue, ReasonPreflightFailed)
				assert.Equal(t, "failed in Validating: the Failed condition (and status.lastError) says why", c.Message)
			},
		},
		"rolling back is not Stalled: the failure is final once the source is restored": {
			m:     newMigration(builders.Reached(v1alpha1.PhaseTransferringDisks), withTransfer, idleFor(time.Hour), builders.RetryLimit(0)),
			obs:   newObs(claims(stagingClaims()...), transferJob(JobObservation{Name: naming.TransferJob(builders.Name, 1), Failed: true, Message: "stream reset"})),
			phase: v1alpha1.PhaseRollingBack,
			check: func(t *testing.T, d Decision) { wantNoCond(t, d, ConditionStalled) },
		},
	})
}

// A spec change made while the migration is paused before the cutover is
// validated once it is unpaused.
func TestSpecChangeWhilePausedBeforeCutoverIsValidated(t *testing.T) {
	for _, p := range []v1alpha1.Phase{v1alpha1.PhaseQueued, v1alpha1.PhaseAwaitingApproval} {
		t.Run(string(p), func(t *testing.T) {
			m := newMigration(builders.RequireApproval, builders.Reached(p))
			// Pause (generation 2), change the target while paused (3), unpause (4).
			m.Spec.Policy.Paused, m.Generation = true, 2
			m = after(m, decideAt(m, newObs(), time.Second))
			m.Spec.Target.Name, m.Generation = "renamed", 3
			m = after(m, decideAt(m, newObs(), 2*time.Second))
			m.Spec.Policy.Paused, m.Generation = false, 4
			d := decideAt(m, newObs(slot(true), sourceOn(true)), 3*time.Second)
			assert.Equal(t, v1alpha1.PhaseValidating, d.Status.Phase, "want Validating: the target changed while paused")
		})
	}
}

// wantEnded checks the conditions of a migration that ended in phase p:
// Succeeded and Failed set to its outcome, with the same reason, and
// Progressing False with a reason that says more than the phase.
func wantEnded(t *testing.T, d Decision, p v1alpha1.Phase) {
	t.Helper()
	succeeded, failed := metav1.ConditionTrue, metav1.ConditionFalse
	if p == v1alpha1.PhaseFailed {
		succeeded, failed = failed, succeeded
	}
	s, f := cond(t, d, ConditionSucceeded), cond(t, d, ConditionFailed)
	assert.Equal(t, succeeded, s.Status, "Succeeded = %+v in phase %s", s, p)
	assert.Equal(t, failed, f.Status, "Failed = %+v in phase %s", f, p)
	pr := cond(t, d, ConditionProgressing)
	assert.Equal(t, metav1.ConditionFalse, pr.Status, "Progressing = %+v in phase %s", pr, p)
	assert.NotEqual(t, string(p), pr.Reason, "Progressing's reason repeats the phase: %+v", pr)
	assert.NotContains(t, pr.Message, "the migration is ", "Progressing = %+v", pr)
	if p == v1alpha1.PhaseFailed {
		assert.Equal(t, d.Status.LastError.Reason, pr.Reason, "Progressing's reason is the failure's")
		assert.Equal(t, pr.Reason, f.Reason, "Failed's reason is the failure's")
	}
}
