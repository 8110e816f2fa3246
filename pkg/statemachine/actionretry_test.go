package statemachine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/test/builders"
)

// TestRetryKeepsTheFailedActionsWait: deciding to try again an action
// whose failure the migration waits on keeps that wait, so that a retry
// that fails as before leaves the status as it was (the controller then
// writes nothing, and nothing brings the migration back before its
// requeue). Another action, or the phase moving on, ends the wait.
func TestRetryKeepsTheFailedActionsWait(t *testing.T) {
	m := newMigration(builders.Reached(v1alpha1.PhaseTransferringDisks), builders.InPhase(v1alpha1.PhaseTransferringDisks))
	m.Status.Transfer, m.Status.Progress = nil, ""
	quota := ObservedError{Class: ErrorNeedsUser, Reason: "QuotaExceeded", Message: "exceeded quota: no-claims"}

	first := decide(m, newObs())
	require.Equal(t, ActionCreateStagingClaims, first.Action.Type)
	m = after(m, first)
	m = after(m, ActionFailed(Input{Migration: m, Now: builders.At(0)}, first.Action, quota))
	waiting := *m.Status.DeepCopy()
	wantCond(t, Decision{Status: waiting}, ConditionProgressing, metav1.ConditionFalse, "QuotaExceeded")

	for i := 1; i <= 3; i++ {
		now := time.Duration(i) * DefaultWaitInterval
		retry := decideAt(m, newObs(), now)
		require.Equal(t, ActionCreateStagingClaims, retry.Action.Type, "retry %d", i)
		assert.True(t, equality.Semantic.DeepEqual(waiting, retry.Status), "retry %d changed the status:\n%+v\nwas\n%+v", i, retry.Status.Conditions, waiting.Conditions)
		failed := ActionFailed(Input{Migration: after(m, retry), Now: builders.At(now)}, retry.Action, quota)
		assert.True(t, equality.Semantic.DeepEqual(waiting, failed.Status), "retry %d failed as before, yet changed the status", i)
		assert.Equal(t, DefaultWaitInterval, failed.RequeueAfter)
	}

	// The claims exist: the next action is another one, and the wait ends.
	next := decideAt(m, newObs(claims(stagingClaims()...)), 4*DefaultWaitInterval)
	require.Equal(t, ActionCreateTransferJob, next.Action.Type)
	wantCond(t, next, ConditionProgressing, metav1.ConditionTrue, ReasonWorking)
}

// TestObservedWaitIsNotKeptForAnAction: a wait an observation error left
// (not a failed action) ends as soon as the decision acts again.
func TestObservedWaitIsNotKeptForAnAction(t *testing.T) {
	m := newMigration(builders.Reached(v1alpha1.PhaseStoppingSource), builders.InPhase(v1alpha1.PhaseStoppingSource))
	m.Status.SourceControl.ShutdownRequestedAt, m.Status.SourceControl.PoweredOffAt = nil, nil
	m = after(m, decide(m, newObs(sourceError(ErrorTransient, "SourceUnavailable"))))
	require.Equal(t, metav1.ConditionFalse, cond(t, Decision{Status: m.Status}, ConditionProgressing).Status)

	d := decideAt(m, newObs(sourceOn(true)), time.Second)
	require.Equal(t, ActionShutdownGuest, d.Action.Type)
	wantCond(t, d, ConditionProgressing, metav1.ConditionTrue, ReasonWorking)
}
