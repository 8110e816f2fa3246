package statemachine

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/test/builders"
)

func TestTransferringDisks(t *testing.T) {
	m := func(opts ...builders.MigrationMod) *v1alpha1.VirtualMachineMigration {
		return newMigration(append([]builders.MigrationMod{builders.Reached(v1alpha1.PhaseTransferringDisks)}, opts...)...)
	}
	job1 := naming.TransferJob(builders.Name, 1)
	job2 := naming.TransferJob(builders.Name, 2)
	withTransfer := builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
		s.Transfer = &v1alpha1.JobStatus{JobName: job1, Attempt: 1}
	})
	running := func(p ...DiskProgress) obsOpt { return transferJob(JobObservation{Name: job1, Progress: p}) }
	halfway := []DiskProgress{
		{Key: builders.DiskKey0, BytesDone: 5 << 30, BytesTotal: builders.DiskCap0, RateBytesPerSecond: 100 << 20},
		{Key: builders.DiskKey1, BytesDone: 5 << 30, BytesTotal: builders.DiskCap1, RateBytesPerSecond: 100 << 20},
	}
	succeeded := func(r []DiskResult) obsOpt {
		return transferJob(JobObservation{Name: job1, Succeeded: true, Results: r})
	}
	retried := func(reason string) func(*testing.T, Decision) {
		return func(t *testing.T, d Decision) {
			assert.Equal(t, int32(1), d.Status.Retries, "retries, want one spent")
			wantLastError(t, d, v1alpha1.PhaseTransferringDisks, reason)
			tr := d.Status.Transfer
			require.NotNil(t, tr, "transfer, want attempt 2 named %s", job2)
			assert.Equal(t, job2, tr.JobName, "transfer = %+v, want attempt 2 named %s", tr, job2)
			assert.Equal(t, int32(2), tr.Attempt, "transfer = %+v, want attempt 2 named %s", tr, job2)
			assert.Nil(t, tr.CompletedAt, "transfer = %+v, want attempt 2 named %s, not completed", tr, job2)
			for _, disk := range d.Status.Disks {
				assert.Zero(t, disk.BytesTransferred, "disk %d keeps evidence (bytes) of the failed attempt: %+v", disk.Key, disk)
				assert.Empty(t, disk.SHA256, "disk %d keeps evidence (checksum) of the failed attempt: %+v", disk.Key, disk)
				assert.Nil(t, disk.TransferredAt, "disk %d keeps evidence (transferredAt) of the failed attempt: %+v", disk.Key, disk)
			}
			assert.Contains(t, eventReasons(d), ReasonRetrying, "want a Retrying event: %+v", d.Events)
			assert.Equal(t, "0%", d.Status.Progress, "progress after a failed attempt")
			assert.Nil(t, evidenceFor(d.Status, v1alpha1.PhaseTransferringDisks), "evidence recorded for a failed transfer")
		}
	}
	budgetSpent := func(reason, why string) func(*testing.T, Decision) {
		return func(t *testing.T, d Decision) {
			wantLastError(t, d, v1alpha1.PhaseTransferringDisks, reason)
			assert.Contains(t, d.Status.LastError.Message, why, "lastError says why the budget is spent")
		}
	}
	badResults := func(f func(r []DiskResult) []DiskResult) []DiskResult { return f(goodResults()) }
	runCases(t, map[string]decideCase{
		"disks initialised from the inventory, staging claims created": {
			m:     m(builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) { s.Disks = nil })),
			obs:   newObs(),
			phase: v1alpha1.PhaseTransferringDisks, action: ActionCreateStagingClaims, requeue: DefaultPollInterval,
			check: func(t *testing.T, d Decision) {
				assertSemanticEqual(t, initialDisks(), d.Status.Disks, "disks, want them initialised from the inventory")
				assert.Nil(t, d.Status.Transfer, "transfer recorded before its volumes exist")
			},
		},
		"one staging claim missing": {
			m: m(), obs: newObs(claims(stagingClaims()[1])),
			phase: v1alpha1.PhaseTransferringDisks, action: ActionCreateStagingClaims,
		},
		"no job: create attempt 1": {
			m: m(), obs: newObs(claims(stagingClaims()...)),
			phase: v1alpha1.PhaseTransferringDisks, action: ActionCreateTransferJob, name: job1, requeue: DefaultPollInterval,
			check: func(t *testing.T, d Decision) {
				assert.Equal(t, int32(1), d.Action.Attempt, "action %+v: want attempt 1 named %s", d.Action, job1)
				if assert.NotNil(t, d.Status.Transfer, "transfer: want attempt 1 named %s", job1) {
					assert.Equal(t, job1, d.Status.Transfer.JobName, "transfer %+v: want attempt 1 named %s", d.Status.Transfer, job1)
				}
			},
		},
		"running: progress, rate, ETA and overall percentage": {
			m: m(withTransfer), obs: newObs(claims(stagingClaims()...), running(halfway...)),
			phase: v1alpha1.PhaseTransferringDisks, requeue: DefaultPollInterval,
			check: func(t *testing.T, d Decision) {
				d0, d1 := d.Status.Disks[0], d.Status.Disks[1]
				assert.Equal(t, int64(5<<30), d0.BytesTransferred, "disk 0 = %+v, want 5 GiB at 100 MiB/s, ETA 52s", d0)
				assert.Equal(t, int64(100<<20), d0.RateBytesPerSecond, "disk 0 = %+v, want 5 GiB at 100 MiB/s, ETA 52s", d0)
				if assert.NotNil(t, d0.ETASeconds, "disk 0 = %+v, want 5 GiB at 100 MiB/s, ETA 52s", d0) {
					assert.Equal(t, int64(52), *d0.ETASeconds, "disk 0 ETA seconds")
				}
				if assert.NotNil(t, d1.ETASeconds, "disk 1 ETA, want 154s") {
					assert.Equal(t, int64(154), *d1.ETASeconds, "disk 1 ETA seconds")
				}
				assert.Equal(t, "23%", d.Status.Progress, "overall progress: a third of the bytes, a third of the transfer's 70%")
				wantTime(t, "lastProgressTime", d.Status.LastProgressTime, 0)
			},
		},
		"running: progress written at most once per interval": {
			m: m(withTransfer, builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
				s.LastProgressTime = builders.TP(-4 * time.Second)
			})),
			obs:   newObs(claims(stagingClaims()...), running(halfway...)),
			phase: v1alpha1.PhaseTransferringDisks, requeue: 6 * time.Second,
			check: func(t *testing.T, d Decision) {
				assert.Zero(t, d.Status.Disks[0].BytesTransferred, "progress written within the interval: %+v", d.Status.Disks[0])
				assert.Equal(t, "0%", d.Status.Progress, "progress written within the interval: the figure of the bytes status holds")
				wantTime(t, "lastProgressTime", d.Status.LastProgressTime, -4*time.Second)
			},
		},
		"running without bytes moved: nothing written": {
			m: m(withTransfer), obs: newObs(claims(stagingClaims()...), running()),
			phase: v1alpha1.PhaseTransferringDisks,
			check: func(t *testing.T, d Decision) {
				wantTime(t, "lastProgressTime", d.Status.LastProgressTime, -time.Minute)
			},
		},
		"succeeded with results for every disk: evidence, then Converting": {
			m: m(withTransfer), obs: newObs(claims(stagingClaims()...), succeeded(goodResults())),
			phase: v1alpha1.PhaseConverting, requeue: ms,
			check: func(t *testing.T, d Decision) {
				for i, disk := range d.Status.Disks {
					r := goodResults()[i]
					assert.Equal(t, r.Bytes, disk.BytesTransferred, "disk %d = %+v, want %+v", disk.Key, disk, r)
					assert.Equal(t, r.SHA256, disk.SHA256, "disk %d = %+v, want %+v", disk.Key, disk, r)
					wantTime(t, "transferredAt", disk.TransferredAt, 0)
				}
				wantTime(t, "transfer.completedAt", d.Status.Transfer.CompletedAt, 0)
				wantEvidence(t, d, v1alpha1.PhaseTransferringDisks, 0)
				assert.Equal(t, fmt.Sprintf("%d%%", ProgressTransferred), d.Status.Progress, "overall progress: the transfer's share")
			},
		},
		"succeeded, one disk allocated areas only: how each disk was read, in status and evidence": {
			m: m(withTransfer), obs: newObs(claims(stagingClaims()...), succeeded(badResults(func(r []DiskResult) []DiskResult {
				r[0].AllocatedOnly, r[0].AllocatedBytes, r[0].BytesRead = true, ptr.To[int64](3<<30), 3<<30
				r[1].BytesRead, r[1].FullCopyReason = r[1].Bytes, "changed block tracking is off on the VM"
				return r
			}))),
			phase: v1alpha1.PhaseConverting, requeue: ms,
			check: func(t *testing.T, d Decision) {
				d0, d1 := d.Status.Disks[0], d.Status.Disks[1]
				assert.True(t, d0.AllocatedOnly, "disk 0 = %+v", d0)
				assert.Equal(t, ptr.To[int64](3<<30), d0.AllocatedBytes, "disk 0 = %+v", d0)
				assert.Equal(t, int64(3<<30), d0.BytesRead, "disk 0 = %+v", d0)
				assert.False(t, d1.AllocatedOnly, "disk 1 = %+v", d1)
				assert.Equal(t, "changed block tracking is off on the VM", d1.FullCopyReason, "disk 1 = %+v", d1)
				ev := evidenceFor(d.Status, v1alpha1.PhaseTransferringDisks)
				require.NotNil(t, ev)
				assert.Contains(t, ev.Observed, fmt.Sprintf("read %d bytes from the source: disk %d allocated areas only (%d bytes in use), disk %d whole (changed block tracking is off on the VM)",
					3<<30+builders.DiskCap1, builders.DiskKey0, 3<<30, builders.DiskKey1))
			},
		},
		"succeeded with the wrong byte count: retry": {
			m: m(withTransfer),
			obs: newObs(claims(stagingClaims()...), succeeded(badResults(func(r []DiskResult) []DiskResult {
				r[1].Bytes--
				return r
			}))),
			phase: v1alpha1.PhaseTransferringDisks, requeue: ms, check: retried(ReasonTransferResultMismatch),
		},
		"succeeded without a disk's result: retry": {
			m:     m(withTransfer),
			obs:   newObs(claims(stagingClaims()...), succeeded(goodResults()[:1])),
			phase: v1alpha1.PhaseTransferringDisks, check: retried(ReasonTransferResultMismatch),
		},
		"succeeded, its result not in the caches yet: wait for it": {
			m: m(withTransfer),
			obs: newObs(claims(stagingClaims()...), transferJob(JobObservation{
				Name: job1, Succeeded: true, ResultMissing: true, CompletedAt: builders.At(-5 * time.Second).Time,
			})),
			now: 0, phase: v1alpha1.PhaseTransferringDisks, requeue: JobResultPoll,
			check: func(t *testing.T, d Decision) {
				assert.Zero(t, d.Status.Retries, "a result the caches have not caught up with spends no retry")
				assert.Nil(t, d.Status.LastError, "no error while the result is on its way")
				c := wantCond(t, d, ConditionProgressing, metav1.ConditionTrue, "")
				assert.Contains(t, c.Message, "completed; waiting for its result")
			},
		},
		"succeeded, no result long after its completion: retry": {
			m: m(withTransfer),
			obs: newObs(claims(stagingClaims()...), transferJob(JobObservation{
				Name: job1, Succeeded: true, ResultMissing: true, CompletedAt: builders.At(-JobResultGrace - time.Second).Time,
			})),
			phase: v1alpha1.PhaseTransferringDisks, check: retried(ReasonTransferResultMismatch),
		},
		"succeeded without a checksum: retry": {
			m: m(withTransfer),
			obs: newObs(claims(stagingClaims()...), succeeded(badResults(func(r []DiskResult) []DiskResult {
				r[0].SHA256 = ""
				return r
			}))),
			phase: v1alpha1.PhaseTransferringDisks, check: retried(ReasonTransferResultMismatch),
		},
		"failed: retry under a new job name": {
			m:     m(withTransfer),
			obs:   newObs(claims(stagingClaims()...), transferJob(JobObservation{Name: job1, Failed: true, Message: "connection reset"})),
			phase: v1alpha1.PhaseTransferringDisks, action: ActionNone, requeue: ms,
			check: func(t *testing.T, d Decision) {
				retried(ReasonTransferFailed)(t, d)
				assert.Contains(t, d.Status.LastError.Message, "connection reset", "lastError carries the job's message")
			},
		},
		"failed with the retry count spent": {
			m:     m(withTransfer, builders.WithRetries(3)),
			obs:   newObs(claims(stagingClaims()...), transferJob(JobObservation{Name: job1, Failed: true})),
			phase: v1alpha1.PhaseRollingBack,
			check: budgetSpent(ReasonTransferFailed, "3 of 3 retries spent"),
		},
		"failed with a custom retry limit of 0": {
			m:     m(withTransfer, builders.RetryLimit(0)),
			obs:   newObs(claims(stagingClaims()...), transferJob(JobObservation{Name: job1, Failed: true})),
			phase: v1alpha1.PhaseRollingBack,
			check: budgetSpent(ReasonTransferFailed, "0 of 0 retries spent"),
		},
		"failed past the retry deadline": {
			m:     m(withTransfer, builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) { s.StartTime = builders.TP(-25 * time.Hour) })),
			obs:   newObs(claims(stagingClaims()...), transferJob(JobObservation{Name: job1, Failed: true})),
			phase: v1alpha1.PhaseRollingBack,
			check: budgetSpent(ReasonTransferFailed, "retry deadline of 24h0m0s passed"),
		},
		"mismatch with the budget spent": {
			m:     m(withTransfer, builders.WithRetries(3)),
			obs:   newObs(claims(stagingClaims()...), succeeded(nil)),
			phase: v1alpha1.PhaseRollingBack,
			check: budgetSpent(ReasonTransferResultMismatch, "no result for disk 2000"),
		},
	})
}

func TestConverting(t *testing.T) {
	m := func(opts ...builders.MigrationMod) *v1alpha1.VirtualMachineMigration {
		return newMigration(append([]builders.MigrationMod{builders.Reached(v1alpha1.PhaseConverting)}, opts...)...)
	}
	conv1 := naming.ConversionJob(builders.Name, 1)
	withConversion := builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
		s.Conversion = conversionAttempt(builders.Name, 1)
	})
	failed := func(reason string) obsOpt {
		return conversionJob(JobObservation{Name: conv1, Failed: true, Reason: reason, Message: "virt-v2v: " + reason})
	}
	permanent := func(t *testing.T, d Decision) {
		wantLastError(t, d, v1alpha1.PhaseConverting, ReasonConversionFailed)
		assert.Zero(t, d.Status.Retries, "a permanent conversion failure spent a retry")
	}
	runCases(t, map[string]decideCase{
		"skipped by the spec": {
			m:     newMigration(builders.SkipConversion, builders.Reached(v1alpha1.PhaseConverting)),
			phase: v1alpha1.PhaseImporting, requeue: ms,
			check: func(t *testing.T, d Decision) {
				if c := d.Status.Conversion; assert.NotNil(t, c, "conversion, want skipped") {
					assert.True(t, c.Skipped, "conversion = %+v, want skipped", c)
					assert.Empty(t, c.JobName, "conversion = %+v, want skipped, without a job", c)
				}
				wantEvidence(t, d, v1alpha1.PhaseConverting, 0)
			},
		},
		"no job: create attempt 1 with its domain ConfigMap": {
			m:     m(),
			phase: v1alpha1.PhaseConverting, action: ActionCreateConversionJob, name: conv1, requeue: DefaultPollInterval,
			check: func(t *testing.T, d Decision) {
				c := d.Status.Conversion
				assert.Equal(t, int32(1), d.Action.Attempt, "action %+v, want attempt 1", d.Action)
				if assert.NotNil(t, c, "conversion, want attempt 1 recorded") {
					assert.Equal(t, conv1, c.JobName, "conversion %+v, want attempt 1", c)
					assert.Equal(t, naming.ConversionConfigMap(builders.Name, 1), c.ConfigMapName, "conversion %+v, want attempt 1's domain ConfigMap", c)
				}
			},
		},
		"running": {
			m: m(withConversion), obs: newObs(conversionJob(JobObservation{Name: conv1})),
			phase: v1alpha1.PhaseConverting, requeue: DefaultPollInterval,
		},
		"running, its creation seen: recorded (it dates what it reads)": {
			m: m(withConversion), obs: newObs(conversionJob(JobObservation{Name: conv1, CreatedAt: builders.At(-time.Minute).Time})),
			phase: v1alpha1.PhaseConverting, requeue: DefaultPollInterval,
			check: func(t *testing.T, d Decision) {
				wantTime(t, "conversion.createdAt", d.Status.Conversion.CreatedAt, -time.Minute)
			},
		},
		"the Job seen before is gone without a result: a failed attempt, transferred again, never run again over half-converted disks (issue 46)": {
			m: m(builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
				s.Conversion = conversionAttempt(builders.Name, 1)
				s.Conversion.CreatedAt = builders.TP(-time.Minute)
			})), obs: newObs(slot(true)),
			phase: v1alpha1.PhaseTransferringDisks,
			check: func(t *testing.T, d Decision) {
				assert.NotEqual(t, ActionCreateConversionJob, d.Action.Type, "not run again at the same attempt")
				wantLastError(t, d, v1alpha1.PhaseConverting, ReasonConversionFailed)
				assert.Contains(t, d.Status.LastError.Message, "is gone without a result")
				assert.Equal(t, int32(2), d.Status.Conversion.Attempt)
				assert.Equal(t, int32(2), d.Status.Transfer.Attempt, "the disks transferred again first")
			},
		},
		"inspection failed: fail at once": {
			m: m(withConversion), obs: newObs(failed(ConversionInspectionFailed)),
			phase: v1alpha1.PhaseRollingBack, check: permanent,
		},
		"unsupported guest: fail at once": {
			m: m(withConversion), obs: newObs(failed(ConversionUnsupportedGuest)),
			phase: v1alpha1.PhaseRollingBack, check: permanent,
		},
		"other failure, a transfer slot free: transfer again, then convert again": {
			m: m(withConversion, builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
				for i := range s.Disks {
					s.Disks[i].AllocatedOnly, s.Disks[i].AllocatedBytes, s.Disks[i].BytesRead = true, ptr.To[int64](1<<30), 1<<30
					s.Disks[i].FullCopyReason = "kept from the transfer before"
				}
			})), obs: newObs(failed(""), slot(true)),
			phase: v1alpha1.PhaseTransferringDisks, requeue: ms,
			check: func(t *testing.T, d Decision) {
				wantLastError(t, d, v1alpha1.PhaseConverting, ReasonConversionFailed)
				assert.Equal(t, int32(1), d.Status.Retries, "retries, want one spent")
				tr := d.Status.Transfer
				require.NotNil(t, tr, "transfer, want attempt 2")
				assert.Equal(t, int32(2), tr.Attempt, "transfer = %+v, want attempt 2", tr)
				assert.Equal(t, naming.TransferJob(builders.Name, 2), tr.JobName, "transfer = %+v, want attempt 2", tr)
				assert.Nil(t, tr.CompletedAt, "transfer = %+v, want attempt 2, not completed", tr)
				c := d.Status.Conversion
				require.NotNil(t, c, "conversion, want attempt 2")
				assert.Equal(t, int32(2), c.Attempt, "conversion = %+v, want attempt 2", c)
				assert.Equal(t, naming.ConversionJob(builders.Name, 2), c.JobName, "conversion = %+v, want attempt 2", c)
				assert.Equal(t, naming.ConversionConfigMap(builders.Name, 2), c.ConfigMapName, "conversion = %+v, want attempt 2", c)
				assert.Empty(t, d.Status.Disks[0].SHA256, "disks keep the transfer evidence of the converted images")
				assert.Equal(t, v1alpha1.DiskStatus{Key: builders.DiskKey0, Name: d.Status.Disks[0].Name, StagingClaim: d.Status.Disks[0].StagingClaim,
					CapacityBytes: builders.DiskCap0}, d.Status.Disks[0], "disks keep how the converted images were read")
				assert.Equal(t, fmt.Sprintf("%d%%", ProgressTransferred), d.Status.Progress, "overall progress: held while the disks are transferred again")
			},
		},
		"other failure with the budget spent": {
			m: m(withConversion, builders.WithRetries(3)), obs: newObs(failed("")),
			phase: v1alpha1.PhaseRollingBack,
			check: func(t *testing.T, d Decision) { wantLastError(t, d, v1alpha1.PhaseConverting, ReasonConversionFailed) },
		},
		"succeeded, its pod's report not in the caches yet: wait for it": {
			m: m(withConversion),
			obs: newObs(conversionJob(JobObservation{
				Name: conv1, Succeeded: true, ResultMissing: true, CompletedAt: builders.At(-time.Second).Time,
			})),
			phase: v1alpha1.PhaseConverting, requeue: JobResultPoll,
			check: func(t *testing.T, d Decision) {
				assert.Nil(t, d.Status.Conversion.CompletedAt, "conversion recorded complete before its report arrived")
			},
		},
		"succeeded, no report long after its completion: go on without the OS": {
			m: m(withConversion),
			obs: newObs(conversionJob(JobObservation{
				Name: conv1, Succeeded: true, ResultMissing: true, CompletedAt: builders.At(-JobResultGrace).Time,
			})),
			phase: v1alpha1.PhaseImporting, requeue: ms,
		},
		"succeeded: the OS is recorded": {
			m:     m(withConversion),
			obs:   newObs(conversionJob(JobObservation{Name: conv1, Succeeded: true, OperatingSystem: "windows 2019"})),
			phase: v1alpha1.PhaseImporting, requeue: ms,
			check: func(t *testing.T, d Decision) {
				assert.Equal(t, "windows 2019", d.Status.Conversion.OperatingSystem, "conversion = %+v, want the OS recorded", d.Status.Conversion)
				wantTime(t, "conversion.completedAt", d.Status.Conversion.CompletedAt, 0)
				wantEvidence(t, d, v1alpha1.PhaseConverting, 0)
			},
		},
	})
}

func TestImporting(t *testing.T) {
	m := func(opts ...builders.MigrationMod) *v1alpha1.VirtualMachineMigration {
		return newMigration(append([]builders.MigrationMod{builders.Reached(v1alpha1.PhaseImporting)}, opts...)...)
	}
	dv0, dv1 := dvNames()[0], dvNames()[1]
	withDVs := builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
		for i := range s.Disks {
			s.Disks[i].DataVolume = dvNames()[i]
		}
	})
	failedOnce := builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
		s.Disks[0].ImportPhase = DataVolumeFailed
		s.Retries = 1
	})
	runCases(t, map[string]decideCase{
		"missing DataVolumes: create them, named after the target": {
			m:     m(),
			phase: v1alpha1.PhaseImporting, action: ActionCreateDataVolumes, requeue: DefaultPollInterval,
			check: func(t *testing.T, d Decision) {
				for i, disk := range d.Status.Disks {
					assert.Equal(t, builders.DefaultTarget+"-disk-"+string(rune('0'+i)), disk.DataVolume, "disk %d DataVolume, named after the target", i)
				}
			},
		},
		"one DataVolume missing": {
			m: m(), obs: newObs(dataVolume(dv0, "ImportInProgress", "10%")),
			phase: v1alpha1.PhaseImporting, action: ActionCreateDataVolumes,
		},
		"progress and phases recorded": {
			m: m(withDVs), obs: newObs(dataVolume(dv0, "ImportInProgress", "45.20%"), dataVolume(dv1, DataVolumeSucceeded, "100.0%")),
			phase: v1alpha1.PhaseImporting, requeue: DefaultPollInterval,
			check: func(t *testing.T, d Decision) {
				d0 := d.Status.Disks[0]
				assert.Equal(t, "ImportInProgress", d0.ImportPhase, "disk 0 = %+v, want its DataVolume's phase", d0)
				assert.Equal(t, "45.20%", d0.ImportProgress, "disk 0 = %+v, want its DataVolume's progress", d0)
				assert.Equal(t, "90%", d.Status.Progress, "overall progress: 80% and 15% of (45.20% + 100%) / 2")
				wantTime(t, "lastProgressTime", d.Status.LastProgressTime, 0)
			},
		},
		"a failed DataVolume spends one retry and is deleted": {
			m: m(withDVs), obs: newObs(dataVolume(dv0, DataVolumeFailed, "3%"), dataVolume(dv1, "ImportInProgress", "10%")),
			phase: v1alpha1.PhaseImporting, action: ActionDeleteDataVolume, name: dv0,
			check: func(t *testing.T, d Decision) {
				assert.Equal(t, int32(1), d.Status.Retries, "retries, want one spent")
				assert.Equal(t, DataVolumeFailed, d.Status.Disks[0].ImportPhase, "disk 0 = %+v, want its import failed", d.Status.Disks[0])
				wantLastError(t, d, v1alpha1.PhaseImporting, ReasonImportFailed)
			},
		},
		"a failed DataVolume already counted: delete again, no retry spent": {
			m:     m(withDVs, failedOnce),
			obs:   newObs(dataVolume(dv0, DataVolumeFailed, "3%"), dataVolume(dv1, "ImportInProgress", "10%")),
			phase: v1alpha1.PhaseImporting, action: ActionDeleteDataVolume, name: dv0,
			check: func(t *testing.T, d Decision) {
				assert.Equal(t, int32(1), d.Status.Retries, "retries, want no second one spent")
			},
		},
		"a failed DataVolume with the budget spent": {
			m:     m(withDVs, builders.WithRetries(3)),
			obs:   newObs(dataVolume(dv0, DataVolumeFailed, ""), dataVolume(dv1, DataVolumeSucceeded, "100.0%")),
			phase: v1alpha1.PhaseRollingBack,
			check: func(t *testing.T, d Decision) { wantLastError(t, d, v1alpha1.PhaseImporting, ReasonImportFailed) },
		},
		"all populated: the target disks are read back": {
			m: m(withDVs), obs: newObs(dataVolumes(DataVolumeSucceeded, "100.0%", false)),
			phase: v1alpha1.PhaseImporting, action: ActionCreateVerificationJob, name: naming.VerificationJob(builders.Name, 1), requeue: DefaultPollInterval,
			check: func(t *testing.T, d Decision) {
				assert.Equal(t, fmt.Sprintf("%d%%", ProgressImported), d.Status.Progress, "overall progress: every disk imported")
				assert.Equal(t, DataVolumeSucceeded, d.Status.Disks[1].ImportPhase, "disk 1 = %+v, want imported", d.Status.Disks[1])
				assert.Nil(t, evidenceFor(d.Status, v1alpha1.PhaseImporting), "no evidence before the verification")
			},
		},
		"a custom target name names the DataVolumes": {
			m:     m(builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) { s.Target.Name = "db" })),
			phase: v1alpha1.PhaseImporting, action: ActionCreateDataVolumes,
			check: func(t *testing.T, d Decision) {
				assert.Equal(t, "db-disk-1", d.Status.Disks[1].DataVolume, "DataVolume, named after the custom target")
			},
		},
		"no target recorded: derived from the inventory": {
			m:     m(builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) { s.Target = nil })),
			phase: v1alpha1.PhaseImporting, action: ActionCreateDataVolumes,
			check: func(t *testing.T, d Decision) {
				if assert.NotNil(t, d.Status.Target, "target, want it derived from the inventory") {
					assert.Equal(t, builders.DefaultTarget, d.Status.Target.Name, "target %+v, want it derived from the inventory", d.Status.Target)
				}
				assert.Equal(t, dv0, d.Status.Disks[0].DataVolume, "disk 0 = %+v, want named after the derived target", d.Status.Disks[0])
			},
		},
	})
}

// A DataVolume that fails, is deleted, is created again and fails again
// spends a second retry, even when the controller never saw it in between.
func TestImportingRecreatedDataVolumeFailsAgain(t *testing.T) {
	dv0, dv1 := dvNames()[0], dvNames()[1]
	m := newMigration(builders.Reached(v1alpha1.PhaseImporting))
	failed := newObs(dataVolume(dv0, DataVolumeFailed, ""), dataVolume(dv1, "ImportInProgress", "10%"))
	gone := newObs(dataVolume(dv1, "ImportInProgress", "10%"))

	d := decide(m, failed)
	require.Equal(t, int32(1), d.Status.Retries, "first failure: retries, want one spent")
	require.Equal(t, ActionDeleteDataVolume, d.Action.Type, "first failure: action %+v, want the DataVolume deleted", d.Action)
	m = after(m, d)
	d = decideAt(m, gone, time.Second)
	require.Equal(t, ActionCreateDataVolumes, d.Action.Type, "after the deletion: action %+v, want CreateDataVolumes", d.Action)
	m = after(m, d)
	d = decideAt(m, failed, 2*time.Second)
	assert.Equal(t, int32(2), d.Status.Retries, "second failure: want a second retry spent")
	assert.Equal(t, ActionDeleteDataVolume, d.Action.Type, "second failure: action %+v, want the DataVolume deleted again", d.Action)
}

func TestCreatingVM(t *testing.T) {
	m := func(opts ...builders.MigrationMod) *v1alpha1.VirtualMachineMigration {
		return newMigration(append([]builders.MigrationMod{builders.Reached(v1alpha1.PhaseCreatingVM)}, opts...)...)
	}
	runCases(t, map[string]decideCase{
		"no VM: create it": {
			m:     m(),
			phase: v1alpha1.PhaseCreatingVM, action: ActionCreateVM, name: builders.DefaultTarget, requeue: DefaultPollInterval,
		},
		"a VM by that name that is not ours": {
			m: m(), obs: newObs(targetVM(false, RunStrategyHalted)),
			phase: v1alpha1.PhaseRollingBack,
			check: func(t *testing.T, d Decision) { wantLastError(t, d, v1alpha1.PhaseCreatingVM, ReasonTargetVMNotOurs) },
		},
		"DataVolumes not owned yet: adopt them": {
			m: m(), obs: newObs(targetVM(true, RunStrategyHalted), dataVolumes(DataVolumeSucceeded, "100.0%", false)),
			phase: v1alpha1.PhaseCreatingVM, action: ActionAdoptDataVolumes, name: builders.DefaultTarget,
			check: func(t *testing.T, d Decision) {
				assert.Equal(t, types.UID(builders.TargetUID), d.Status.Target.UID, "target uid, want the VM's")
			},
		},
		"VM ours and owning its disks: Starting": {
			m: m(), obs: newObs(targetVM(true, RunStrategyHalted), dataVolumes(DataVolumeSucceeded, "100.0%", true)),
			phase: v1alpha1.PhaseStarting, requeue: ms,
			check: func(t *testing.T, d Decision) {
				assert.Equal(t, types.UID(builders.TargetUID), d.Status.Target.UID, "target uid, want the VM's")
				wantEvidence(t, d, v1alpha1.PhaseCreatingVM, 0)
			},
		},
	})
}

func TestStarting(t *testing.T) {
	m := func(opts ...builders.MigrationMod) *v1alpha1.VirtualMachineMigration {
		return newMigration(append([]builders.MigrationMod{builders.Reached(v1alpha1.PhaseStarting)}, opts...)...)
	}
	late := builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) { s.PhaseStartTime = builders.TP(-10 * time.Minute) })
	runCases(t, map[string]decideCase{
		"start=false: leave it halted": {
			m:     newMigration(builders.NoStart, builders.Reached(v1alpha1.PhaseStarting)),
			phase: v1alpha1.PhaseCleaningUp,
			check: func(t *testing.T, d Decision) { wantEvidence(t, d, v1alpha1.PhaseStarting, 0) },
		},
		"halted, source seen off: start it, the intent recorded first": {
			m: m(), obs: newObs(sourceOff, targetVM(true, RunStrategyHalted)),
			phase: v1alpha1.PhaseStarting, action: ActionStartVM, name: builders.DefaultTarget,
			check: func(t *testing.T, d Decision) {
				wantTime(t, "startRequestedAt", d.Status.Target.StartRequestedAt, 0)
			},
		},
		"halted, source not read yet: read it before starting": {
			m: m(), obs: newObs(targetVM(true, RunStrategyHalted)),
			phase: v1alpha1.PhaseStarting, requeue: DefaultPollInterval,
		},
		"halted, source running again: never two copies, fail": {
			m: m(), obs: newObs(sourceOn(true), targetVM(true, RunStrategyHalted)),
			phase: v1alpha1.PhaseRollingBack,
			check: func(t *testing.T, d Decision) { wantLastError(t, d, v1alpha1.PhaseStarting, ReasonSourceRunning) },
		},
		"halted, source gone: start it": {
			m: m(), obs: newObs(sourceError(ErrorGone, ReasonSourceVMNotFound), targetVM(true, RunStrategyHalted)),
			phase: v1alpha1.PhaseStarting, action: ActionStartVM, name: builders.DefaultTarget,
		},
		"start already requested (the patch failed): ask again without reading the source": {
			m:     m(builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) { s.Target.StartRequestedAt = builders.TP(-time.Second) })),
			obs:   newObs(targetVM(true, RunStrategyHalted)),
			phase: v1alpha1.PhaseStarting, action: ActionStartVM, name: builders.DefaultTarget,
		},
		"VMI running: CleaningUp": {
			m: m(), obs: newObs(targetVM(true, RunStrategyAlways), targetVMI(VMIRunning, false)),
			phase: v1alpha1.PhaseCleaningUp, requeue: ms,
			check: func(t *testing.T, d Decision) {
				assert.Equal(t, VMIRunning, d.Status.Target.VMIPhase, "target = %+v, want the VMI's phase", d.Status.Target)
				wantEvidence(t, d, v1alpha1.PhaseStarting, 0)
			},
		},
		"VMI scheduling: wait": {
			m: m(), obs: newObs(targetVM(true, RunStrategyAlways), targetVMI("Scheduling", false)),
			phase: v1alpha1.PhaseStarting, requeue: DefaultPollInterval,
			check: func(t *testing.T, d Decision) {
				assert.Equal(t, "Scheduling", d.Status.Target.VMIPhase, "target = %+v, want the VMI's phase", d.Status.Target)
			},
		},
		"no VMI yet, start deadline close": {
			m: m(builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
				s.PhaseStartTime = builders.TP(-10*time.Minute + 2*time.Second)
			})),
			obs:   newObs(targetVM(true, RunStrategyAlways)),
			phase: v1alpha1.PhaseStarting, requeue: 2 * time.Second,
		},
		"waiting for the guest agent": {
			m: newMigration(builders.WaitForAgent, builders.Reached(v1alpha1.PhaseStarting)), obs: newObs(targetVM(true, RunStrategyAlways), targetVMI(VMIRunning, false)),
			phase: v1alpha1.PhaseStarting,
		},
		"guest agent connected": {
			m: newMigration(builders.WaitForAgent, builders.Reached(v1alpha1.PhaseStarting)), obs: newObs(targetVM(true, RunStrategyAlways), targetVMI(VMIRunning, true)),
			phase: v1alpha1.PhaseCleaningUp,
			check: func(t *testing.T, d Decision) {
				assert.True(t, d.Status.Target.AgentConnected, "target = %+v, want the agent connected", d.Status.Target)
			},
		},
		"start timeout": {
			m: m(late), obs: newObs(targetVM(true, RunStrategyAlways), targetVMI("Scheduling", false)),
			phase: v1alpha1.PhaseRollingBack,
			check: func(t *testing.T, d Decision) { wantLastError(t, d, v1alpha1.PhaseStarting, ReasonStartTimeout) },
		},
		"start timeout waiting for the agent": {
			m:     newMigration(builders.WaitForAgent, builders.Reached(v1alpha1.PhaseStarting), late),
			obs:   newObs(targetVM(true, RunStrategyAlways), targetVMI(VMIRunning, false)),
			phase: v1alpha1.PhaseRollingBack,
			check: func(t *testing.T, d Decision) {
				wantLastError(t, d, v1alpha1.PhaseStarting, ReasonStartTimeout)
				assert.Contains(t, d.Status.LastError.Message, "guest agent", "lastError says what the start waited for")
			},
		},
		"VM gone": {
			m: m(), obs: newObs(),
			phase: v1alpha1.PhaseRollingBack,
			check: func(t *testing.T, d Decision) { wantLastError(t, d, v1alpha1.PhaseStarting, ReasonTargetVMFailed) },
		},
		"no phase start time recorded (status written by hand)": {
			m:     m(builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) { s.PhaseStartTime = nil })),
			obs:   newObs(targetVM(true, RunStrategyAlways)),
			phase: v1alpha1.PhaseStarting,
		},
	})
}

func TestCleaningUp(t *testing.T) {
	m := func(opts ...builders.MigrationMod) *v1alpha1.VirtualMachineMigration {
		return newMigration(append([]builders.MigrationMod{builders.Reached(v1alpha1.PhaseCleaningUp)}, opts...)...)
	}
	children := newObs(claims(stagingClaims()...), jobs(naming.TransferJob(builders.Name, 1)), configMaps(naming.ConversionConfigMap(builders.Name, 1)))
	snapshot := builders.WithSourceControl(func(sc *v1alpha1.SourceControlStatus) {
		sc.Snapshots = []v1alpha1.SnapshotRecord{{Name: "migration-" + string(builders.UID), MoRef: "snapshot-9", RequestedAt: builders.TP(-time.Hour)}}
	})
	succeeded := func(t *testing.T, d Decision) {
		wantTime(t, "completionTime", d.Status.CompletionTime, 0)
		wantEvidence(t, d, v1alpha1.PhaseCleaningUp, 0)
		wantCond(t, d, ConditionReady, "True", ReasonSucceeded)
		wantEnded(t, d, v1alpha1.PhaseSucceeded)
	}
	runCases(t, map[string]decideCase{
		"Delete policy with children: delete staging": {
			m: m(), obs: children,
			phase: v1alpha1.PhaseCleaningUp, action: ActionDeleteStaging, requeue: DefaultPollInterval,
		},
		"Retain policy: children kept": {
			m: newMigration(builders.Retain, builders.Reached(v1alpha1.PhaseCleaningUp)), obs: children,
			phase: v1alpha1.PhaseSucceeded, check: succeeded,
		},
		"no children: Succeeded": {
			m:     m(),
			phase: v1alpha1.PhaseSucceeded, check: succeeded,
		},
		"target DataVolumes are not staging": {
			m: m(), obs: newObs(childDVs(dvNames()...)),
			phase: v1alpha1.PhaseSucceeded,
		},
		"a snapshot the controller made is removed first": {
			m: m(snapshot), obs: newObs(sourceOff, sourceSnapshots("migration-"+string(builders.UID))),
			phase: v1alpha1.PhaseCleaningUp, action: ActionRemoveSnapshot, name: "migration-" + string(builders.UID),
		},
		"a removed snapshot is recorded": {
			m: m(snapshot), obs: newObs(sourceOff),
			phase: v1alpha1.PhaseSucceeded,
			check: func(t *testing.T, d Decision) {
				wantTime(t, "snapshot.removedAt", d.Status.SourceControl.Snapshots[0].RemovedAt, 0)
			},
		},
	})
}
