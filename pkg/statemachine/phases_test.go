package statemachine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/test/builders"
)

const ms = time.Millisecond // the "look again at once" requeue of a phase change

func TestPending(t *testing.T) {
	runCases(t, map[string]decideCase{
		"no finalizer: add it and record the start time": {
			m:     newMigration(builders.WithoutFinalizer),
			obs:   newObs(),
			phase: v1alpha1.PhasePending, action: ActionAddFinalizer, name: v1alpha1.FinalizerName, requeue: -1,
			check: func(t *testing.T, d Decision) {
				wantTime(t, "startTime", d.Status.StartTime, 0)
				assert.Empty(t, d.Status.Evidence, "no evidence before the finalizer is set")
				wantCond(t, d, ConditionReady, metav1.ConditionFalse, string(v1alpha1.PhasePending))
			},
		},
		"finalizer set: advance to Validating with evidence": {
			m:     newMigration(),
			obs:   newObs(),
			phase: v1alpha1.PhaseValidating, requeue: ms,
			check: func(t *testing.T, d Decision) {
				wantEvidence(t, d, v1alpha1.PhasePending, 0)
				wantTime(t, "startTime", d.Status.StartTime, 0)
				wantTime(t, "phaseStartTime", d.Status.PhaseStartTime, 0)
				assert.Contains(t, eventReasons(d), PhaseChangedReason(v1alpha1.PhaseValidating), "want a Validating event: %+v", d.Events)
			},
		},
		"start time is kept once set": {
			m: newMigration(builders.WithoutFinalizer, builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
				s.Phase, s.StartTime = v1alpha1.PhasePending, builders.TP(-time.Hour)
			})),
			phase: v1alpha1.PhasePending, action: ActionAddFinalizer,
			check: func(t *testing.T, d Decision) { wantTime(t, "startTime", d.Status.StartTime, -time.Hour) },
		},
	})
}

func TestValidating(t *testing.T) {
	m := func(opts ...builders.MigrationMod) *v1alpha1.VirtualMachineMigration {
		return newMigration(append([]builders.MigrationMod{builders.Reached(v1alpha1.PhaseValidating)}, opts...)...)
	}
	noPhaseChange := func(reason string) func(*testing.T, Decision) {
		return func(t *testing.T, d Decision) {
			wantCond(t, d, ConditionProgressing, metav1.ConditionFalse, reason)
			wantLastError(t, d, v1alpha1.PhaseValidating, reason)
			assert.Nil(t, d.Status.Source, "inventory recorded from a failed read")
			wantNoCond(t, d, ConditionFailed)
		}
	}
	runCases(t, map[string]decideCase{
		"permanent source error fails at once": {
			m: m(), obs: newObs(sourceError(ErrorPermanent, ReasonSourceVMNotFound)),
			phase: v1alpha1.PhaseFailed, requeue: ms,
			check: func(t *testing.T, d Decision) {
				wantLastError(t, d, v1alpha1.PhaseValidating, ReasonSourceVMNotFound)
				// Nothing to roll back: Failed at once.
				wantCond(t, d, ConditionFailed, metav1.ConditionTrue, ReasonSourceVMNotFound)
				wantCond(t, d, ConditionReady, metav1.ConditionFalse, ReasonSourceVMNotFound)
				assert.Contains(t, eventReasons(d), ReasonSourceVMNotFound, "want a warning event for the failure: %+v", d.Events)
			},
		},
		"needs-user error waits with its reason": {
			m: m(), obs: newObs(sourceError(ErrorNeedsUser, "CredentialsSecretMissing")),
			phase: v1alpha1.PhaseValidating, requeue: DefaultWaitInterval,
			check: noPhaseChange("CredentialsSecretMissing"),
		},
		"transient error waits a poll interval": {
			m: m(), obs: newObs(sourceError(ErrorTransient, "VCenterBusy")),
			phase: v1alpha1.PhaseValidating, requeue: DefaultPollInterval,
			check: noPhaseChange("VCenterBusy"),
		},
		"needs-user error past the retry deadline fails": {
			m:     m(builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) { s.StartTime = builders.TP(-25 * time.Hour) })),
			obs:   newObs(sourceError(ErrorNeedsUser, "CredentialsSecretMissing")),
			phase: v1alpha1.PhaseFailed,
			check: func(t *testing.T, d Decision) {
				wantLastError(t, d, v1alpha1.PhaseValidating, "CredentialsSecretMissing")
				assert.Contains(t, d.Status.LastError.Message, "retry deadline", "the lastError message says the deadline passed")
			},
		},
		"transient error close to the retry deadline: look again at the deadline": {
			m: m(builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
				s.StartTime = builders.TP(-24*time.Hour + 5*time.Second)
			})),
			obs:   newObs(sourceError(ErrorNeedsUser, "CredentialsSecretMissing")),
			phase: v1alpha1.PhaseValidating, requeue: 5 * time.Second,
		},
		"transient error past a custom retry deadline fails": {
			m:     m(builders.RetryDeadline(30 * time.Minute)),
			obs:   newObs(sourceError(ErrorTransient, "VCenterBusy")),
			phase: v1alpha1.PhaseFailed,
		},
		"inventory not read yet": {
			m: m(), obs: newObs(),
			phase: v1alpha1.PhaseValidating, requeue: DefaultPollInterval,
			check: func(t *testing.T, d Decision) {
				wantCond(t, d, ConditionProgressing, metav1.ConditionTrue, ReasonWorking)
			},
		},
		"inventory recorded, target name defaulted, queued": {
			m:     m(builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) { s.Source, s.Target = nil, nil })),
			obs:   newObs(sourceInventory),
			phase: v1alpha1.PhaseQueued, requeue: ms,
			check: func(t *testing.T, d Decision) {
				assertSemanticEqual(t, builders.Inventory(), d.Status.Source, "status.source, want the inventory")
				if assert.NotNil(t, d.Status.Target, "target, want %s", builders.DefaultTarget) {
					assert.Equal(t, builders.DefaultTarget, d.Status.Target.Name, "target = %+v, want the default name", d.Status.Target)
				}
				wantEvidence(t, d, v1alpha1.PhaseValidating, 0)
				ev := evidenceFor(d.Status, v1alpha1.PhaseValidating)
				for _, want := range []string{"vm-42", "4 vCPU", "8192 MiB", "EFI", "2 disks", "2 NICs"} {
					assert.Contains(t, ev.Observed, want, "the evidence names what was read")
				}
			},
		},
		"spec.target.name wins over the default": {
			m: m(builders.TargetName("web-new")), obs: newObs(sourceInventory),
			phase: v1alpha1.PhaseQueued,
			check: func(t *testing.T, d Decision) {
				assert.Equal(t, "web-new", d.Status.Target.Name, "target, want spec.target.name")
			},
		},
		"blocking preflight finding fails": {
			m:     m(),
			obs:   newObs(sourceInventory, preflight(v1alpha1.SeverityWarning, "CBTDisabled"), preflight(v1alpha1.SeverityBlocking, "RDMDisk")),
			phase: v1alpha1.PhaseFailed,
			check: func(t *testing.T, d Decision) {
				wantLastError(t, d, v1alpha1.PhaseValidating, ReasonPreflightFailed)
				assert.Contains(t, d.Status.LastError.Message, "RDMDisk", "lastError should name the blocking finding")
				assert.NotContains(t, d.Status.LastError.Message, "CBTDisabled", "lastError should name the blocking finding only")
				assert.Len(t, d.Status.Preflight, 2, "want both findings recorded")
				assert.Nil(t, evidenceFor(d.Status, v1alpha1.PhaseValidating), "evidence recorded for a failed validation")
			},
		},
		"warnings are events and the migration advances": {
			m:     m(),
			obs:   newObs(sourceInventory, preflight(v1alpha1.SeverityWarning, "CBTDisabled"), preflight(v1alpha1.SeverityWarning, "VMwareToolsOld")),
			phase: v1alpha1.PhaseQueued,
			check: func(t *testing.T, d Decision) {
				n := 0
				for _, e := range d.Events {
					if e.Reason == "PreflightWarning" && e.Warning {
						n++
					}
				}
				assert.Equal(t, 2, n, "PreflightWarning events, want one per warning: %+v", d.Events)
				assert.Len(t, d.Status.Preflight, 2, "want both warnings recorded")
			},
		},
		"approval required": {
			m: m(builders.RequireApproval), obs: newObs(sourceInventory),
			phase: v1alpha1.PhaseAwaitingApproval,
		},
		"approval required and already given": {
			m: m(builders.RequireApproval, builders.Approved), obs: newObs(sourceInventory),
			phase: v1alpha1.PhaseQueued,
			check: func(t *testing.T, d Decision) {
				// An approval is a spec change that comes back through
				// Validating: the approval's evidence is recorded here.
				wantEvidence(t, d, v1alpha1.PhaseAwaitingApproval, 0)
			},
		},
	})
}

func TestAwaitingApproval(t *testing.T) {
	m := func(opts ...builders.MigrationMod) *v1alpha1.VirtualMachineMigration {
		return newMigration(append([]builders.MigrationMod{builders.RequireApproval, builders.Reached(v1alpha1.PhaseAwaitingApproval)}, opts...)...)
	}
	runCases(t, map[string]decideCase{
		"waits for a person, saying how to approve": {
			m: m(), obs: newObs(),
			phase: v1alpha1.PhaseAwaitingApproval, requeue: -1,
			check: func(t *testing.T, d Decision) {
				c := wantCond(t, d, ConditionApprovalRequired, metav1.ConditionTrue, ReasonAwaitingApproval)
				want := `kubectl patch vmm web01-mig -n apps --type merge -p '{"spec":{"policy":{"approved":true}}}'`
				assert.Contains(t, c.Message, want, "the ApprovalRequired message says how to approve")
				wantCond(t, d, ConditionProgressing, metav1.ConditionFalse, ReasonAwaitingApproval)
				wantNoCond(t, d, ConditionStalled)
			},
		},
		"waiting does not stall": {
			m:     m(builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) { s.LastProgressTime = builders.TP(-48 * time.Hour) })),
			phase: v1alpha1.PhaseAwaitingApproval,
			check: func(t *testing.T, d Decision) { wantNoCond(t, d, ConditionStalled) },
		},
		"approved: queued": {
			m: m(builders.Approved, builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
				s.Conditions = []metav1.Condition{{Type: ConditionApprovalRequired, Status: metav1.ConditionTrue, Reason: ReasonAwaitingApproval, LastTransitionTime: builders.At(-time.Hour)}}
			})),
			phase: v1alpha1.PhaseQueued, requeue: ms,
			check: func(t *testing.T, d Decision) {
				wantEvidence(t, d, v1alpha1.PhaseAwaitingApproval, 0)
				c := wantCond(t, d, ConditionApprovalRequired, metav1.ConditionFalse, ReasonApproved)
				assertTime(t, builders.At(0), &c.LastTransitionTime, "ApprovalRequired flipped but its transition time stayed %s", c.LastTransitionTime)
			},
		},
		"spec changed since validation: validate again": {
			m:     m(builders.WithGeneration(2)),
			phase: v1alpha1.PhaseValidating, requeue: ms,
			check: func(t *testing.T, d Decision) {
				assert.Nil(t, evidenceFor(d.Status, v1alpha1.PhaseAwaitingApproval), "evidence recorded for a step back")
			},
		},
	})
}

func TestQueued(t *testing.T) {
	m := func(opts ...builders.MigrationMod) *v1alpha1.VirtualMachineMigration {
		return newMigration(append([]builders.MigrationMod{builders.Reached(v1alpha1.PhaseQueued)}, opts...)...)
	}
	runCases(t, map[string]decideCase{
		"no transfer slot: wait": {
			m: m(), obs: newObs(slot(false), sourceOn(true)),
			phase: v1alpha1.PhaseQueued, requeue: DefaultWaitInterval,
			check: func(t *testing.T, d Decision) {
				c := wantCond(t, d, ConditionProgressing, metav1.ConditionFalse, ReasonWaitingForTransferSlot)
				assert.Contains(t, c.Message, "2 of 2 transfers", "the Progressing message says which limit holds")
				assert.Nil(t, d.Status.AppliedSpec, "committed to the cutover (appliedSpec) without a slot")
				assert.Nil(t, d.Status.SourceControl, "committed to the cutover (sourceControl) without a slot")
			},
		},
		"slot free: commit to the spec and record the power state": {
			m: m(), obs: newObs(slot(true), sourceOn(true)),
			phase: v1alpha1.PhaseStoppingSource, requeue: ms,
			check: func(t *testing.T, d Decision) {
				assertSemanticEqual(t, &newMigration().Spec, d.Status.AppliedSpec, "appliedSpec, want the spec")
				if sc := d.Status.SourceControl; assert.NotNil(t, sc, "sourceControl, want originalPowerState poweredOn") {
					assert.Equal(t, PowerStateOn, sc.OriginalPowerState, "sourceControl = %+v, want originalPowerState poweredOn", sc)
				}
				wantEvidence(t, d, v1alpha1.PhaseQueued, 0)
			},
		},
		"slot free, source already off": {
			m: m(), obs: newObs(slot(true), sourceOff),
			phase: v1alpha1.PhaseStoppingSource,
			check: func(t *testing.T, d Decision) {
				assert.Equal(t, PowerStateOff, d.Status.SourceControl.OriginalPowerState, "originalPowerState, want the source's")
			},
		},
		"slot free, power state not read yet": {
			m: m(), obs: newObs(slot(true)),
			phase: v1alpha1.PhaseQueued, requeue: DefaultPollInterval,
			check: func(t *testing.T, d Decision) {
				assert.Nil(t, d.Status.AppliedSpec, "committed without knowing the power state")
			},
		},
		"slot free, source read failed transiently": {
			m: m(), obs: newObs(slot(true), sourceError(ErrorTransient, "VCenterBusy")),
			phase: v1alpha1.PhaseQueued, requeue: DefaultPollInterval,
		},
		"spec changed since validation: validate again": {
			m: m(builders.WithGeneration(3)), obs: newObs(slot(true), sourceOn(true)),
			phase: v1alpha1.PhaseValidating,
		},
		"approval required again": {
			m: m(builders.RequireApproval), obs: newObs(slot(true), sourceOn(true)),
			phase: v1alpha1.PhaseAwaitingApproval,
		},
	})
}

func TestStoppingSource(t *testing.T) {
	m := func(opts ...builders.MigrationMod) *v1alpha1.VirtualMachineMigration {
		return newMigration(append([]builders.MigrationMod{builders.Reached(v1alpha1.PhaseStoppingSource)}, opts...)...)
	}
	shutdownAt := func(d time.Duration) builders.MigrationMod {
		return builders.WithSourceControl(func(sc *v1alpha1.SourceControlStatus) { sc.ShutdownRequestedAt = builders.TP(d) })
	}
	powerOffAt := func(d time.Duration) builders.MigrationMod {
		return builders.WithSourceControl(func(sc *v1alpha1.SourceControlStatus) { sc.PowerOffRequestedAt = builders.TP(d) })
	}
	evidence := func(how string) func(*testing.T, Decision) {
		return func(t *testing.T, d Decision) {
			wantTime(t, "poweredOffAt", d.Status.SourceControl.PoweredOffAt, 0)
			wantEvidence(t, d, v1alpha1.PhaseStoppingSource, 0)
			assert.Contains(t, evidenceFor(d.Status, v1alpha1.PhaseStoppingSource).Observed, how, "the evidence says how the source stopped")
		}
	}
	runCases(t, map[string]decideCase{
		"already off": {
			m: m(), obs: newObs(sourceOff),
			phase: v1alpha1.PhaseTransferringDisks, requeue: ms, check: evidence("was already powered off"),
		},
		"off after a guest shutdown": {
			m: m(shutdownAt(-time.Minute)), obs: newObs(sourceOff),
			phase: v1alpha1.PhaseTransferringDisks, check: evidence("shut down by the guest"),
		},
		"off after a power-off": {
			m: m(shutdownAt(-6*time.Minute), powerOffAt(-time.Minute)), obs: newObs(sourceOff),
			phase: v1alpha1.PhaseTransferringDisks, check: evidence("powered off"),
		},
		"on with tools: guest shutdown, intent written in the same decision": {
			m: m(), obs: newObs(sourceOn(true)),
			phase: v1alpha1.PhaseStoppingSource, action: ActionShutdownGuest, requeue: DefaultPollInterval,
			check: func(t *testing.T, d Decision) {
				wantTime(t, "shutdownRequestedAt", d.Status.SourceControl.ShutdownRequestedAt, 0)
				assert.Nil(t, d.Status.SourceControl.PowerOffRequestedAt, "power-off requested with the guest shutdown")
			},
		},
		"guest shutting down within the timeout: wait": {
			m: m(shutdownAt(-time.Minute)), obs: newObs(sourceOn(true)),
			phase: v1alpha1.PhaseStoppingSource, requeue: DefaultPollInterval,
			check: func(t *testing.T, d Decision) {
				wantTime(t, "shutdownRequestedAt", d.Status.SourceControl.ShutdownRequestedAt, -time.Minute)
			},
		},
		"guest shutdown timeout close: look again at the timeout": {
			m: m(shutdownAt(-5*time.Minute + 3*time.Second)), obs: newObs(sourceOn(true)),
			phase: v1alpha1.PhaseStoppingSource, requeue: 3 * time.Second,
		},
		"guest shutdown timed out: power off": {
			m: m(shutdownAt(-5 * time.Minute)), obs: newObs(sourceOn(true)),
			phase: v1alpha1.PhaseStoppingSource, action: ActionPowerOffSource, requeue: DefaultPollInterval,
			check: func(t *testing.T, d Decision) {
				wantTime(t, "powerOffRequestedAt", d.Status.SourceControl.PowerOffRequestedAt, 0)
			},
		},
		"PowerOff mode: power off at once": {
			m: newMigration(builders.PowerOffMode, builders.Reached(v1alpha1.PhaseStoppingSource)), obs: newObs(sourceOn(true)),
			phase: v1alpha1.PhaseStoppingSource, action: ActionPowerOffSource,
			check: func(t *testing.T, d Decision) {
				assert.Nil(t, d.Status.SourceControl.ShutdownRequestedAt, "guest shutdown requested in PowerOff mode")
				wantTime(t, "powerOffRequestedAt", d.Status.SourceControl.PowerOffRequestedAt, 0)
			},
		},
		"no tools: power off at once": {
			m: m(), obs: newObs(sourceOn(false)),
			phase: v1alpha1.PhaseStoppingSource, action: ActionPowerOffSource,
		},
		"suspended right before the stop: fail, never power it off": {
			m: m(), obs: newObs(func(o *Observation) { o.Source.Observed, o.Source.PowerState = true, PowerStateSuspended }),
			phase: v1alpha1.PhaseFailed,
			check: func(t *testing.T, d Decision) {
				wantLastError(t, d, v1alpha1.PhaseStoppingSource, ReasonSourceSuspended)
			},
		},
		"power-off requested less than a poll interval ago: wait": {
			m: newMigration(builders.PowerOffMode, builders.Reached(v1alpha1.PhaseStoppingSource), powerOffAt(-3*time.Second)), obs: newObs(sourceOn(true)),
			phase: v1alpha1.PhaseStoppingSource, requeue: 7 * time.Second,
			check: func(t *testing.T, d Decision) {
				wantTime(t, "powerOffRequestedAt", d.Status.SourceControl.PowerOffRequestedAt, -3*time.Second)
			},
		},
		"power-off requested a poll interval ago, still on: ask again": {
			m: newMigration(builders.PowerOffMode, builders.Reached(v1alpha1.PhaseStoppingSource), powerOffAt(-DefaultPollInterval)), obs: newObs(sourceOn(true)),
			phase: v1alpha1.PhaseStoppingSource, action: ActionPowerOffSource,
			check: func(t *testing.T, d Decision) {
				wantTime(t, "powerOffRequestedAt", d.Status.SourceControl.PowerOffRequestedAt, 0)
			},
		},
		"power state not read": {
			m: m(), obs: newObs(),
			phase: v1alpha1.PhaseStoppingSource, requeue: DefaultPollInterval,
		},
		"source gone": {
			m: m(), obs: newObs(sourceError(ErrorPermanent, ReasonSourceVMNotFound)),
			phase: v1alpha1.PhaseFailed,
			check: func(t *testing.T, d Decision) {
				wantLastError(t, d, v1alpha1.PhaseStoppingSource, ReasonSourceVMNotFound)
			},
		},
		"no source control recorded (status written by hand): still stops the source": {
			m: m(builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) { s.SourceControl = nil })), obs: newObs(sourceOn(true)),
			phase: v1alpha1.PhaseStoppingSource, action: ActionShutdownGuest,
		},
	})
}
