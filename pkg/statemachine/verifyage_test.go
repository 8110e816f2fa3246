package statemachine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/test/builders"
)

// startingVerified is a migration in Starting whose target disks were
// read back (verification attempt 1) at t0-ago, each equal to its
// converted image, changed by opts.
func startingVerified(ago time.Duration, opts ...builders.MigrationMod) *v1alpha1.VirtualMachineMigration {
	sums := convertedSums()
	return newMigration(append([]builders.MigrationMod{builders.Reached(v1alpha1.PhaseStarting), builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
		s.Verification = &v1alpha1.JobStatus{JobName: verify1, Attempt: 1, CompletedAt: builders.TP(-ago)}
		for i := range s.Disks {
			s.Disks[i].Checksums = &v1alpha1.DiskChecksums{Converted: sums[i].SHA256, ConvertedBytes: sums[i].Size,
				Target: sums[i].SHA256, TargetBytes: sums[i].Size + (1 << 20), VerifiedAt: builders.TP(-ago)}
		}
	})}, opts...)...)
}

// TestVerificationAgesBeforeTheStart: the chain's claim must hold for
// the bytes the VM starts on. A start that comes later than
// VerificationMaxAge after the target disks were read back (the VM's
// creation held, a pause) reads them back again first; bytes that
// changed meanwhile fail the migration with the VM never started.
func TestVerificationAgesBeforeTheStart(t *testing.T) {
	verify2 := naming.VerificationJob(builders.Name, 2)
	halted := targetVM(true, RunStrategyHalted)
	owned := dataVolumes(DataVolumeSucceeded, "100.0%", true)
	reverifying := func(opts ...builders.MigrationMod) *v1alpha1.VirtualMachineMigration {
		return startingVerified(time.Hour, append([]builders.MigrationMod{builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
			s.Verification = &v1alpha1.JobStatus{JobName: verify2, Attempt: 2}
		})}, opts...)...)
	}
	changed := targetSums(convertedSums())
	changed[0].SHA256 = "written-after-the-verification"
	runCases(t, map[string]decideCase{
		"verified within the bound: started": {
			m: startingVerified(5 * time.Minute), obs: newObs(sourceOff, halted, owned),
			phase: v1alpha1.PhaseStarting, action: ActionStartVM, name: builders.DefaultTarget,
			check: func(t *testing.T, d Decision) {
				wantTime(t, "startRequestedAt", d.Status.Target.StartRequestedAt, 0)
				assert.Equal(t, int32(1), d.Status.Verification.Attempt)
			},
		},
		"verified longer ago than the bound: read back again before the start": {
			m: startingVerified(11 * time.Minute), obs: newObs(sourceOff, halted, owned),
			phase: v1alpha1.PhaseStarting, action: ActionCreateVerificationJob, name: verify2,
			check: func(t *testing.T, d Decision) {
				assert.Nil(t, d.Status.Target.StartRequestedAt, "not started on bytes read 11 minutes ago")
				assert.Equal(t, int32(2), d.Status.Verification.Attempt)
				assert.Nil(t, d.Status.Verification.CompletedAt)
				assert.Contains(t, eventReasons(d), ReasonVerificationAged)
				c := cond(t, d, ConditionProgressing)
				assert.Contains(t, c.Message, "verifying the target disks (job "+verify2)
				assert.Zero(t, d.Status.Retries, "ageing is no failure: no retry spent")
			},
		},
		"verified again, running: the start waits": {
			m: reverifying(), obs: newObs(sourceOff, halted, owned, verificationJob(verify2)),
			phase: v1alpha1.PhaseStarting, action: ActionNone,
			check: func(t *testing.T, d Decision) { assert.Nil(t, d.Status.Target.StartRequestedAt) },
		},
		"verified again, equal: recorded, the Job removed before the start": {
			m: reverifying(), obs: newObs(sourceOff, halted, owned, verificationJob(verify2, readBack(targetSums(convertedSums())))),
			phase: v1alpha1.PhaseStarting, action: ActionDeleteJob, name: verify2,
			check: func(t *testing.T, d Decision) {
				wantTime(t, "verification.completedAt", d.Status.Verification.CompletedAt, 0)
				for i, disk := range d.Status.Disks {
					wantTime(t, "verifiedAt", disk.Checksums.VerifiedAt, 0)
					assert.Equal(t, convertedSums()[i].SHA256, disk.Checksums.Target)
				}
				assert.Nil(t, d.Status.Target.StartRequestedAt)
			},
		},
		"verified again and the Job gone: started": {
			m: reverifying(builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
				s.Verification.CompletedAt = builders.TP(-time.Second)
			})),
			obs:   newObs(sourceOff, halted, owned),
			phase: v1alpha1.PhaseStarting, action: ActionStartVM, name: builders.DefaultTarget,
		},
		"verified again, the bytes changed since: failed, the VM never started": {
			m: reverifying(), obs: newObs(sourceOff, halted, owned, verificationJob(verify2, readBack(changed))),
			phase: v1alpha1.PhaseRollingBack,
			check: func(t *testing.T, d Decision) {
				wantLastError(t, d, v1alpha1.PhaseStarting, ReasonChecksumMismatch)
				assert.Contains(t, d.Status.LastError.Message, "the VM was not started")
				assert.Nil(t, d.Status.Target.StartRequestedAt)
			},
		},
		"the start already requested: asked again, the verification not renewed": {
			m: startingVerified(time.Hour, builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
				s.Target.StartRequestedAt = builders.TP(-50 * time.Minute)
			})),
			obs:   newObs(halted, owned),
			phase: v1alpha1.PhaseStarting, action: ActionStartVM, name: builders.DefaultTarget,
		},
		"an earlier verification's pod still there: the new one waits": {
			m: startingVerified(11 * time.Minute), obs: newObs(sourceOff, halted, owned, workerPod(verify1, true)),
			phase: v1alpha1.PhaseStarting, action: ActionNone,
			check: func(t *testing.T, d Decision) { assert.Nil(t, d.Status.Target.StartRequestedAt) },
		},
	})
}

// TestVerificationMaxAgeIsConfigured: the bound is the controller's.
func TestVerificationMaxAgeIsConfigured(t *testing.T) {
	in := Input{Migration: startingVerified(21 * time.Minute), Now: builders.At(0),
		Observation: newObs(sourceOff, targetVM(true, RunStrategyHalted), dataVolumes(DataVolumeSucceeded, "100.0%", true)),
		Config:      Config{VerificationMaxAge: 30 * time.Minute}}
	d := Decide(in)
	require.Equal(t, ActionStartVM, d.Action.Type, "21 minutes is within a 30 minute bound")
	in.Config.VerificationMaxAge = 20 * time.Minute
	d = Decide(in)
	assert.Equal(t, ActionCreateVerificationJob, d.Action.Type, "21 minutes is past a 20 minute bound")
}
