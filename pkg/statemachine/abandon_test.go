package statemachine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/test/builders"
)

func terminating(o *Observation) { o.NamespaceTerminating = true }

// TestRestoreInATerminatingNamespace: a restore that cannot read the
// source while the namespace is being deleted is given up at once when
// nothing can heal it (no credentials), after TerminatingRestoreGrace
// when something might (an unreachable vCenter), and never otherwise; a
// given-up restore lets the finalizer go, says so naming the VM, and
// leaves the snapshots alone (they cannot be reached either).
func TestRestoreInATerminatingNamespace(t *testing.T) {
	cancelling := func(opts ...builders.MigrationMod) *v1alpha1.VirtualMachineMigration {
		return newMigration(append([]builders.MigrationMod{builders.Reached(v1alpha1.PhaseCancelling), builders.Deleted}, opts...)...)
	}
	abandoned := func(t *testing.T, d Decision) {
		sc := d.Status.SourceControl
		require.NotNil(t, sc.RestoreAbandonedAt, "the restore was not given up")
		assert.Contains(t, sc.RestoreAbandonedReason, builders.Namespace)
		i := indexOfEvent(d, ReasonSourceRestoreAbandoned)
		require.GreaterOrEqual(t, i, 0, "no %s event: %+v", ReasonSourceRestoreAbandoned, d.Events)
		assert.True(t, d.Events[i].Warning)
		assert.Contains(t, d.Events[i].Message, builders.Inventory().Name, "the event does not name the source VM")
		assert.Contains(t, d.Events[i].Message, builders.SourceURL)
	}
	runCases(t, map[string]decideCase{
		"credentials gone in a terminating namespace: given up, finalizer released": {
			m:     cancelling(withSnapshot),
			obs:   newObs(sourceError(ErrorNeedsUser, "CredentialsSecretNotFound"), terminating),
			phase: v1alpha1.PhaseCancelling, action: ActionRemoveFinalizer, check: abandoned,
		},
		"vCenter unreachable in a terminating namespace: keeps trying within the grace": {
			m:     cancelling(),
			obs:   newObs(sourceError(ErrorTransient, "SourceUnavailable"), terminating),
			phase: v1alpha1.PhaseCancelling, action: ActionNone,
			check: func(t *testing.T, d Decision) { assert.Nil(t, d.Status.SourceControl.RestoreAbandonedAt) },
		},
		"vCenter unreachable in a terminating namespace past the grace: given up": {
			m:     cancelling(),
			obs:   newObs(sourceError(ErrorTransient, "SourceUnavailable"), terminating),
			now:   TerminatingRestoreGrace,
			phase: v1alpha1.PhaseCancelling, action: ActionRemoveFinalizer, check: abandoned,
		},
		"credentials gone, namespace not terminating: waits for a person": {
			m:     cancelling(),
			obs:   newObs(sourceError(ErrorNeedsUser, "CredentialsSecretNotFound")),
			now:   24 * time.Hour,
			phase: v1alpha1.PhaseCancelling, action: ActionNone,
			check: func(t *testing.T, d Decision) {
				assert.Nil(t, d.Status.SourceControl.RestoreAbandonedAt)
				wantCond(t, d, ConditionSourceRestoreFailed, "True", ReasonSourceRestoreFailed)
			},
		},
		"a given-up restore stays given up": {
			m: cancelling(builders.WithSourceControl(func(sc *v1alpha1.SourceControlStatus) {
				sc.RestoreAbandonedAt, sc.RestoreAbandonedReason = builders.TP(-time.Second), "namespace apps is being deleted"
			})),
			obs:   newObs(sourceError(ErrorNeedsUser, "CredentialsSecretNotFound"), terminating),
			phase: v1alpha1.PhaseCancelling, action: ActionRemoveFinalizer,
		},
	})
	st := cancelling().Status
	assert.True(t, SourceNeedsRestore(&st))
	st.SourceControl.RestoreAbandonedAt = builders.TP(0)
	assert.False(t, SourceNeedsRestore(&st))
}

func indexOfEvent(d Decision, reason string) int {
	for i, e := range d.Events {
		if e.Reason == reason {
			return i
		}
	}
	return -1
}
