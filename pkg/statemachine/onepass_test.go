package statemachine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/test/builders"
)

// inPlaceAt is a migration in phase p whose disks were written in place
// and hashed by a conversion that completed convertedAgo before T0.
func inPlaceAt(p v1alpha1.Phase, convertedAgo time.Duration, opts ...builders.MigrationMod) *v1alpha1.VirtualMachineMigration {
	sums := convertedSums()
	return newMigration(append([]builders.MigrationMod{builders.Reached(p), builders.InPlace, builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
		s.Conversion.CompletedAt = builders.TP(-convertedAgo)
		for i := range s.Disks {
			s.Disks[i].Checksums = &v1alpha1.DiskChecksums{Converted: sums[i].SHA256, ConvertedBytes: sums[i].Size}
		}
	})}, opts...)...)
}

// targetClaimsSeen lists the target claims of disks written in place.
func targetClaimsSeen(names ...string) obsOpt {
	return func(o *Observation) { o.Children.TargetClaims = refs(KindPersistentVolumeClaim, names...) }
}

// pausedSince records the Paused condition's flip to status at d before T0.
func pausedSince(status metav1.ConditionStatus, d time.Duration) builders.MigrationMod {
	return builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
		s.Conditions = append(s.Conditions, metav1.Condition{Type: ConditionPaused, Status: status, Reason: ReasonPaused, LastTransitionTime: builders.At(-d)})
	})
}

// TestOnePassImport: disks written in place are imported by DataVolumes
// that adopt their claims, and verified by the conversion's read unless
// a read is owed; a claim gone before its adoption fails the migration.
func TestOnePassImport(t *testing.T) {
	populated := dataVolumes(DataVolumeSucceeded, "N/A", false)
	runCases(t, map[string]decideCase{
		"claims there, no DataVolume: create them": {
			m: inPlaceAt(v1alpha1.PhaseImporting, time.Minute), obs: newObs(targetClaimsSeen(dvNames()...)),
			phase: v1alpha1.PhaseImporting, action: ActionCreateDataVolumes,
		},
		"a claim gone before its DataVolume: TargetClaimLost, no DataVolume made": {
			m: inPlaceAt(v1alpha1.PhaseImporting, time.Minute), obs: newObs(targetClaimsSeen(dvNames()[0])),
			phase: v1alpha1.PhaseRollingBack,
			check: func(t *testing.T, d Decision) {
				wantLastError(t, d, v1alpha1.PhaseImporting, ReasonTargetClaimLost)
				assert.Contains(t, d.Status.LastError.Message, "disk-1 (claim "+dvNames()[1]+")")
				assert.NotContains(t, d.Status.LastError.Message, "disk-0 (claim")
			},
		},
		"adopted: no read, the converted checksum is the target's": {
			m: inPlaceAt(v1alpha1.PhaseImporting, time.Minute), obs: newObs(targetClaimsSeen(dvNames()...), populated),
			phase: v1alpha1.PhaseCreatingVM,
			check: func(t *testing.T, d Decision) {
				assert.Nil(t, d.Status.Verification, "no verification Job")
				for _, disk := range d.Status.Disks {
					assert.Equal(t, disk.Checksums.Converted, disk.Checksums.Target, "disk %s", disk.Name)
					wantTime(t, "verifiedAt", disk.Checksums.VerifiedAt, -time.Minute)
				}
				assert.Contains(t, evidenceFor(d.Status, v1alpha1.PhaseImporting).Observed, "2 DataVolumes populated; adopting the claims the transfer wrote and the conversion hashed, unread since, with no copy")
			},
		},
		"paused after the conversion's read: read again": {
			m:     inPlaceAt(v1alpha1.PhaseImporting, time.Minute, pausedSince(metav1.ConditionFalse, 30*time.Second)),
			obs:   newObs(targetClaimsSeen(dvNames()...), populated),
			phase: v1alpha1.PhaseImporting, action: ActionCreateVerificationJob, name: verify1,
			check: func(t *testing.T, d Decision) {
				assert.Contains(t, eventReasons(d), ReasonTargetsReadAgain)
				require.NotNil(t, d.Status.Verification)
				assert.Equal(t, int32(1), d.Status.Verification.Attempt)
			},
		},
		"paused before the conversion's read: no read": {
			m:     inPlaceAt(v1alpha1.PhaseImporting, time.Minute, pausedSince(metav1.ConditionFalse, time.Hour)),
			obs:   newObs(targetClaimsSeen(dvNames()...), populated),
			phase: v1alpha1.PhaseCreatingVM,
		},
		"the conversion's read older than the bound: read again": {
			m: inPlaceAt(v1alpha1.PhaseImporting, 11*time.Minute), obs: newObs(targetClaimsSeen(dvNames()...), populated),
			phase: v1alpha1.PhaseImporting, action: ActionCreateVerificationJob, name: verify1,
			check: func(t *testing.T, d Decision) { assert.Contains(t, eventReasons(d), ReasonVerificationAged) },
		},
		"a disk the conversion did not hash: read": {
			m: inPlaceAt(v1alpha1.PhaseImporting, time.Minute, builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
				s.Disks[1].Checksums = nil
			})),
			obs:   newObs(targetClaimsSeen(dvNames()...), populated),
			phase: v1alpha1.PhaseImporting, action: ActionCreateVerificationJob, name: verify1,
		},
		"that read is the only one of the converted image: compared with nothing": {
			m: inPlaceAt(v1alpha1.PhaseImporting, time.Minute, builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
				s.Disks[1].Checksums = nil
				s.Verification = &v1alpha1.JobStatus{JobName: verify1, Attempt: 1}
			})),
			obs:   newObs(targetClaimsSeen(dvNames()...), populated, verificationJob(verify1, readBack(targetSums(convertedSums())))),
			phase: v1alpha1.PhaseImporting, action: ActionDeleteJob, name: verify1,
			check: func(t *testing.T, d Decision) {
				disk := d.Status.Disks[1]
				require.NotNil(t, disk.Checksums)
				assert.Equal(t, convertedSums()[1].SHA256, disk.Checksums.Converted)
				assert.Equal(t, disk.Checksums.Converted, disk.Checksums.Target, "one read, recorded as both")
				assert.Equal(t, v1alpha1.ComparedReadOnce, disk.Checksums.Compared, "and said to be one read")
				assert.Nil(t, disk.Checksums.VerifiedAt, "never verified against itself")
				other := d.Status.Disks[0].Checksums
				assert.Equal(t, v1alpha1.ComparedConvertedAndTarget, other.Compared, "the disk the conversion hashed: two reads compared")
				assert.NotNil(t, other.VerifiedAt)
			},
		},
	})
}

// TestOnePassStart: a start long after the conversion's read (the VM's
// creation held) reads the disks written in place again first.
func TestOnePassStart(t *testing.T) {
	halted := targetVM(true, RunStrategyHalted)
	owned := dataVolumes(DataVolumeSucceeded, "N/A", true)
	verified := func(ago time.Duration) builders.MigrationMod {
		return builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
			for i := range s.Disks {
				c := s.Disks[i].Checksums
				c.Target, c.TargetBytes, c.VerifiedAt = c.Converted, c.ConvertedBytes, builders.TP(-ago)
			}
		})
	}
	runCases(t, map[string]decideCase{
		"read within the bound: started": {
			m: inPlaceAt(v1alpha1.PhaseStarting, 5*time.Minute, verified(5*time.Minute)), obs: newObs(sourceOff, halted, owned),
			phase: v1alpha1.PhaseStarting, action: ActionStartVM, name: builders.DefaultTarget,
		},
		"read longer ago than the bound: read again before the start": {
			m: inPlaceAt(v1alpha1.PhaseStarting, 11*time.Minute, verified(11*time.Minute)), obs: newObs(sourceOff, halted, owned),
			phase: v1alpha1.PhaseStarting, action: ActionCreateVerificationJob, name: verify1,
			check: func(t *testing.T, d Decision) {
				assert.Nil(t, d.Status.Target.StartRequestedAt, "not started on bytes read 11 minutes ago")
				assert.Contains(t, eventReasons(d), ReasonVerificationAged)
			},
		},
	})
}

// TestChainHoldsOnlyForWhatItRead (issue 46): the in-place shortcut
// vouches only for the claim the transfer wrote (its UID), bound under
// its DataVolume; a read is dated by when it began, so a pause during a
// read makes it stale.
func TestChainHoldsOnlyForWhatItRead(t *testing.T) {
	withClaim := func(c func(name string) *ClaimState) obsOpt {
		return func(o *Observation) {
			for n, dv := range o.DataVolumes {
				dv.Claim = c(n)
				o.DataVolumes[n] = dv
			}
		}
	}
	populated := dataVolumes(DataVolumeSucceeded, "N/A", false)
	readDuringPause := builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
		// The conversion's Job was created before the pause and
		// completed after the person resumed it.
		s.Conversion.CreatedAt = builders.TP(-10 * time.Minute)
	})
	runCases(t, map[string]decideCase{
		"the DataVolume's claim is a blank one CDI made: TargetClaimLost, no VM": {
			m: inPlaceAt(v1alpha1.PhaseImporting, time.Minute),
			obs: newObs(targetClaimsSeen(dvNames()...), populated, withClaim(func(n string) *ClaimState {
				return &ClaimState{UID: "made-blank-by-cdi", Bound: true, ControllerUID: ref(KindDataVolume, n).UID}
			})),
			phase: v1alpha1.PhaseRollingBack,
			check: func(t *testing.T, d Decision) {
				wantLastError(t, d, v1alpha1.PhaseImporting, ReasonTargetClaimLost)
				assert.Contains(t, d.Status.LastError.Message, "is UID made-blank-by-cdi, not the UID uid-"+dvNames()[0]+" the transfer wrote")
				for _, disk := range d.Status.Disks {
					assert.Nil(t, disk.Checksums.VerifiedAt, "%s: not verified", disk.Name)
				}
			},
		},
		"the DataVolume's claim is gone: TargetClaimLost": {
			m:     inPlaceAt(v1alpha1.PhaseImporting, time.Minute),
			obs:   newObs(targetClaimsSeen(dvNames()...), populated, withClaim(func(string) *ClaimState { return nil })),
			phase: v1alpha1.PhaseRollingBack,
			check: func(t *testing.T, d Decision) { wantLastError(t, d, v1alpha1.PhaseImporting, ReasonTargetClaimLost) },
		},
		"the claim written, not yet bound under its DataVolume: read, not vouched for": {
			m: inPlaceAt(v1alpha1.PhaseImporting, time.Minute),
			obs: newObs(targetClaimsSeen(dvNames()...), populated, withClaim(func(n string) *ClaimState {
				return &ClaimState{UID: types.UID("uid-" + n), Bound: true}
			})),
			phase: v1alpha1.PhaseImporting, action: ActionCreateVerificationJob, name: verify1,
			check: func(t *testing.T, d Decision) { assert.Contains(t, eventReasons(d), ReasonTargetsReadAgain) },
		},
		"no claim UID recorded (a status of an earlier version): read": {
			m: inPlaceAt(v1alpha1.PhaseImporting, time.Minute, builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
				for i := range s.Disks {
					s.Disks[i].TargetClaimUID = ""
				}
			})),
			obs:   newObs(targetClaimsSeen(dvNames()...), populated),
			phase: v1alpha1.PhaseImporting, action: ActionCreateVerificationJob, name: verify1,
		},
		"the conversion's read began before a pause that ended before it completed: read again": {
			m:     inPlaceAt(v1alpha1.PhaseImporting, time.Minute, readDuringPause, pausedSince(metav1.ConditionFalse, 5*time.Minute)),
			obs:   newObs(targetClaimsSeen(dvNames()...), populated),
			phase: v1alpha1.PhaseImporting, action: ActionCreateVerificationJob, name: verify1,
			check: func(t *testing.T, d Decision) { assert.Contains(t, eventReasons(d), ReasonTargetsReadAgain) },
		},
		"a verification read that began before a pause and ended after it: read again before the start": {
			m: inPlaceAt(v1alpha1.PhaseStarting, 20*time.Minute, pausedSince(metav1.ConditionFalse, 2*time.Minute), builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
				s.Verification = &v1alpha1.JobStatus{JobName: verify1, Attempt: 1, CreatedAt: builders.TP(-3 * time.Minute), CompletedAt: builders.TP(-time.Minute)}
				for i := range s.Disks {
					c := s.Disks[i].Checksums
					c.Target, c.TargetBytes, c.VerifiedAt, c.Compared = c.Converted, c.ConvertedBytes, builders.TP(-time.Minute), v1alpha1.ComparedConvertedAndTarget
				}
			})),
			obs:   newObs(sourceOff, targetVM(true, RunStrategyHalted), dataVolumes(DataVolumeSucceeded, "N/A", true)),
			phase: v1alpha1.PhaseStarting, action: ActionCreateVerificationJob, name: naming.VerificationJob(builders.Name, 2),
			check: func(t *testing.T, d Decision) {
				assert.Nil(t, d.Status.Target.StartRequestedAt, "not started on bytes a person could write during the pause")
				assert.Contains(t, eventReasons(d), ReasonTargetsReadAgain)
			},
		},
	})
}
