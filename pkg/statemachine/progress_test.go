package statemachine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/test/builders"
)

// TestFailedProgressIsNotDone: status.progress (kubectl get's PROGRESS)
// is the progress of a copy that runs; once the migration fails it is
// cleared, so a migration that failed after its transfer no longer reads
// "100%" (issue 34: Failed migrations showed 100%). status.disks keep how
// far each disk got.
func TestFailedProgressIsNotDone(t *testing.T) {
	withProgress := func(p string) builders.MigrationMod {
		return builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) { s.Progress = p })
	}
	conv1 := naming.ConversionJob(builders.Name, 1)
	runCases(t, map[string]decideCase{
		"a conversion that fails for good after the transfer: no 100% left": {
			m: newMigration(builders.Reached(v1alpha1.PhaseConverting)),
			obs: newObs(conversionJob(JobObservation{Name: conv1, Failed: true, Reason: ConversionInspectionFailed,
				Message: "virt-v2v: inspection could not detect the source guest"})),
			phase: v1alpha1.PhaseRollingBack,
			check: func(t *testing.T, d Decision) {
				assert.Empty(t, d.Status.Progress, "the progress of a failing migration")
				assert.NotNil(t, d.Status.Disks[0].TransferredAt, "the disks keep how far they got")
			},
		},
		"rolling back: no percentage": {
			m: newMigration(builders.Reached(v1alpha1.PhaseRollingBack), withProgress("45%")), obs: newObs(sourceOff, liveVMI(nil)),
			phase: v1alpha1.PhaseRollingBack, action: ActionPowerOnSource,
			check: func(t *testing.T, d Decision) { assert.Empty(t, d.Status.Progress) },
		},
		"failed with an older controller, 100% in status: cleared": {
			m: newMigration(builders.Reached(v1alpha1.PhaseFailed), withProgress("100%")), obs: newObs(),
			phase: v1alpha1.PhaseFailed,
			check: func(t *testing.T, d Decision) { assert.Empty(t, d.Status.Progress) },
		},
		"a running conversion holds the transfer's share": {
			m: newMigration(builders.Reached(v1alpha1.PhaseConverting)), obs: newObs(conversionJob(JobObservation{Name: conv1})),
			phase: v1alpha1.PhaseConverting, now: time.Second,
			check: func(t *testing.T, d Decision) { assert.Equal(t, "70%", d.Status.Progress) },
		},
		"succeeded: 100%": {
			m: newMigration(builders.Reached(v1alpha1.PhaseSucceeded)), obs: newObs(),
			phase: v1alpha1.PhaseSucceeded,
			check: func(t *testing.T, d Decision) { assert.Equal(t, "100%", d.Status.Progress) },
		},
	})
}
