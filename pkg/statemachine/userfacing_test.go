package statemachine

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/test/builders"
)

// started records that the target VM was asked to run.
var started = builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
	s.Target.StartRequestedAt = builders.TP(-2 * time.Minute)
})

// TestTerminalConditions: Succeeded and Failed, the conditions kubectl
// wait waits on, appear when the migration ends and say how; Progressing
// then gives a reason that is not the phase again (issue 25: REASON
// showed Succeeded/Failed beside the phase, "the migration is succeeded").
func TestTerminalConditions(t *testing.T) {
	runCases(t, map[string]decideCase{
		"running: neither is set": {
			m: newMigration(builders.Reached(v1alpha1.PhaseConverting)), obs: newObs(conversionJob(JobObservation{Name: naming.ConversionJob(builders.Name, 1)})),
			phase: v1alpha1.PhaseConverting,
			check: func(t *testing.T, d Decision) {
				wantNoCond(t, d, ConditionSucceeded)
				wantNoCond(t, d, ConditionFailed)
			},
		},
		"cleanup done, target started: Succeeded True, TargetStarted": {
			m: newMigration(builders.Reached(v1alpha1.PhaseCleaningUp), started), obs: newObs(),
			phase: v1alpha1.PhaseSucceeded,
			check: func(t *testing.T, d Decision) {
				wantEnded(t, d, v1alpha1.PhaseSucceeded)
				c := wantCond(t, d, ConditionSucceeded, metav1.ConditionTrue, ReasonTargetStarted)
				assert.Equal(t, "the migration succeeded: VirtualMachine apps/"+builders.DefaultTarget+" was started", c.Message)
				wantCond(t, d, ConditionProgressing, metav1.ConditionFalse, ReasonTargetStarted)
				wantCond(t, d, ConditionFailed, metav1.ConditionFalse, ReasonSucceeded)
				wantCond(t, d, ConditionReady, metav1.ConditionTrue, ReasonSucceeded)
			},
		},
		"cleanup done, start disabled: TargetLeftHalted": {
			m: newMigration(builders.Reached(v1alpha1.PhaseCleaningUp), builders.NoStart), obs: newObs(),
			phase: v1alpha1.PhaseSucceeded,
			check: func(t *testing.T, d Decision) {
				c := wantCond(t, d, ConditionSucceeded, metav1.ConditionTrue, ReasonTargetLeftHalted)
				assert.Contains(t, c.Message, "was left halted (spec.target.start is false)")
			},
		},
		"rolling back: Failed not set yet, Ready carries the failure": {
			m: newMigration(builders.Reached(v1alpha1.PhaseRollingBack)), obs: newObs(sourceOff, liveVMI(nil)),
			phase: v1alpha1.PhaseRollingBack, action: ActionPowerOnSource,
			check: func(t *testing.T, d Decision) {
				wantNoCond(t, d, ConditionFailed)
				wantNoCond(t, d, ConditionSucceeded)
				wantCond(t, d, ConditionReady, metav1.ConditionFalse, ReasonTransferFailed)
			},
		},
		"rolling back with a Failed condition an older controller set: turned False": {
			m: newMigration(builders.Reached(v1alpha1.PhaseRollingBack), builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
				s.Conditions = []metav1.Condition{{Type: ConditionFailed, Status: metav1.ConditionTrue, Reason: ReasonTransferFailed, Message: "old", LastTransitionTime: builders.At(-time.Minute)}}
			})),
			obs: newObs(sourceOff, liveVMI(nil)), phase: v1alpha1.PhaseRollingBack, action: ActionPowerOnSource,
			check: func(t *testing.T, d Decision) {
				wantCond(t, d, ConditionFailed, metav1.ConditionFalse, ReasonRollingBack)
			},
		},
		"source restored: Failed True with the failure's reason": {
			m: newMigration(builders.Reached(v1alpha1.PhaseRollingBack), builders.WithSourceControl(func(sc *v1alpha1.SourceControlStatus) {
				sc.RestoreRequestedAt, sc.RestoredAt = builders.TP(-20*time.Second), builders.TP(-5*time.Second)
			})),
			obs: newObs(sourceOn(true)), phase: v1alpha1.PhaseFailed,
			check: func(t *testing.T, d Decision) {
				wantEnded(t, d, v1alpha1.PhaseFailed)
				c := wantCond(t, d, ConditionFailed, metav1.ConditionTrue, ReasonTransferFailed)
				assert.Equal(t, "failed in TransferringDisks: transfer job failed", c.Message)
				wantCond(t, d, ConditionSucceeded, metav1.ConditionFalse, ReasonTransferFailed)
				wantCond(t, d, ConditionProgressing, metav1.ConditionFalse, ReasonTransferFailed)
			},
		},
	})
}

// TestTerminalConditionsStayPut: a migration that ended is decided again
// without writing anything (the conditions do not flap).
func TestTerminalConditionsStayPut(t *testing.T) {
	for _, p := range []v1alpha1.Phase{v1alpha1.PhaseSucceeded, v1alpha1.PhaseFailed} {
		t.Run(string(p), func(t *testing.T) {
			m := newMigration(builders.Reached(p))
			d := decide(m, newObs())
			m = after(m, d)
			d2 := decideAt(m, newObs(), time.Hour)
			assertSemanticEqual(t, m.Status, d2.Status, "an ended migration's status changed when decided again")
		})
	}
}

// TestRecoveredErrorForgotten: status.lastError goes once the migration
// moves past the phase it happened in (issue 25: a transfer killed once
// showed TransferFailed in LAST ERROR through to Succeeded), and stays
// while it still holds.
func TestRecoveredErrorForgotten(t *testing.T) {
	transferError := builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
		s.Retries = 1
		s.LastError = &v1alpha1.MigrationError{Phase: v1alpha1.PhaseTransferringDisks, Reason: ReasonTransferFailed,
			Message: "transfer job web-01-transfer-1 failed: exit code 137", Time: builders.At(-10 * time.Minute)}
	})
	secondAttempt := builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
		s.Transfer = &v1alpha1.JobStatus{JobName: naming.TransferJob(builders.Name, 2), Attempt: 2}
		for i := range s.Disks {
			s.Disks[i].SHA256, s.Disks[i].TransferredAt, s.Disks[i].BytesTransferred = "", nil, 0
		}
	})
	conversionError := builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
		s.LastError = &v1alpha1.MigrationError{Phase: v1alpha1.PhaseConverting, Reason: ReasonConversionFailed,
			Message: "conversion job failed", Time: builders.At(-10 * time.Minute)}
	})
	runCases(t, map[string]decideCase{
		"the retried transfer runs: the error stays": {
			m:     newMigration(builders.Reached(v1alpha1.PhaseTransferringDisks), transferError, secondAttempt),
			obs:   newObs(claims(stagingClaims()...), transferJob(JobObservation{Name: naming.TransferJob(builders.Name, 2)})),
			phase: v1alpha1.PhaseTransferringDisks,
			check: func(t *testing.T, d Decision) {
				wantLastError(t, d, v1alpha1.PhaseTransferringDisks, ReasonTransferFailed)
			},
		},
		"the retried transfer succeeds: the error goes, the retry stays counted": {
			m:     newMigration(builders.Reached(v1alpha1.PhaseTransferringDisks), transferError, secondAttempt),
			obs:   newObs(claims(stagingClaims()...), transferJob(JobObservation{Name: naming.TransferJob(builders.Name, 2), Succeeded: true, Results: goodResults()})),
			phase: v1alpha1.PhaseConverting,
			check: func(t *testing.T, d Decision) {
				assert.Nil(t, d.Status.LastError, "lastError after the retry succeeded")
				assert.Equal(t, int32(1), d.Status.Retries, "retries")
			},
		},
		"a conversion failure sends the migration back to transferring: the error stays": {
			m:     newMigration(builders.Reached(v1alpha1.PhaseTransferringDisks), conversionError, secondAttempt),
			obs:   newObs(claims(stagingClaims()...), transferJob(JobObservation{Name: naming.TransferJob(builders.Name, 2), Succeeded: true, Results: goodResults()})),
			phase: v1alpha1.PhaseConverting,
			check: func(t *testing.T, d Decision) { wantLastError(t, d, v1alpha1.PhaseConverting, ReasonConversionFailed) },
		},
		"the conversion then succeeds: the error goes": {
			m:     newMigration(builders.Reached(v1alpha1.PhaseConverting), conversionError),
			obs:   newObs(conversionJob(JobObservation{Name: naming.ConversionJob(builders.Name, 1), Succeeded: true, OperatingSystem: "rhel 9.4"})),
			phase: v1alpha1.PhaseImporting,
			check: func(t *testing.T, d Decision) {
				assert.Nil(t, d.Status.LastError, "lastError after the conversion succeeded")
			},
		},
		"a failure keeps its error through the rollback": {
			m: newMigration(builders.Reached(v1alpha1.PhaseRollingBack), builders.WithSourceControl(func(sc *v1alpha1.SourceControlStatus) {
				sc.RestoreRequestedAt, sc.RestoredAt = builders.TP(-20*time.Second), builders.TP(-5*time.Second)
			})),
			obs: newObs(sourceOn(true)), phase: v1alpha1.PhaseFailed,
			check: func(t *testing.T, d Decision) {
				wantLastError(t, d, v1alpha1.PhaseTransferringDisks, ReasonTransferFailed)
			},
		},
	})
}

// TestDeletedPlanNotNamed: once a plan-first migration ran and its
// cleanup deleted the plan ConfigMap with the staging objects,
// status.plan no longer names it; it keeps what the plan listed (issue
// 25: kubectl vmm plan answered with an error about a missing plan).
func TestDeletedPlanNotNamed(t *testing.T) {
	withPlan := builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
		s.Plan = &v1alpha1.PlanStatus{ConfigMapName: naming.PlanConfigMap(builders.Name), RenderedAt: builders.TP(-2 * time.Hour),
			Objects: []v1alpha1.PlannedObject{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine", Name: builders.DefaultTarget}}}
	})
	planCM := configMaps(naming.PlanConfigMap(builders.Name))
	runCases(t, map[string]decideCase{
		"cleaning up: the plan ConfigMap is deleted with the staging objects, still named": {
			m: newMigration(builders.Reached(v1alpha1.PhaseCleaningUp), withPlan), obs: newObs(planCM),
			phase: v1alpha1.PhaseCleaningUp, action: ActionDeleteStaging,
			check: func(t *testing.T, d Decision) {
				assert.Equal(t, naming.PlanConfigMap(builders.Name), d.Status.Plan.ConfigMapName)
			},
		},
		"cleanup done: no longer named, the plan's objects kept": {
			m: newMigration(builders.Reached(v1alpha1.PhaseCleaningUp), withPlan), obs: newObs(),
			phase: v1alpha1.PhaseSucceeded,
			check: func(t *testing.T, d Decision) {
				require.NotNil(t, d.Status.Plan)
				assert.Empty(t, d.Status.Plan.ConfigMapName)
				assert.Len(t, d.Status.Plan.Objects, 1)
				assert.NotNil(t, d.Status.Plan.RenderedAt)
			},
		},
		"Retain policy: the plan ConfigMap stays, and stays named": {
			m: newMigration(builders.Reached(v1alpha1.PhaseCleaningUp), withPlan, builders.Retain), obs: newObs(planCM),
			phase: v1alpha1.PhaseSucceeded,
			check: func(t *testing.T, d Decision) {
				assert.Equal(t, naming.PlanConfigMap(builders.Name), d.Status.Plan.ConfigMapName)
			},
		},
	})
}

// TestCancelEventSaysWhatHappensToSource: the cancellation's event says
// whether the source VM is powered back on (issue 25: a source that was
// already off got "deleting children and restoring the source").
func TestCancelEventSaysWhatHappensToSource(t *testing.T) {
	cases := map[string]struct {
		m    *v1alpha1.VirtualMachineMigration
		want string
	}{
		"validating: not stopped": {newMigration(builders.Reached(v1alpha1.PhaseValidating), builders.Deleted),
			"cancelling: deleting what the migration created; the source VM was not stopped and is left as it is"},
		"transferring, the source was on: powered back on": {newMigration(builders.Reached(v1alpha1.PhaseTransferringDisks), builders.Deleted),
			"cancelling: deleting what the migration created; powering the source VM back on"},
		"transferring, the source was already off": {newMigration(builders.Reached(v1alpha1.PhaseTransferringDisks), builders.Deleted,
			builders.WithSourceControl(func(sc *v1alpha1.SourceControlStatus) { sc.OriginalPowerState = PowerStateOff })),
			"cancelling: deleting what the migration created; the source VM was poweredOff when found and is left so"},
		"starting, the target was started": {newMigration(builders.Reached(v1alpha1.PhaseStarting), builders.Deleted, started),
			"cancelling: deleting the staging objects and keeping the target VM, which was started, halted; powering the source VM back on"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := decide(tc.m, newObs())
			require.Equal(t, v1alpha1.PhaseCancelling, d.Status.Phase)
			var msgs []string
			for _, e := range d.Events {
				if e.Reason == ReasonCancelled {
					msgs = append(msgs, e.Message)
				}
			}
			assert.Equal(t, []string{tc.want}, msgs, "the Cancelled event")
		})
	}
}

// TestProgressWhilePaused: a pause holds the next action, not the view: a
// transfer Job that runs on keeps moving status.progress and the disks'
// bytes, and an import its DataVolumes' progress (issue 25: progress
// froze at 8% while the Job reached 100%).
func TestProgressWhilePaused(t *testing.T) {
	transferring := newMigration(builders.Reached(v1alpha1.PhaseTransferringDisks), builders.Paused, builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
		s.Transfer = &v1alpha1.JobStatus{JobName: naming.TransferJob(builders.Name, 1), Attempt: 1}
		for i := range s.Disks {
			s.Disks[i].SHA256, s.Disks[i].TransferredAt, s.Disks[i].BytesTransferred = "", nil, builders.DiskCap1/20
		}
		s.Progress = "8%"
	}))
	job := JobObservation{Name: naming.TransferJob(builders.Name, 1), Progress: []DiskProgress{
		{Key: builders.DiskKey0, BytesDone: builders.DiskCap0, BytesTotal: builders.DiskCap0, RateBytesPerSecond: 100 << 20},
		{Key: builders.DiskKey1, BytesDone: builders.DiskCap1 / 2, BytesTotal: builders.DiskCap1, RateBytesPerSecond: 100 << 20},
	}}
	importing := newMigration(builders.Reached(v1alpha1.PhaseImporting), builders.Paused, builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
		for i := range s.Disks {
			s.Disks[i].DataVolume = dvNames()[i]
			s.Disks[i].ImportPhase, s.Disks[i].ImportProgress = "ImportInProgress", "10.00%"
		}
		s.Progress = "81%" // 80% and 15% of 10%
	}))
	runCases(t, map[string]decideCase{
		"transfer: bytes and progress move, nothing is done": {
			m: transferring, obs: newObs(claims(stagingClaims()...), transferJob(job)), now: time.Minute,
			phase: v1alpha1.PhaseTransferringDisks, action: ActionNone,
			check: func(t *testing.T, d Decision) {
				want := share(builders.DiskCap0+builders.DiskCap1/2, builders.DiskCap0+builders.DiskCap1, ProgressTransferred)
				assert.Equal(t, fmt.Sprintf("%d%%", want), d.Status.Progress, "status.progress")
				assert.Equal(t, builders.DiskCap0, d.Status.Disks[0].BytesTransferred)
				assert.Equal(t, builders.DiskCap1/2, d.Status.Disks[1].BytesTransferred)
				wantTime(t, "lastProgressTime", d.Status.LastProgressTime, time.Minute)
				wantCond(t, d, ConditionPaused, metav1.ConditionTrue, ReasonPaused)
			},
		},
		"transfer: a Job of another attempt is not read": {
			m: transferring, obs: newObs(claims(stagingClaims()...), transferJob(JobObservation{Name: naming.TransferJob(builders.Name, 7), Progress: job.Progress})), now: time.Minute,
			phase: v1alpha1.PhaseTransferringDisks, action: ActionNone,
			check: func(t *testing.T, d Decision) { assert.Equal(t, "8%", d.Status.Progress) },
		},
		"transfer: a finished Job waits for the resume": {
			m: transferring, obs: newObs(claims(stagingClaims()...), transferJob(JobObservation{Name: job.Name, Succeeded: true, Results: goodResults()})), now: time.Minute,
			phase: v1alpha1.PhaseTransferringDisks, action: ActionNone,
			check: func(t *testing.T, d Decision) {
				assert.Equal(t, "8%", d.Status.Progress)
				assert.Nil(t, d.Status.Disks[0].TransferredAt, "a transfer result recorded while paused")
			},
		},
		"import: the DataVolumes' progress moves": {
			m: importing, obs: newObs(dataVolumes("ImportInProgress", "55.00%", false)), now: time.Minute,
			phase: v1alpha1.PhaseImporting, action: ActionNone,
			check: func(t *testing.T, d Decision) {
				assert.Equal(t, "88%", d.Status.Progress, "80% and 15% of 55%")
				assert.Equal(t, "55.00%", d.Status.Disks[0].ImportProgress)
			},
		},
		"import: a DataVolume not seen leaves the progress alone": {
			m: importing, obs: newObs(dataVolume(dvNames()[0], "ImportInProgress", "55.00%")), now: time.Minute,
			phase: v1alpha1.PhaseImporting, action: ActionNone,
			check: func(t *testing.T, d Decision) { assert.Equal(t, "81%", d.Status.Progress) },
		},
	})
}

// TestConversionWarnings: virt-v2v's warnings of a conversion that
// succeeded are kept in status.conversion.warnings, in the conversion's
// evidence and in a Warning event (issue 25: they reached nobody).
func TestConversionWarnings(t *testing.T) {
	grub := "could not determine a way to update the configuration of Grub2"
	m := newMigration(builders.Reached(v1alpha1.PhaseConverting))
	d := decide(m, newObs(conversionJob(JobObservation{Name: naming.ConversionJob(builders.Name, 1), Succeeded: true,
		OperatingSystem: "debian 12.15", Warnings: []string{grub}})))
	require.Equal(t, v1alpha1.PhaseImporting, d.Status.Phase)
	assert.Equal(t, []string{grub}, d.Status.Conversion.Warnings, "status.conversion.warnings")
	ev := evidenceFor(d.Status, v1alpha1.PhaseConverting)
	require.NotNil(t, ev)
	assert.Equal(t, "job "+naming.ConversionJob(builders.Name, 1)+" converted the guest (debian 12.15); virt-v2v warned: "+grub, ev.Observed)
	var warned []Event
	for _, e := range d.Events {
		if e.Reason == ReasonConversionWarnings {
			warned = append(warned, e)
		}
	}
	require.Len(t, warned, 1, "one ConversionWarnings event: %+v", d.Events)
	assert.True(t, warned[0].Warning)
	assert.Contains(t, warned[0].Message, grub)

	d = decide(m, newObs(conversionJob(JobObservation{Name: naming.ConversionJob(builders.Name, 1), Succeeded: true, OperatingSystem: "debian 12.15"})))
	assert.Empty(t, d.Status.Conversion.Warnings)
	assert.NotContains(t, eventReasons(d), ReasonConversionWarnings)
}

// TestSourceNameForTables: status.sourceName, kubectl get's Source VM
// column, is the inventoried name shortened to naming.MaxDisplayName
// (issue 25: a 200-character name widened the table to 250 columns);
// status.source.name keeps it whole.
func TestSourceNameForTables(t *testing.T) {
	long := "app-" + strings.Repeat("x", 190) + "-web-01"
	obs := newObs(sourceInventory, slot(true))
	obs.Source.Inventory.Name = long
	d := decide(newMigration(builders.Reached(v1alpha1.PhaseValidating)), obs)
	require.Equal(t, v1alpha1.PhaseQueued, d.Status.Phase)
	assert.Equal(t, long, d.Status.Source.Name)
	assert.Equal(t, naming.Shorten(long, naming.MaxDisplayName), d.Status.SourceName)
	assert.Len(t, d.Status.SourceName, naming.MaxDisplayName)
	assert.True(t, strings.HasSuffix(d.Status.SourceName, "-web-01"), "the name's end is kept: %q", d.Status.SourceName)
}

// TestKeptTargetReleased: a deleted migration that keeps its target VM
// hands it over last, right before its finalizer goes, once its staging
// objects are gone and its source restored (issue 25: the kept VM carried
// the deleted migration's labels and no word of where it came from); a VM
// no longer seen (released) or not ours is not asked for.
func TestKeptTargetReleased(t *testing.T) {
	release := func(t *testing.T, d Decision) {
		assert.Equal(t, builders.DefaultTarget, d.Action.Name)
		if !IsTerminal(d.Status.Phase) {
			assert.Contains(t, cond(t, d, ConditionProgressing).Message, "handing VirtualMachine "+builders.DefaultTarget+" and its disks over")
		}
	}
	runCases(t, map[string]decideCase{
		"succeeded, deleted: released": {
			m: newMigration(builders.Reached(v1alpha1.PhaseSucceeded), builders.Deleted), obs: newObs(sourceOff, targetVM(true, RunStrategyAlways)),
			phase: v1alpha1.PhaseSucceeded, action: ActionReleaseTarget, check: release,
		},
		"succeeded, deleted, staging left: staging first": {
			m:     newMigration(builders.Reached(v1alpha1.PhaseSucceeded), builders.Deleted, builders.Retain),
			obs:   newObs(sourceOff, targetVM(true, RunStrategyAlways), claims(stagingClaims()...)),
			phase: v1alpha1.PhaseSucceeded, action: ActionDeleteStaging,
		},
		"succeeded, deleted, released: the finalizer goes": {
			m: newMigration(builders.Reached(v1alpha1.PhaseSucceeded), builders.Deleted), obs: newObs(sourceOff),
			phase: v1alpha1.PhaseSucceeded, action: ActionRemoveFinalizer,
		},
		"cancelled after the start, halted: the source is restored first": {
			m:     newMigration(builders.Reached(v1alpha1.PhaseCancelling), builders.Deleted, started),
			obs:   newObs(sourceOff, targetVM(true, RunStrategyHalted), liveVMI(nil)),
			phase: v1alpha1.PhaseCancelling, action: ActionPowerOnSource,
		},
		"cancelled after the start, source restored: released, then the finalizer goes": {
			m: newMigration(builders.Reached(v1alpha1.PhaseCancelling), builders.Deleted, started, builders.WithSourceControl(func(sc *v1alpha1.SourceControlStatus) {
				sc.RestoreRequestedAt, sc.RestoredAt = builders.TP(-20*time.Second), builders.TP(-5*time.Second)
			})),
			obs:   newObs(sourceOn(true), targetVM(true, RunStrategyHalted)),
			phase: v1alpha1.PhaseCancelling, action: ActionReleaseTarget, check: release,
		},
		"cancelled after the start, restored and released: the finalizer goes": {
			m: newMigration(builders.Reached(v1alpha1.PhaseCancelling), builders.Deleted, started, builders.WithSourceControl(func(sc *v1alpha1.SourceControlStatus) {
				sc.RestoreRequestedAt, sc.RestoredAt = builders.TP(-20*time.Second), builders.TP(-5*time.Second)
			})),
			obs:   newObs(sourceOn(true)),
			phase: v1alpha1.PhaseCancelling, action: ActionRemoveFinalizer,
		},
		"a VM of the same name that is not ours: not released": {
			m: newMigration(builders.Reached(v1alpha1.PhaseSucceeded), builders.Deleted), obs: newObs(sourceOff, targetVM(false, RunStrategyAlways)),
			phase: v1alpha1.PhaseSucceeded, action: ActionRemoveFinalizer,
		},
	})
}

// TestPodWaitingRecorded: while the pod of the Job the phase waits for has
// not started for a reason a person must fix, status.podWaiting names the
// Job, the cluster's reason and message, since when, and when the attempt
// counts as failed; it is written only when that changes and goes once the
// pod started or the attempt moved on (issue 34: a transfer pod in
// ImagePullBackOff for 20 minutes showed only "waits for transfer Job ...
// to copy 3 disks (0%)").
func TestPodWaitingRecorded(t *testing.T) {
	job1, job2 := naming.TransferJob(builders.Name, 1), naming.TransferJob(builders.Name, 2)
	conv1 := naming.ConversionJob(builders.Name, 1)
	backOff := &PodStartProblem{Reason: "ImagePullBackOff", Message: `Back-off pulling image "registry.example/vm-transfer:v9"`}
	errPull := &PodStartProblem{Reason: "ErrImagePull", Message: `failed to pull image "registry.example/vm-transfer:v9": not found`}
	transferring := func(opts ...builders.MigrationMod) *v1alpha1.VirtualMachineMigration {
		return newMigration(append([]builders.MigrationMod{builders.Reached(v1alpha1.PhaseTransferringDisks), builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
			s.Transfer = &v1alpha1.JobStatus{JobName: job1, Attempt: 1}
		})}, opts...)...)
	}
	recorded := func(w v1alpha1.PodWaiting) builders.MigrationMod {
		return builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) { s.PodWaiting = &w })
	}
	created := builders.At(-2 * time.Minute)
	failsAt := builders.At(-2*time.Minute + DefaultPodStartTimeout)
	pending := func(name string, p *PodStartProblem) JobObservation {
		return JobObservation{Name: name, CreatedAt: created.Time, StartProblem: p}
	}
	first := v1alpha1.PodWaiting{Job: job1, Reason: errPull.Reason, Message: errPull.Message, Since: builders.At(-time.Minute), AttemptFailsAt: &failsAt}
	runCases(t, map[string]decideCase{
		"a transfer pod in ImagePullBackOff: recorded": {
			m: transferring(), obs: newObs(claims(stagingClaims()...), transferJob(pending(job1, backOff))),
			phase: v1alpha1.PhaseTransferringDisks,
			check: func(t *testing.T, d Decision) {
				assertSemanticEqual(t, &v1alpha1.PodWaiting{Job: job1, Reason: backOff.Reason, Message: backOff.Message,
					Since: builders.At(0), AttemptFailsAt: &failsAt}, d.Status.PodWaiting)
			},
		},
		"the pull goes back and forth: reason and message follow, since stays": {
			m: transferring(recorded(first)), obs: newObs(claims(stagingClaims()...), transferJob(pending(job1, backOff))),
			phase: v1alpha1.PhaseTransferringDisks,
			check: func(t *testing.T, d Decision) {
				w := d.Status.PodWaiting
				if assert.NotNil(t, w) {
					assert.Equal(t, backOff.Reason, w.Reason)
					assert.Equal(t, backOff.Message, w.Message)
					assertTime(t, first.Since, &w.Since, "since the first look")
				}
			},
		},
		"nothing new: not rewritten": {
			m: transferring(recorded(first)), obs: newObs(claims(stagingClaims()...), transferJob(pending(job1, errPull))),
			phase: v1alpha1.PhaseTransferringDisks,
			check: func(t *testing.T, d Decision) { assertSemanticEqual(t, &first, d.Status.PodWaiting) },
		},
		"the pod started: cleared": {
			m: transferring(recorded(first)), obs: newObs(claims(stagingClaims()...), transferJob(JobObservation{Name: job1, CreatedAt: created.Time})),
			phase: v1alpha1.PhaseTransferringDisks,
			check: func(t *testing.T, d Decision) { assert.Nil(t, d.Status.PodWaiting) },
		},
		"the attempt failed at the timeout: the next attempt's pod is not the one recorded": {
			m:     transferring(recorded(first)),
			obs:   newObs(claims(stagingClaims()...), transferJob(JobObservation{Name: job1, CreatedAt: builders.At(-DefaultPodStartTimeout).Time, StartProblem: errPull})),
			phase: v1alpha1.PhaseTransferringDisks, action: ActionDeleteJob, name: job1,
			check: func(t *testing.T, d Decision) {
				assert.Equal(t, job2, d.Status.Transfer.JobName)
				assert.Nil(t, d.Status.PodWaiting)
			},
		},
		"paused: a running Job's pod is still news": {
			m: transferring(builders.Paused), obs: newObs(claims(stagingClaims()...), transferJob(pending(job1, backOff))),
			phase: v1alpha1.PhaseTransferringDisks,
			check: func(t *testing.T, d Decision) {
				if assert.NotNil(t, d.Status.PodWaiting) {
					assert.Equal(t, backOff.Reason, d.Status.PodWaiting.Reason)
				}
			},
		},
		"a conversion pod that cannot be scheduled": {
			m: newMigration(builders.Reached(v1alpha1.PhaseConverting), builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
				s.Conversion = conversionAttempt(builders.Name, 1)
			})),
			obs:   newObs(conversionJob(pending(conv1, &PodStartProblem{Reason: "Unschedulable", Message: "0/3 nodes are available: 3 Insufficient devices.kubevirt.io/kvm."}))),
			phase: v1alpha1.PhaseConverting,
			check: func(t *testing.T, d Decision) {
				if assert.NotNil(t, d.Status.PodWaiting) {
					assert.Equal(t, conv1, d.Status.PodWaiting.Job)
					assert.Equal(t, "Unschedulable", d.Status.PodWaiting.Reason)
				}
			},
		},
		"a verification pod that cannot pull": {
			m: importedWith(convertedSums(), &v1alpha1.JobStatus{JobName: verify1, Attempt: 1}),
			obs: newObs(dataVolumes(DataVolumeSucceeded, "100.0%", false), verificationJob(verify1, func(j *JobObservation) {
				j.CreatedAt, j.StartProblem = created.Time, errPull
			})),
			phase: v1alpha1.PhaseImporting,
			check: func(t *testing.T, d Decision) {
				if assert.NotNil(t, d.Status.PodWaiting) {
					assert.Equal(t, verify1, d.Status.PodWaiting.Job)
				}
			},
		},
		"the phase moved on: cleared": {
			m: transferring(recorded(first)), obs: newObs(claims(stagingClaims()...), transferJob(JobObservation{Name: job1, Succeeded: true, Results: goodResults()})),
			phase: v1alpha1.PhaseConverting,
			check: func(t *testing.T, d Decision) { assert.Nil(t, d.Status.PodWaiting) },
		},
		"failing: cleared": {
			m:     transferring(recorded(first), builders.RetryLimit(0)),
			obs:   newObs(claims(stagingClaims()...), transferJob(JobObservation{Name: job1, Failed: true, Message: "BackoffLimitExceeded"})),
			phase: v1alpha1.PhaseRollingBack,
			check: func(t *testing.T, d Decision) { assert.Nil(t, d.Status.PodWaiting) },
		},
	})
}

// TestLastErrorSummary: status.lastError.summary, kubectl get -o wide's
// Last Error column, is the message's short form (issue 34: the column
// showed the reason, as the Reason column did).
func TestLastErrorSummary(t *testing.T) {
	long := "transfer job web-01-transfer-1 failed: BackoffLimitExceeded: Job has reached the specified backoff limit"
	runCases(t, map[string]decideCase{
		"a failure": {
			m: newMigration(builders.Reached(v1alpha1.PhaseTransferringDisks), builders.RetryLimit(0), builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
				s.Transfer = &v1alpha1.JobStatus{JobName: naming.TransferJob(builders.Name, 1), Attempt: 1}
			})),
			obs:   newObs(claims(stagingClaims()...), transferJob(JobObservation{Name: naming.TransferJob(builders.Name, 1), Failed: true, Message: "BackoffLimitExceeded: Job has reached the specified backoff limit"})),
			phase: v1alpha1.PhaseRollingBack,
			check: func(t *testing.T, d Decision) {
				e := d.Status.LastError
				if assert.NotNil(t, e) {
					assert.Equal(t, naming.Summarize(e.Message), e.Summary)
					require.True(t, strings.HasSuffix(e.Summary, "..."), "a long message, cut: %q", e.Summary)
					assert.True(t, strings.HasPrefix(e.Message, e.Summary[:len(e.Summary)-3]), "the message's start: %q", e.Summary)
				}
			},
		},
		"an error an older controller recorded: summarised": {
			m: newMigration(builders.Reached(v1alpha1.PhaseFailed), builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
				s.LastError = &v1alpha1.MigrationError{Phase: v1alpha1.PhaseTransferringDisks, Reason: ReasonTransferFailed, Message: long, Time: builders.At(-time.Hour)}
			})),
			obs: newObs(), phase: v1alpha1.PhaseFailed,
			check: func(t *testing.T, d Decision) {
				assert.Equal(t, "transfer job web-01-transfer-1 failed: BackoffLimitExceeded: Job has reached...", d.Status.LastError.Summary)
			},
		},
	})
}
