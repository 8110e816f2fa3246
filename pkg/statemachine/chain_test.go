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

// importedWith is a migration in Importing whose DataVolumes are named and
// whose conversion reported sums (nil: none), with the verification
// status given (nil: none yet).
func importedWith(sums []ImageChecksum, v *v1alpha1.JobStatus, opts ...builders.MigrationMod) *v1alpha1.VirtualMachineMigration {
	return newMigration(append([]builders.MigrationMod{builders.Reached(v1alpha1.PhaseImporting), builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
		for i := range s.Disks {
			s.Disks[i].DataVolume = dvNames()[i]
			for _, c := range sums {
				if c.Disk == s.Disks[i].Name {
					s.Disks[i].Checksums = &v1alpha1.DiskChecksums{Converted: c.SHA256, ConvertedBytes: c.Size}
				}
			}
		}
		s.Verification = v
	})}, opts...)...)
}

var verify1 = naming.VerificationJob(builders.Name, 1)

// verificationJob is a verification Job seen with its result.
func verificationJob(name string, mods ...func(*JobObservation)) obsOpt {
	return func(o *Observation) {
		o.VerificationJob = &JobObservation{Name: name, Ref: ref(KindJob, name)}
		for _, f := range mods {
			f(o.VerificationJob)
		}
	}
}

func readBack(sums []ImageChecksum) func(*JobObservation) {
	return func(j *JobObservation) { j.Succeeded, j.Checksums = true, sums }
}

func TestVerifyTargets(t *testing.T) {
	converted := convertedSums()
	populated := dataVolumes(DataVolumeSucceeded, "100.0%", false)
	corrupt := targetSums(converted)
	corrupt[1].SHA256 = "flipped-bytes"
	attempt1 := &v1alpha1.JobStatus{JobName: verify1, Attempt: 1}
	done := &v1alpha1.JobStatus{JobName: verify1, Attempt: 1, CompletedAt: builders.TP(-time.Second)}
	runCases(t, map[string]decideCase{
		"running": {
			m: importedWith(converted, attempt1), obs: newObs(populated, verificationJob(verify1)),
			phase: v1alpha1.PhaseImporting, requeue: DefaultPollInterval,
			check: func(t *testing.T, d Decision) {
				assert.Contains(t, d.Status.Conditions[1].Message, "verifying the target disks (job "+verify1+", attempt 1)")
			},
		},
		"every target holds the converted bytes: recorded, then the Job goes": {
			m: importedWith(converted, attempt1), obs: newObs(populated, verificationJob(verify1, readBack(targetSums(converted)))),
			phase: v1alpha1.PhaseImporting, action: ActionDeleteJob, name: verify1,
			check: func(t *testing.T, d Decision) {
				wantTime(t, "verification.completedAt", d.Status.Verification.CompletedAt, 0)
				for i, disk := range d.Status.Disks {
					assert.Equal(t, converted[i].SHA256, disk.Checksums.Target, "disk %d target checksum", i)
					assert.Equal(t, disk.CapacityBytes+(1<<20), disk.Checksums.TargetBytes, "disk %d target size (the claim's image is larger)", i)
					wantTime(t, "verifiedAt", disk.Checksums.VerifiedAt, 0)
				}
			},
		},
		"verified and the Job gone: CreatingVM, with the chain as evidence": {
			m: importedWith(converted, done), obs: newObs(populated),
			phase: v1alpha1.PhaseCreatingVM, requeue: time.Millisecond,
			check: func(t *testing.T, d Decision) {
				wantEvidence(t, d, v1alpha1.PhaseImporting, 0)
				assert.Contains(t, evidenceFor(d.Status, v1alpha1.PhaseImporting).Observed, "job "+verify1+" read back 2 target disks, each equal to the checksum of its converted image")
			},
		},
		"verified, the Job still there: deleted again": {
			m: importedWith(converted, done), obs: newObs(populated, verificationJob(verify1, readBack(targetSums(converted)))),
			phase: v1alpha1.PhaseImporting, action: ActionDeleteJob, name: verify1,
		},
		"a target that does not hold the converted bytes fails the migration before the VM exists": {
			m: importedWith(converted, attempt1), obs: newObs(populated, verificationJob(verify1, readBack(corrupt))),
			phase: v1alpha1.PhaseRollingBack,
			check: func(t *testing.T, d Decision) {
				wantLastError(t, d, v1alpha1.PhaseImporting, ReasonChecksumMismatch)
				assert.Contains(t, d.Status.LastError.Message, "disk-1 (DataVolume "+dvNames()[1]+"): target sha256 flipped-bytes, converted "+converted[1].SHA256)
				assert.NotContains(t, d.Status.LastError.Message, "disk-0 ", "disk 0 is fine")
				assert.Equal(t, "flipped-bytes", d.Status.Disks[1].Checksums.Target, "the bytes found are evidence too")
				assert.Nil(t, d.Status.Disks[1].Checksums.VerifiedAt)
				assert.Zero(t, d.Status.Retries, "no retry: converting or importing again is not asked")
			},
		},
		"a failed Job is retried under a new name": {
			m: importedWith(converted, attempt1), obs: newObs(populated, verificationJob(verify1, func(j *JobObservation) { j.Failed, j.Message = true, "pod evicted" })),
			phase: v1alpha1.PhaseImporting,
			check: func(t *testing.T, d Decision) {
				assert.Equal(t, naming.VerificationJob(builders.Name, 2), d.Status.Verification.JobName)
				assert.Equal(t, int32(1), d.Status.Retries)
				wantLastError(t, d, v1alpha1.PhaseImporting, ReasonVerificationFailed)
			},
		},
		"a Job whose pod did not start within the pod start timeout: deleted, tried again under a new name": {
			m: importedWith(converted, attempt1),
			obs: newObs(populated, verificationJob(verify1, func(j *JobObservation) {
				j.CreatedAt = builders.At(-DefaultPodStartTimeout).Time
				j.StartProblem = &PodStartProblem{Reason: "ErrImagePull", Message: "pull access denied"}
			})),
			phase: v1alpha1.PhaseImporting, action: ActionDeleteJob, name: verify1,
			check: func(t *testing.T, d Decision) {
				assert.Equal(t, naming.VerificationJob(builders.Name, 2), d.Status.Verification.JobName)
				wantLastError(t, d, v1alpha1.PhaseImporting, ReasonPodNotStarted)
				assert.Contains(t, d.Status.LastError.Message, "did not start within 5m0s: ErrImagePull")
			},
		},
		"a Job whose pod has not started yet: waiting, saying why": {
			m: importedWith(converted, attempt1),
			obs: newObs(populated, verificationJob(verify1, func(j *JobObservation) {
				j.CreatedAt = builders.At(-time.Minute).Time
				j.StartProblem = &PodStartProblem{Reason: "ErrImagePull", Message: "pull access denied"}
			})),
			phase: v1alpha1.PhaseImporting, requeue: DefaultPollInterval,
			check: func(t *testing.T, d Decision) {
				assert.Contains(t, d.Status.Conditions[1].Message, "its pod has not started: ErrImagePull")
				assert.Zero(t, d.Status.Retries)
			},
		},
		"a failed Job with the budget spent": {
			m:     importedWith(converted, attempt1, builders.WithRetries(3)),
			obs:   newObs(populated, verificationJob(verify1, func(j *JobObservation) { j.Failed, j.Message = true, "permission denied" })),
			phase: v1alpha1.PhaseRollingBack,
			check: func(t *testing.T, d Decision) { wantLastError(t, d, v1alpha1.PhaseImporting, ReasonVerificationFailed) },
		},
		"a Job that gave no checksum for a disk is retried": {
			m: importedWith(converted, attempt1), obs: newObs(populated, verificationJob(verify1, readBack(targetSums(converted)[:1]))),
			phase: v1alpha1.PhaseImporting,
			check: func(t *testing.T, d Decision) {
				assert.Contains(t, d.Status.LastError.Message, "gave no checksum for disk-1")
				assert.Equal(t, int32(2), d.Status.Verification.Attempt)
			},
		},
		"a disk without converted checksum: its staged image read back stands for it": {
			m: importedWith(converted[:1], attempt1),
			obs: newObs(populated, verificationJob(verify1, readBack(append(targetSums(converted),
				ImageChecksum{Disk: "disk-1", Staged: true, Bytes: converted[1].Bytes, Size: converted[1].Size, SHA256: converted[1].SHA256})))),
			phase: v1alpha1.PhaseImporting, action: ActionDeleteJob,
			check: func(t *testing.T, d Decision) {
				assert.Equal(t, converted[1].SHA256, d.Status.Disks[1].Checksums.Converted, "converted checksum from the staged image")
				assert.NotNil(t, d.Status.Disks[1].Checksums.VerifiedAt)
			},
		},
		"a succeeded Job whose result is not in the cache yet": {
			m: importedWith(converted, attempt1),
			obs: newObs(populated, verificationJob(verify1, func(j *JobObservation) {
				j.Succeeded, j.ResultMissing, j.CompletedAt = true, true, builders.At(-time.Second).Time
			})),
			phase: v1alpha1.PhaseImporting, requeue: JobResultPoll,
		},
	})
}

// TestConvertedChecksums: a conversion's checksums and interfaces are
// recorded by disk name; a skipped conversion's are the transferred ones.
func TestConvertedChecksums(t *testing.T) {
	pins := []v1alpha1.InterfacePin{{MAC: "00:50:56:aa:bb:01", Name: "ens192", Source: v1alpha1.PinSourceAddress, Pinned: true}}
	m := newMigration(builders.Reached(v1alpha1.PhaseConverting), builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
		s.Conversion = conversionAttempt(builders.Name, 1)
	}))
	conv := naming.ConversionJob(builders.Name, 1)
	d := decide(m, newObs(func(o *Observation) {
		o.ConversionJob = &JobObservation{Name: conv, Succeeded: true, OperatingSystem: "debian 12.15",
			Checksums: convertedSums()[1:], Interfaces: pins}
	}))
	require.Equal(t, v1alpha1.PhaseImporting, d.Status.Phase)
	assert.Nil(t, d.Status.Disks[0].Checksums, "no line for disk 0: the verification reads its staged image")
	assert.Equal(t, convertedSums()[1].SHA256, d.Status.Disks[1].Checksums.Converted)
	assert.Equal(t, builders.DiskCap1, d.Status.Disks[1].Checksums.ConvertedBytes)
	assert.Equal(t, pins, d.Status.Conversion.Interfaces)

	skipped := newMigration(builders.SkipConversion, builders.Reached(v1alpha1.PhaseConverting))
	d = decide(skipped, newObs())
	require.Equal(t, v1alpha1.PhaseImporting, d.Status.Phase)
	for _, disk := range d.Status.Disks {
		assert.Equal(t, disk.SHA256, disk.Checksums.Converted, "skipped: converted = transferred")
		assert.Equal(t, disk.BytesTransferred, disk.Checksums.ConvertedBytes)
	}
}

// TestDriveCorruptTarget: disks written in place, whose bytes change
// after the conversion read them while the migration was paused: the
// pause makes a verification Job read the targets again before the VM
// is created, which fails the migration before any VM exists, and the
// rollback powers the source on again.
func TestDriveCorruptTarget(t *testing.T) {
	m := newMigration(builders.WithoutFinalizer)
	w := &world{sourceOn: true, jobs: map[string]bool{}, corruptTarget: true}
	m, now := driveTo(t, m, w, v1alpha1.PhaseImporting)
	m.Spec.Policy.Paused = true
	d := decideAt(m, w.observe(m), now)
	m = after(m, d)
	m.Spec.Policy.Paused = false
	m = driveFrom(t, m, w, now+time.Second)
	require.Equal(t, v1alpha1.PhaseFailed, m.Status.Phase)
	wantLastError(t, Decision{Status: m.Status}, v1alpha1.PhaseImporting, ReasonChecksumMismatch)
	assert.Nil(t, w.vm, "no VirtualMachine was created")
	assert.True(t, w.sourceOn, "the source is on again")
	assert.NotNil(t, m.Status.SourceControl.RestoredAt)
}

// TestDriveInPlaceNeedsNoVerificationRead: disks written in place reach
// Succeeded with no verification Job: each target's checksum is the one
// the conversion read, verified as of that read.
func TestDriveInPlaceNeedsNoVerificationRead(t *testing.T) {
	m := newMigration(builders.WithoutFinalizer)
	w := &world{sourceOn: true, jobs: map[string]bool{}, corruptTarget: true}
	m = drive(t, m, w)
	require.Equal(t, v1alpha1.PhaseSucceeded, m.Status.Phase, "the corruption the world would show is never read: no read is made")
	assert.Nil(t, m.Status.Verification, "no verification Job")
	for _, disk := range m.Status.Disks {
		assert.True(t, disk.WrittenInPlace(), "disk %s: %+v", disk.Name, disk)
		require.NotNil(t, disk.Checksums, "disk %s", disk.Name)
		assert.Equal(t, disk.Checksums.Converted, disk.Checksums.Target, "disk %s", disk.Name)
		assert.Equal(t, m.Status.Conversion.CompletedAt, disk.Checksums.VerifiedAt, "disk %s: verified as of the conversion's read", disk.Name)
	}
	assert.Contains(t, evidenceFor(m.Status, v1alpha1.PhaseImporting).Observed, "adopting the claims the transfer wrote and the conversion hashed, unread since, with no copy")
}

// driveTo drives a migration as drive does until it reaches phase p; it
// returns the migration and the time of the next decision.
func driveTo(t *testing.T, m *v1alpha1.VirtualMachineMigration, w *world, p v1alpha1.Phase) (*v1alpha1.VirtualMachineMigration, time.Duration) {
	t.Helper()
	now := time.Duration(0)
	for step := 0; step < 500; step++ {
		d := decideAt(m, w.observe(m), now)
		m = after(m, d)
		w.apply(m, d.Action)
		now += max(d.RequeueAfter, time.Second)
		if m.Status.Phase == p {
			return m, now
		}
	}
	require.FailNow(t, "phase not reached after 500 decisions", "want %s, phase %s", p, m.Status.Phase)
	return nil, 0
}
