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
