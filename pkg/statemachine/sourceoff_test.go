package statemachine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/test/builders"
)

// Phases in which the source is off: each has a deadline, and says so in
// a condition when it waits.

// TestStartDeadlineCountsFromTheStartRequest: the start timeout counts
// from when the target was asked to run, not from entering Starting: a
// pre-start check that waited (an unreachable vSphere, a pause) longer
// than the start timeout must not fail the migration the moment the VM
// was started (and so halt a target that was just started).
func TestStartDeadlineCountsFromTheStartRequest(t *testing.T) {
	requested := func(phaseFor, requestedFor time.Duration) *v1alpha1.VirtualMachineMigration {
		return newMigration(builders.Reached(v1alpha1.PhaseStarting), builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
			s.PhaseStartTime = builders.TP(-phaseFor)
			s.Target.StartRequestedAt = builders.TP(-requestedFor)
			s.Target.VMIPhase = "Scheduling"
		}))
	}
	scheduling := newObs(targetVM(true, RunStrategyAlways), targetVMI("Scheduling", false))
	runCases(t, map[string]decideCase{
		"15 minutes in Starting, asked to run a minute ago: keep waiting": {
			m: requested(15*time.Minute, time.Minute), obs: scheduling,
			phase: v1alpha1.PhaseStarting,
			check: func(t *testing.T, d Decision) {
				assert.Nil(t, d.Status.LastError, "failed a VM asked to run a minute ago")
				assert.Equal(t, DefaultPollInterval, d.RequeueAfter, "look again after a poll")
			},
		},
		"asked to run 9m55s ago: look again when the 10 minutes are up": {
			m: requested(15*time.Minute, 9*time.Minute+55*time.Second), obs: scheduling,
			phase: v1alpha1.PhaseStarting, requeue: 5 * time.Second,
		},
		"asked to run 10 minutes ago: StartTimeout": {
			m: requested(15*time.Minute, 10*time.Minute), obs: scheduling,
			phase: v1alpha1.PhaseRollingBack,
			check: func(t *testing.T, d Decision) { wantLastError(t, d, v1alpha1.PhaseStarting, ReasonStartTimeout) },
		},
	})
}

// importingWith is a migration in Importing whose retry deadline passes
// at T0+deadlineIn, its last import progress seen at T0-idle.
func importingWith(deadlineIn, idle time.Duration) *v1alpha1.VirtualMachineMigration {
	return newMigration(builders.Reached(v1alpha1.PhaseImporting), builders.RetryDeadline(time.Hour+deadlineIn),
		builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
			s.LastProgressTime = builders.TP(-idle)
			for i := range s.Disks {
				s.Disks[i].ImportPhase, s.Disks[i].ImportProgress = "Pending", ""
			}
		}))
}

// TestImportingHasADeadline: DataVolumes that stay Pending (a quota, a
// storage class that cannot provision) keep the migration waiting with a
// condition that names them, and fail it to rollback once the retry
// deadline passed with no import progress for the stall timeout.
func TestImportingHasADeadline(t *testing.T) {
	const quota = `ErrExceededQuota: persistentvolumeclaims is forbidden: exceeded quota: storage`
	pending := newObs(dataVolumes("Pending", "N/A", false), func(o *Observation) {
		for name, dv := range o.DataVolumes {
			dv.Message = quota
			o.DataVolumes[name] = dv
		}
	})
	runCases(t, map[string]decideCase{
		"pending before the deadline: wait, and say which DataVolumes": {
			m: importingWith(time.Hour, time.Minute), obs: pending,
			phase: v1alpha1.PhaseImporting,
			check: func(t *testing.T, d Decision) {
				c := cond(t, d, ConditionProgressing)
				assert.Equal(t, metav1.ConditionFalse, c.Status, "Progressing while the DataVolumes wait: %+v", c)
				assert.Equal(t, ReasonDataVolumesPending, c.Reason)
				for _, dv := range dvNames() {
					assert.Contains(t, c.Message, dv+" (Pending): "+quota, "the condition names the pending DataVolume and quotes CDI")
				}
				assert.Contains(t, c.Message, "fails if no import progress is seen by "+builders.At(time.Hour).UTC().Format(time.RFC3339), "the condition says when it fails")
			},
		},
		"pending for a moment, as in every import: working": {
			m: importingWith(time.Hour, 10*time.Second), obs: pending,
			phase: v1alpha1.PhaseImporting,
			check: func(t *testing.T, d Decision) {
				c := wantCond(t, d, ConditionProgressing, metav1.ConditionTrue, ReasonWorking)
				assert.Equal(t, "importing disks: 0 of 2 DataVolumes populated", c.Message)
			},
		},
		"pending past the deadline, no progress for the stall timeout: fail to rollback": {
			m: importingWith(-time.Minute, 31*time.Minute), obs: pending,
			phase: v1alpha1.PhaseRollingBack,
			check: func(t *testing.T, d Decision) {
				e := d.Status.LastError
				if assert.NotNil(t, e, "lastError") {
					assert.Equal(t, v1alpha1.PhaseImporting, e.Phase)
					assert.Equal(t, ReasonImportTimedOut, e.Reason)
					assert.Contains(t, e.Message, dvNames()[0]+" (Pending): "+quota, "the failure names the DataVolume and quotes CDI")
				}
				// Failed turns True only once the rollback restored the source:
				// until then Ready says why the migration is rolling back.
				c := wantCond(t, d, ConditionReady, metav1.ConditionFalse, ReasonImportTimedOut)
				assert.Contains(t, c.Message, quota, "the Ready condition quotes CDI")
			},
		},
		"pending past the deadline, but a phase changed a minute ago: wait for the stall timeout": {
			m: importingWith(-time.Minute, time.Minute), obs: pending,
			phase: v1alpha1.PhaseImporting,
		},
		"importing past the deadline, progress seen: keep going": {
			m: importingWith(-time.Minute, 31*time.Minute), obs: newObs(dataVolumes("CloneInProgress", "45.00%", false)),
			phase: v1alpha1.PhaseImporting,
			check: func(t *testing.T, d Decision) {
				wantCond(t, d, ConditionProgressing, metav1.ConditionTrue, ReasonWorking)
			},
		},
	})
}

// TestTransferWithoutProgressPastTheDeadlineFails: a transfer Job that
// shows no progress (its pod cannot start, its stream hangs) fails the
// migration once the retry deadline passed and the stall timeout too,
// rather than leaving the source off until the Job's own deadline.
func TestTransferWithoutProgressPastTheDeadlineFails(t *testing.T) {
	transferring := func(deadlineIn, idle time.Duration) *v1alpha1.VirtualMachineMigration {
		return newMigration(builders.Reached(v1alpha1.PhaseTransferringDisks), builders.RetryDeadline(time.Hour+deadlineIn),
			builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
				s.Transfer = &v1alpha1.JobStatus{JobName: naming.TransferJob(builders.Name, 1), Attempt: 1}
				s.LastProgressTime = builders.TP(-idle)
			}))
	}
	running := newObs(claims(stagingClaims()...), transferJob(JobObservation{Name: naming.TransferJob(builders.Name, 1)}))
	runCases(t, map[string]decideCase{
		"before the deadline: keep transferring": {
			m: transferring(time.Hour, 40*time.Minute), obs: running, phase: v1alpha1.PhaseTransferringDisks,
		},
		"past the deadline, progress a minute ago: keep transferring": {
			m: transferring(-time.Minute, time.Minute), obs: running, phase: v1alpha1.PhaseTransferringDisks,
		},
		"past the deadline, no progress for the stall timeout: fail": {
			m: transferring(-time.Minute, 31*time.Minute), obs: running, phase: v1alpha1.PhaseRollingBack,
			check: func(t *testing.T, d Decision) {
				assert.Equal(t, v1alpha1.PhaseTransferringDisks, d.Status.LastError.Phase, "lastError %+v", d.Status.LastError)
			},
		},
	})
}

// failedConversion is a migration in Converting whose conversion Job
// (attempt 1) failed, with retries left.
func failedConversion(mods ...builders.MigrationMod) (*v1alpha1.VirtualMachineMigration, obsOpt) {
	m := newMigration(append([]builders.MigrationMod{builders.Reached(v1alpha1.PhaseConverting),
		builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
			s.Conversion = conversionAttempt(builders.Name, 1)
		})}, mods...)...)
	return m, conversionJob(JobObservation{Name: naming.ConversionJob(builders.Name, 1), Failed: true, Message: "virt-v2v crashed"})
}

// TestConversionRetryWaitsForASlotWithACondition: after a failed
// conversion the disks are transferred again, which takes a transfer
// slot. With the host's slots full the migration waits, with a condition
// saying so (the source is off the whole time), until a slot frees or the
// retry deadline passes.
func TestConversionRetryWaitsForASlotWithACondition(t *testing.T) {
	m, failedJob := failedConversion()
	waiting := func(t *testing.T, d Decision) {
		wantCond(t, d, ConditionProgressing, metav1.ConditionFalse, ReasonWaitingForTransferSlot)
		assert.Equal(t, int32(1), d.Status.Retries, "the retry is spent once")
	}
	runCases(t, map[string]decideCase{
		"slot free: transfer again at once": {
			m: m, obs: newObs(failedJob, slot(true)),
			phase: v1alpha1.PhaseTransferringDisks,
			check: func(t *testing.T, d Decision) {
				assert.Equal(t, int32(2), d.Status.Transfer.Attempt, "a fresh transfer attempt")
			},
		},
		"slots full: wait in Converting with a condition": {
			m: m, obs: newObs(failedJob, slot(false)),
			phase: v1alpha1.PhaseConverting, check: waiting,
		},
		"waiting, slots still full: keep waiting, the retry spent once": {
			m: after(m, decide(m, newObs(failedJob, slot(false)))), obs: newObs(slot(false)),
			phase: v1alpha1.PhaseConverting, requeue: DefaultWaitInterval, check: waiting,
		},
		"waiting, a slot frees: transfer again": {
			m: after(m, decide(m, newObs(failedJob, slot(false)))), obs: newObs(slot(true)),
			phase: v1alpha1.PhaseTransferringDisks, requeue: ms,
			check: func(t *testing.T, d Decision) {
				assert.Equal(t, int32(1), d.Status.Retries, "the retry is spent once")
				assert.Equal(t, int32(2), d.Status.Transfer.Attempt, "a fresh transfer attempt")
				assert.Equal(t, int32(2), d.Status.Conversion.Attempt, "then a fresh conversion attempt")
			},
		},
		"waiting past the retry deadline: fail, the rollback restores the source": {
			m: after(m, decide(m, newObs(failedJob, slot(false)))), obs: newObs(slot(false)), now: 23 * time.Hour,
			phase: v1alpha1.PhaseRollingBack,
			check: func(t *testing.T, d Decision) { wantLastError(t, d, v1alpha1.PhaseConverting, ReasonRetryBudgetSpent) },
		},
	})
}
