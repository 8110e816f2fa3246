package statemachine

import (
	"slices"
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

var snapName = "migration-" + string(builders.UID)

func withSnapshot(m *v1alpha1.VirtualMachineMigration) {
	builders.WithSourceControl(func(sc *v1alpha1.SourceControlStatus) {
		sc.Snapshots = []v1alpha1.SnapshotRecord{{Name: snapName, MoRef: "snapshot-9", RequestedAt: builders.TP(-time.Hour)}}
	})(m)
}

func TestRollingBack(t *testing.T) {
	m := func(opts ...builders.MigrationMod) *v1alpha1.VirtualMachineMigration {
		return newMigration(append([]builders.MigrationMod{builders.Reached(v1alpha1.PhaseRollingBack)}, opts...)...)
	}
	restored := builders.WithSourceControl(func(sc *v1alpha1.SourceControlStatus) {
		sc.RestoreRequestedAt, sc.RestoredAt = builders.TP(-20*time.Second), builders.TP(-5*time.Second)
	})
	originallyOff := builders.WithSourceControl(func(sc *v1alpha1.SourceControlStatus) { sc.OriginalPowerState = PowerStateOff })
	failed := func(message string) func(*testing.T, Decision) {
		return func(t *testing.T, d Decision) {
			wantTime(t, "completionTime", d.Status.CompletionTime, 0)
			wantLastError(t, d, v1alpha1.PhaseTransferringDisks, ReasonTransferFailed)
			wantCond(t, d, ConditionFailed, metav1.ConditionTrue, ReasonTransferFailed)
			wantCond(t, d, ConditionReady, metav1.ConditionFalse, ReasonTransferFailed)
			assert.Nil(t, evidenceFor(d.Status, v1alpha1.PhaseRollingBack), "evidence claimed for a rollback")
			assert.True(t, slices.ContainsFunc(d.Events, func(e Event) bool {
				return e.Reason == PhaseChangedReason(d.Status.Phase) && strings.Contains(e.Message, message)
			}), "want a %s event saying %q: %+v", d.Status.Phase, message, d.Events)
		}
	}
	runCases(t, map[string]decideCase{
		"an active transfer job is stopped first": {
			m: m(), obs: newObs(sourceOff, transferJob(JobObservation{Name: naming.TransferJob(builders.Name, 1)})),
			phase: v1alpha1.PhaseRollingBack, action: ActionDeleteJob, name: naming.TransferJob(builders.Name, 1),
		},
		"an active conversion job is stopped": {
			m: m(), obs: newObs(sourceOff, conversionJob(JobObservation{Name: naming.ConversionJob(builders.Name, 1)})),
			phase: v1alpha1.PhaseRollingBack, action: ActionDeleteJob, name: naming.ConversionJob(builders.Name, 1),
		},
		"our running VM is halted before the source is restored": {
			m: m(), obs: newObs(sourceOff, targetVM(true, RunStrategyAlways)),
			phase: v1alpha1.PhaseRollingBack, action: ActionHaltVM, name: builders.DefaultTarget,
		},
		"somebody else's VM is left alone": {
			m: m(), obs: newObs(sourceOff, targetVM(false, RunStrategyAlways), liveVMI(nil)),
			phase: v1alpha1.PhaseRollingBack, action: ActionPowerOnSource,
		},
		"source stopped by us and was on: power it on, intent first": {
			m: m(), obs: newObs(sourceOff, liveVMI(nil)),
			phase: v1alpha1.PhaseRollingBack, action: ActionPowerOnSource, requeue: DefaultPollInterval,
			check: func(t *testing.T, d Decision) {
				wantTime(t, "restoreRequestedAt", d.Status.SourceControl.RestoreRequestedAt, 0)
				wantCond(t, d, ConditionReady, metav1.ConditionFalse, ReasonTransferFailed)
			},
		},
		"power-on requested a moment ago: wait": {
			m:     m(builders.WithSourceControl(func(sc *v1alpha1.SourceControlStatus) { sc.RestoreRequestedAt = builders.TP(-4 * time.Second) })),
			obs:   newObs(sourceOff, liveVMI(nil)),
			phase: v1alpha1.PhaseRollingBack, requeue: 6 * time.Second,
		},
		"source seen on again: RestoredAt": {
			m:     m(builders.WithSourceControl(func(sc *v1alpha1.SourceControlStatus) { sc.RestoreRequestedAt = builders.TP(-20 * time.Second) })),
			obs:   newObs(sourceOn(true)),
			phase: v1alpha1.PhaseRollingBack,
			check: func(t *testing.T, d Decision) {
				wantTime(t, "restoredAt", d.Status.SourceControl.RestoredAt, 0)
				assert.Contains(t, eventReasons(d), ReasonSourceRestored, "want a SourceRestored event")
			},
		},
		"restored: Failed": {
			m: m(restored), obs: newObs(sourceOn(true)),
			phase: v1alpha1.PhaseFailed, check: failed("powered on again"),
		},
		"source originally off: Failed without power-on": {
			m: m(originallyOff), obs: newObs(sourceOff),
			phase: v1alpha1.PhaseFailed, check: failed("stays poweredOff"),
		},
		"source never touched: Failed": {
			m:     newMigration(builders.Reached(v1alpha1.PhaseRollingBack), builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) { s.SourceControl = nil })),
			phase: v1alpha1.PhaseFailed, check: failed("not touched"),
		},
		"source power state not read": {
			m: m(), obs: newObs(),
			phase: v1alpha1.PhaseRollingBack, requeue: DefaultPollInterval,
		},
		"source unreachable: wait, keep the original error": {
			m: m(), obs: newObs(sourceError(ErrorTransient, "VCenterBusy")),
			phase: v1alpha1.PhaseRollingBack, requeue: DefaultWaitInterval,
			check: func(t *testing.T, d Decision) {
				wantLastError(t, d, v1alpha1.PhaseTransferringDisks, ReasonTransferFailed)
				wantCond(t, d, ConditionProgressing, metav1.ConditionFalse, "VCenterBusy")
			},
		},
		"source gone: nothing to restore": {
			m: m(), obs: newObs(sourceError(ErrorGone, ReasonSourceVMNotFound)),
			phase: v1alpha1.PhaseFailed,
			check: func(t *testing.T, d Decision) {
				failed("no longer exists")(t, d)
				assert.Contains(t, eventReasons(d), ReasonSourceVMNotFound, "want an event for the lost source")
				wantTime(t, "sourceGoneAt", d.Status.SourceControl.SourceGoneAt, 0)
			},
		},
		"a permanent failure to read the source does not end the restore": {
			m: m(), obs: newObs(sourceError(ErrorPermanent, "SourceError")),
			phase: v1alpha1.PhaseRollingBack, requeue: DefaultWaitInterval,
			check: func(t *testing.T, d Decision) {
				wantCond(t, d, ConditionSourceRestoreFailed, metav1.ConditionTrue, ReasonSourceRestoreFailed)
				wantLastError(t, d, v1alpha1.PhaseTransferringDisks, ReasonTransferFailed)
			},
		},
		"snapshot recorded and present: remove it": {
			m: m(restored, withSnapshot), obs: newObs(sourceOn(true), sourceSnapshots(snapName, "user-snap")),
			phase: v1alpha1.PhaseRollingBack, action: ActionRemoveSnapshot, name: snapName,
		},
		"snapshot recorded, source not read: remove it (idempotent)": {
			m:     m(restored, withSnapshot),
			phase: v1alpha1.PhaseRollingBack, action: ActionRemoveSnapshot, name: snapName,
		},
		"snapshot gone: recorded, then Failed": {
			m: m(restored, withSnapshot), obs: newObs(sourceOn(true), sourceSnapshots("user-snap")),
			phase: v1alpha1.PhaseFailed,
			check: func(t *testing.T, d Decision) {
				wantTime(t, "removedAt", d.Status.SourceControl.Snapshots[0].RemovedAt, 0)
			},
		},
	})
}

func TestDeletion(t *testing.T) {
	nonTerminal := []v1alpha1.Phase{
		v1alpha1.PhasePending, v1alpha1.PhaseValidating, v1alpha1.PhaseAwaitingApproval, v1alpha1.PhaseQueued,
		v1alpha1.PhaseStoppingSource, v1alpha1.PhaseTransferringDisks, v1alpha1.PhaseConverting, v1alpha1.PhaseImporting,
		v1alpha1.PhaseCreatingVM, v1alpha1.PhaseStarting, v1alpha1.PhaseCleaningUp, v1alpha1.PhaseRollingBack,
	}
	cases := map[string]decideCase{}
	for _, p := range nonTerminal {
		cases["deleted during "+string(p)+": Cancelling"] = decideCase{
			m: newMigration(builders.Reached(p), builders.Deleted), obs: newObs(sourceOff, targetVM(true, RunStrategyAlways), claims(stagingClaims()...)),
			phase: v1alpha1.PhaseCancelling, action: ActionNone, requeue: ms,
			check: func(t *testing.T, d Decision) {
				assert.Contains(t, eventReasons(d), ReasonCancelled, "want a Cancelled event: %+v", d.Events)
			},
		}
	}
	cancelling := func(opts ...builders.MigrationMod) *v1alpha1.VirtualMachineMigration {
		return newMigration(append([]builders.MigrationMod{builders.Reached(v1alpha1.PhaseCancelling), builders.Deleted}, opts...)...)
	}
	children := []obsOpt{claims(stagingClaims()...), jobs(naming.TransferJob(builders.Name, 1)), childDVs(dvNames()[0])}
	restored := builders.WithSourceControl(func(sc *v1alpha1.SourceControlStatus) { sc.RestoredAt = builders.TP(-time.Second) })
	startRequested := builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) { s.Target.StartRequestedAt = builders.TP(-time.Minute) })
	for name, tc := range map[string]decideCase{
		"deleted while paused: cancellation still runs": {
			m:     newMigration(builders.Reached(v1alpha1.PhaseImporting), builders.Paused, builders.Deleted),
			phase: v1alpha1.PhaseCancelling,
		},
		"Cancelling: our VM that never ran is deleted first": {
			m: cancelling(), obs: newObs(append(children, sourceOff, targetVM(true, RunStrategyHalted))...),
			phase: v1alpha1.PhaseCancelling, action: ActionDeleteVM, name: builders.DefaultTarget,
		},
		"Cancelling: our started VM is halted, and kept": {
			m: cancelling(), obs: newObs(append(children, sourceOff, targetVM(true, RunStrategyAlways))...),
			phase: v1alpha1.PhaseCancelling, action: ActionHaltVM, name: builders.DefaultTarget,
			check: func(t *testing.T, d Decision) {
				wantCond(t, d, ConditionTargetKept, metav1.ConditionTrue, ReasonTargetKept)
			},
		},
		"Cancelling: our started VM, halted: staging deleted, DataVolumes kept": {
			m: cancelling(startRequested), obs: newObs(append(children, sourceOff, targetVM(true, RunStrategyHalted))...),
			phase: v1alpha1.PhaseCancelling, action: ActionDeleteStaging,
			check: func(t *testing.T, d Decision) {
				for _, o := range d.Action.Objects {
					assert.NotContains(t, []string{KindDataVolume, KindVirtualMachine}, o.Kind, "a started target's %s %s is deleted", o.Kind, o.Name)
				}
			},
		},
		"Cancelling: a VM not ours is kept, children deleted": {
			m: cancelling(), obs: newObs(append(children, sourceOff, targetVM(false, RunStrategyAlways))...),
			phase: v1alpha1.PhaseCancelling, action: ActionDeleteChildren,
		},
		"Cancelling: children deleted while they exist": {
			m: cancelling(), obs: newObs(sourceOff, childDVs(dvNames()...)),
			phase: v1alpha1.PhaseCancelling, action: ActionDeleteChildren,
		},
		"Cancelling: the source is powered on again": {
			m: cancelling(), obs: newObs(sourceOff, liveVMI(nil)),
			phase: v1alpha1.PhaseCancelling, action: ActionPowerOnSource,
			check: func(t *testing.T, d Decision) {
				wantTime(t, "restoreRequestedAt", d.Status.SourceControl.RestoreRequestedAt, 0)
			},
		},
		"Cancelling: a snapshot is removed": {
			m: cancelling(restored, withSnapshot), obs: newObs(sourceOn(true), sourceSnapshots(snapName)),
			phase: v1alpha1.PhaseCancelling, action: ActionRemoveSnapshot, name: snapName,
		},
		"Cancelling: all done, release the finalizer": {
			m: cancelling(restored), obs: newObs(sourceOn(true)),
			phase: v1alpha1.PhaseCancelling, action: ActionRemoveFinalizer, name: v1alpha1.FinalizerName,
		},
		"Cancelling, source originally off: release the finalizer": {
			m:     cancelling(builders.WithSourceControl(func(sc *v1alpha1.SourceControlStatus) { sc.OriginalPowerState = PowerStateOff })),
			obs:   newObs(sourceOff),
			phase: v1alpha1.PhaseCancelling, action: ActionRemoveFinalizer,
		},
		"Succeeded: the migrated VM and its disks are never deleted, staging objects are": {
			m: newMigration(builders.Reached(v1alpha1.PhaseSucceeded), builders.Deleted), obs: newObs(append(children, sourceOff, targetVM(true, RunStrategyAlways))...),
			phase: v1alpha1.PhaseSucceeded, action: ActionDeleteStaging,
			check: func(t *testing.T, d Decision) {
				for _, o := range d.Action.Objects {
					assert.NotContains(t, []string{KindDataVolume, KindVirtualMachine}, o.Kind, "deleting a Succeeded migration deletes %s %s", o.Kind, o.Name)
				}
			},
		},
		"Succeeded: the source stays off, the finalizer is released": {
			// The target VM was handed over (ReleaseTarget): no longer seen.
			m: newMigration(builders.Reached(v1alpha1.PhaseSucceeded), builders.Deleted), obs: newObs(sourceOff),
			phase: v1alpha1.PhaseSucceeded, action: ActionRemoveFinalizer,
		},
		"Failed: children deleted": {
			m: newMigration(builders.Reached(v1alpha1.PhaseFailed), builders.Deleted), obs: newObs(children...),
			phase: v1alpha1.PhaseFailed, action: ActionDeleteChildren,
		},
		"Failed: its unfinished target VM is deleted first": {
			m: newMigration(builders.Reached(v1alpha1.PhaseFailed), builders.Deleted), obs: newObs(append(children, targetVM(true, RunStrategyHalted))...),
			phase: v1alpha1.PhaseFailed, action: ActionDeleteVM,
		},
		"Failed: a VM that is not ours is left alone": {
			m: newMigration(builders.Reached(v1alpha1.PhaseFailed), builders.Deleted), obs: newObs(targetVM(false, RunStrategyAlways)),
			phase: v1alpha1.PhaseFailed, action: ActionRemoveFinalizer,
		},
		"Failed: finalizer released": {
			m:     newMigration(builders.Reached(v1alpha1.PhaseFailed), builders.Deleted),
			phase: v1alpha1.PhaseFailed, action: ActionRemoveFinalizer,
		},
		"no finalizer: nothing to do": {
			m: newMigration(builders.Reached(v1alpha1.PhaseTransferringDisks), builders.Deleted, builders.WithoutFinalizer), obs: newObs(children...),
			phase: v1alpha1.PhaseTransferringDisks, action: ActionNone,
		},
		"Cancelling without deletion (restored from a backup): waits": {
			m:     newMigration(builders.Reached(v1alpha1.PhaseCancelling)),
			phase: v1alpha1.PhaseCancelling, action: ActionNone,
		},
	} {
		cases[name] = tc
	}
	runCases(t, cases)
}

func TestPaused(t *testing.T) {
	cases := map[string]decideCase{}
	obs := newObs(sourceOn(true), slot(true), claims(stagingClaims()...), dataVolumes(DataVolumeSucceeded, "100.0%", true), targetVM(true, RunStrategyHalted))
	for _, p := range append(slicesWithout(builders.Happy, v1alpha1.PhaseSucceeded), v1alpha1.PhaseAwaitingApproval, v1alpha1.PhaseRollingBack) {
		cases[string(p)] = decideCase{
			m: newMigration(builders.Reached(p), builders.Paused), obs: obs,
			phase: p, action: ActionNone, requeue: -1,
			check: func(t *testing.T, d Decision) {
				c := wantCond(t, d, ConditionPaused, metav1.ConditionTrue, ReasonPaused)
				assert.Contains(t, c.Message, string(p), "the Paused message names the phase")
				wantCond(t, d, ConditionProgressing, metav1.ConditionFalse, ReasonPaused)
				wantNoCond(t, d, ConditionStalled)
			},
		}
	}
	cases["unpaused: the condition turns false"] = decideCase{
		m: newMigration(builders.Reached(v1alpha1.PhaseImporting), builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
			s.Conditions = []metav1.Condition{{Type: ConditionPaused, Status: metav1.ConditionTrue, Reason: ReasonPaused, LastTransitionTime: builders.At(-time.Hour)}}
		})),
		phase: v1alpha1.PhaseImporting, action: ActionCreateDataVolumes,
		check: func(t *testing.T, d Decision) {
			c := wantCond(t, d, ConditionPaused, metav1.ConditionFalse, ReasonNotPaused)
			assertTime(t, builders.At(0), &c.LastTransitionTime, "lastTransitionTime = %s, want now", c.LastTransitionTime)
		},
	}
	runCases(t, cases)
}

func slicesWithout(ps []v1alpha1.Phase, drop v1alpha1.Phase) []v1alpha1.Phase {
	var out []v1alpha1.Phase
	for _, p := range ps {
		if p != drop {
			out = append(out, p)
		}
	}
	return out
}

func TestTerminal(t *testing.T) {
	cases := map[string]decideCase{}
	obs := newObs(sourceOff, targetVM(true, RunStrategyAlways), transferJob(JobObservation{Name: "x", Failed: true}), claims(stagingClaims()...))
	for _, p := range []v1alpha1.Phase{v1alpha1.PhaseSucceeded, v1alpha1.PhaseFailed} {
		for _, mod := range []struct {
			name string
			opt  builders.MigrationMod
		}{{"", func(*v1alpha1.VirtualMachineMigration) {}}, {" paused", builders.Paused}, {" generation changed", builders.WithGeneration(5)}} {
			cases[string(p)+mod.name] = decideCase{
				m: newMigration(builders.Reached(p), mod.opt), obs: obs,
				phase: p, action: ActionNone, requeue: -1,
				check: func(t *testing.T, d Decision) {
					wantTime(t, "completionTime", d.Status.CompletionTime, -time.Minute)
					wantEnded(t, d, p)
				},
			}
		}
	}
	runCases(t, cases)
}

func TestUnknownPhaseFails(t *testing.T) {
	d := decide(newMigration(builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) { s.Phase = "Verifying" })), newObs())
	require.Equal(t, v1alpha1.PhaseRollingBack, d.Status.Phase, "an unknown phase, want RollingBack")
	wantLastError(t, d, "Verifying", ReasonFailed)
}
