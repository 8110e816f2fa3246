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

// dryRun is a dry run answered at t0 with the objects' outcomes.
func dryRun(phase v1alpha1.Phase, objects ...v1alpha1.DryRunObject) obsOpt {
	return func(o *Observation) {
		st := &v1alpha1.DryRunStatus{Phase: phase, CheckedAt: builders.At(0), Objects: objects}
		for _, obj := range objects {
			if obj.Outcome == v1alpha1.DryRunRefused {
				st.Refused++
			}
		}
		o.DryRun = &DryRunObservation{Status: st}
	}
}

func dryRunObject(kind, name string, outcome v1alpha1.DryRunOutcome, message string) v1alpha1.DryRunObject {
	return v1alpha1.DryRunObject{APIVersion: "v1", Kind: kind, Name: name, Outcome: outcome, Message: message}
}

// proofJobName is the shared proof Job of a component in these tests.
func proofJobName(component string) string { return naming.ProofJob(component, "k-"+component) }

// proof is one image's proof: running (its shared Job, no result), or
// with a result (passed or failed).
func proof(component string, running bool, result *v1alpha1.ImageProof) obsOpt {
	return func(o *Observation) {
		o.Proofs = append(o.Proofs, ProofObservation{Component: component, JobName: proofJobName(component),
			Running: running, Result: result, Waiting: "pod Pending"})
	}
}

// staleProof is one image's proof whose shared Job serves no longer.
func staleProof(component string, job ObjectRef) obsOpt {
	return func(o *Observation) {
		o.Proofs = append(o.Proofs, ProofObservation{Component: component, JobName: proofJobName(component), Stale: &job})
	}
}

// sharedProofJob is the ref of a shared proof Job: no migration's.
func sharedProofJob(component string) ObjectRef {
	return ObjectRef{Kind: KindJob, Name: proofJobName(component), UID: "uid-proof-" + types.UID(component)}
}

func proofResult(component string, result v1alpha1.ProofResult, reason, message string) *v1alpha1.ImageProof {
	return &v1alpha1.ImageProof{Component: component, Image: "registry.example/" + component + ":1", Key: "k-" + component,
		JobName: proofJobName(component), CheckedAt: builders.At(-time.Second), Result: result, Reason: reason, Message: message}
}

func TestValidatingAsksTheCluster(t *testing.T) {
	m := func(opts ...builders.MigrationMod) *v1alpha1.VirtualMachineMigration {
		return newMigration(append([]builders.MigrationMod{builders.Reached(v1alpha1.PhaseValidating)}, opts...)...)
	}
	accepted := dryRun(v1alpha1.PhaseValidating, dryRunObject("PersistentVolumeClaim", "c", v1alpha1.DryRunAccepted, ""),
		dryRunObject("Job", "j", v1alpha1.DryRunWarned, `would violate PodSecurity "restricted:latest"`))
	passed := proofResult(v1alpha1.ComponentTransfer, v1alpha1.ProofPassed, "", "")
	runCases(t, map[string]decideCase{
		"a dry-run refusal fails in Validating once the proofs answered, the source untouched": {
			m: m(), obs: newObs(sourceInventory, dryRun(v1alpha1.PhaseValidating,
				dryRunObject("PersistentVolumeClaim", "c", v1alpha1.DryRunRefused, "exceeded quota: no-claims")),
				proof(v1alpha1.ComponentTransfer, false, passed),
				preflight(v1alpha1.SeverityBlocking, "DryRunRefused")),
			phase: v1alpha1.PhaseFailed, requeue: ms,
			check: func(t *testing.T, d Decision) {
				wantLastError(t, d, v1alpha1.PhaseValidating, ReasonPreflightFailed)
				assert.Contains(t, d.Status.LastError.Message, "DryRunRefused")
				require.NotNil(t, d.Status.DryRun, "the dry run's answer, want it in status")
				assert.Equal(t, int32(1), d.Status.DryRun.Refused)
				assert.Nil(t, d.Status.SourceControl, "a refusal before the stop recorded a power intent")
			},
		},
		"the dry run could not be made: wait, transiently": {
			m: m(), obs: newObs(sourceInventory, func(o *Observation) {
				o.DryRun = &DryRunObservation{Error: &ObservedError{Class: ErrorTransient, Reason: "APIUnavailable", Message: "the server is down"}}
			}),
			phase: v1alpha1.PhaseValidating, requeue: DefaultPollInterval,
			check: func(t *testing.T, d Decision) {
				wantCond(t, d, ConditionProgressing, metav1.ConditionFalse, "APIUnavailable")
			},
		},
		"no proof yet: start the first": {
			m: m(), obs: newObs(sourceInventory, accepted, proof(v1alpha1.ComponentTransfer, false, nil), proof(v1alpha1.ComponentConversion, false, nil)),
			phase: v1alpha1.PhaseValidating, action: ActionCreateProofJob, name: v1alpha1.ComponentTransfer, requeue: DefaultPollInterval,
			check: func(t *testing.T, d Decision) {
				require.NotNil(t, d.Status.DryRun, "the accepted dry run, want it in status")
				assert.Len(t, d.Status.DryRun.Objects, 2)
			},
		},
		"one proof running: start the other beside it": {
			m: m(), obs: newObs(sourceInventory, accepted, proof(v1alpha1.ComponentTransfer, true, nil), proof(v1alpha1.ComponentConversion, false, nil)),
			phase: v1alpha1.PhaseValidating, action: ActionCreateProofJob, name: v1alpha1.ComponentConversion,
		},
		"proofs running: wait for them": {
			m: m(), obs: newObs(sourceInventory, accepted, proof(v1alpha1.ComponentTransfer, true, nil)),
			phase: v1alpha1.PhaseValidating, requeue: DefaultPollInterval,
			check: func(t *testing.T, d Decision) {
				c := wantCond(t, d, ConditionProgressing, metav1.ConditionTrue, ReasonWorking)
				assert.Contains(t, c.Message, "proving that the transfer image runs")
				assert.Contains(t, c.Message, "pod Pending")
			},
		},
		"a result is in: record it and go on; the shared proof stays for the others": {
			m: m(), obs: newObs(sourceInventory, accepted, proof(v1alpha1.ComponentTransfer, false, passed), proof(v1alpha1.ComponentConversion, true, nil)),
			phase: v1alpha1.PhaseValidating, requeue: DefaultPollInterval,
			check: func(t *testing.T, d Decision) {
				require.Len(t, d.Status.ImageProofs, 1)
				assert.Equal(t, v1alpha1.ProofPassed, d.Status.ImageProofs[0].Result)
				assert.Contains(t, wantCond(t, d, ConditionProgressing, metav1.ConditionTrue, ReasonWorking).Message,
					"proving that the conversion image runs in namespace apps (job "+proofJobName(v1alpha1.ComponentConversion)+")")
			},
		},
		"a stale proof (a pass older than the TTL, a failure before this validation): delete its shared Job first": {
			m: m(), obs: newObs(sourceInventory, accepted, staleProof(v1alpha1.ComponentTransfer, sharedProofJob(v1alpha1.ComponentTransfer)),
				proof(v1alpha1.ComponentConversion, false, nil)),
			phase: v1alpha1.PhaseValidating, action: ActionDeleteStaleProof, name: v1alpha1.ComponentTransfer, requeue: DefaultPollInterval,
			check: func(t *testing.T, d Decision) {
				assert.Equal(t, []ObjectRef{sharedProofJob(v1alpha1.ComponentTransfer)}, d.Action.Objects,
					"the shared proof Job, though no migration's: the pipeline deletes only a proof-labelled Job of that UID")
			},
		},
		"every check answered, nothing blocks: on to Queued with the evidence": {
			m: m(), obs: newObs(sourceInventory, accepted, proof(v1alpha1.ComponentTransfer, false, passed)),
			phase: v1alpha1.PhaseQueued, requeue: ms,
			check: func(t *testing.T, d Decision) {
				ev := evidenceFor(d.Status, v1alpha1.PhaseValidating)
				require.NotNil(t, ev)
				assert.Contains(t, ev.Observed, "accepted the dry run of 2 objects (1 with warnings)")
				assert.Contains(t, ev.Observed, "images run here: transfer (registry.example/transfer:1)")
			},
		},
		"a failed proof blocks, in the cluster's words": {
			m: m(), obs: newObs(sourceInventory, accepted,
				proof(v1alpha1.ComponentTransfer, false, proofResult(v1alpha1.ComponentTransfer, v1alpha1.ProofFailed, "ErrImageNeverPull", "not present")),
				preflight(v1alpha1.SeverityBlocking, "TransferImageNotRunnable")),
			phase: v1alpha1.PhaseFailed,
			check: func(t *testing.T, d Decision) {
				wantLastError(t, d, v1alpha1.PhaseValidating, ReasonPreflightFailed)
				assert.Contains(t, d.Status.LastError.Message, "TransferImageNotRunnable")
				assert.Equal(t, ActionNone, d.Action.Type, "the failed proof refuses the others of its key too: it stays")
				require.Len(t, d.Status.ImageProofs, 1)
				assert.Equal(t, "ErrImageNeverPull", d.Status.ImageProofs[0].Reason)
			},
		},
	})
}

// TestValidatingReportsEveryBlockingFinding: one validation pass reports
// every blocking finding it can determine, as a compiler reports every
// error: a refusal found early (a failed proof, a dry-run refusal, a
// preflight rule) waits for the proofs still to run or running, whose
// findings (a conversion image without virtio-win for a Windows guest)
// join it in the one failure.
func TestValidatingReportsEveryBlockingFinding(t *testing.T) {
	m := func() *v1alpha1.VirtualMachineMigration {
		return newMigration(builders.Reached(v1alpha1.PhaseValidating))
	}
	transferFailed := proof(v1alpha1.ComponentTransfer, false, proofResult(v1alpha1.ComponentTransfer, v1alpha1.ProofFailed, "ErrImageNeverPull", "not present"))
	transferRefused := preflight(v1alpha1.SeverityBlocking, "TransferImageNotRunnable")
	notFailedYet := func(t *testing.T, d Decision) {
		assert.Nil(t, d.Status.LastError, "failed before every check that can answer did")
		c := wantCond(t, d, ConditionProgressing, metav1.ConditionTrue, ReasonWorking)
		assert.Contains(t, c.Message, "proving that the conversion image runs")
		assert.Contains(t, c.Message, "1 blocking finding so far (TransferImageNotRunnable)")
	}
	runCases(t, map[string]decideCase{
		"the transfer image's proof failed, the conversion's is still to run: run it": {
			m: m(), obs: newObs(sourceInventory, transferFailed, proof(v1alpha1.ComponentConversion, false, nil), transferRefused),
			phase: v1alpha1.PhaseValidating, action: ActionCreateProofJob, name: v1alpha1.ComponentConversion, requeue: DefaultPollInterval,
			check: notFailedYet,
		},
		"the transfer image's proof failed, the conversion's runs: wait for it, keeping its Job": {
			m: m(), obs: newObs(sourceInventory, transferFailed, proof(v1alpha1.ComponentConversion, true, nil), transferRefused),
			phase: v1alpha1.PhaseValidating, requeue: DefaultPollInterval,
			check: notFailedYet,
		},
		"every proof answered: one failure with every finding": {
			m: m(), obs: newObs(sourceInventory, transferFailed,
				proof(v1alpha1.ComponentConversion, false, proofResult(v1alpha1.ComponentConversion, v1alpha1.ProofPassed, "", "")),
				transferRefused, preflight(v1alpha1.SeverityBlocking, "WindowsWithoutVirtioDrivers")),
			phase: v1alpha1.PhaseFailed,
			check: func(t *testing.T, d Decision) {
				wantLastError(t, d, v1alpha1.PhaseValidating, ReasonPreflightFailed)
				assert.Equal(t, "TransferImageNotRunnable: TransferImageNotRunnable found; WindowsWithoutVirtioDrivers: WindowsWithoutVirtioDrivers found",
					d.Status.LastError.Message)
			},
		},
		"a proof a finding forbids is not run: the failure does not wait for it": {
			m: m(), obs: newObs(sourceInventory, proof(v1alpha1.ComponentTransfer, false, proofResult(v1alpha1.ComponentTransfer, v1alpha1.ProofPassed, "", "")),
				proof(v1alpha1.ComponentConversion, false, nil), func(o *Observation) {
					o.Proofs[1].NotRun = "ConversionImageNotAllowed: spec.conversion.image is not allowed"
				}, preflight(v1alpha1.SeverityBlocking, "ConversionImageNotAllowed")),
			phase: v1alpha1.PhaseFailed,
			check: func(t *testing.T, d Decision) {
				assert.NotEqual(t, ActionCreateProofJob, d.Action.Type, "ran the proof of an image a finding forbids")
				wantLastError(t, d, v1alpha1.PhaseValidating, ReasonPreflightFailed)
				assert.Contains(t, d.Status.LastError.Message, "ConversionImageNotAllowed")
			},
		},
		"the dry run could not be made beside a finding: fail with the finding, saying so": {
			m: m(), obs: newObs(sourceInventory, func(o *Observation) {
				o.DryRun = &DryRunObservation{Error: &ObservedError{Class: ErrorPermanent, Reason: "RenderFailed", Message: "rendering the objects: no image"}}
			}, proof(v1alpha1.ComponentTransfer, false, proofResult(v1alpha1.ComponentTransfer, v1alpha1.ProofPassed, "", "")),
				preflight(v1alpha1.SeverityBlocking, "NoConversionImage")),
			phase: v1alpha1.PhaseFailed,
			check: func(t *testing.T, d Decision) {
				wantLastError(t, d, v1alpha1.PhaseValidating, ReasonPreflightFailed)
				assert.Equal(t, "NoConversionImage: NoConversionImage found; RenderFailed: the dry run could not be made: rendering the objects: no image",
					d.Status.LastError.Message)
			},
		},
	})
}

func TestQueuedDryRunsAgainBeforeTheStop(t *testing.T) {
	m := newMigration(builders.Reached(v1alpha1.PhaseQueued))
	runCases(t, map[string]decideCase{
		"refused right before the stop: fail with the source untouched": {
			m: m, obs: newObs(slot(true), sourceOn(true),
				dryRun(v1alpha1.PhaseQueued, dryRunObject("VirtualMachine", "vm", v1alpha1.DryRunRefused, "admission webhook denied")),
				preflight(v1alpha1.SeverityBlocking, "DryRunRefused")),
			phase: v1alpha1.PhaseFailed, requeue: ms,
			check: func(t *testing.T, d Decision) {
				wantLastError(t, d, v1alpha1.PhaseQueued, ReasonPreflightFailed)
				assert.Nil(t, d.Status.SourceControl, "a power intent recorded though the dry run refused")
				assert.Nil(t, d.Status.AppliedSpec, "the cutover committed though the dry run refused")
				require.NotNil(t, d.Status.DryRun)
				assert.Equal(t, v1alpha1.PhaseQueued, d.Status.DryRun.Phase)
				assert.Contains(t, d.Status.Preflight, v1alpha1.PreflightFinding{Reason: "DryRunRefused", Severity: v1alpha1.SeverityBlocking, Message: "DryRunRefused found"})
			},
		},
		"accepted right before the stop: stop": {
			m: m, obs: newObs(slot(true), sourceOn(true), dryRun(v1alpha1.PhaseQueued, dryRunObject("Job", "j", v1alpha1.DryRunAccepted, ""))),
			phase: v1alpha1.PhaseStoppingSource, requeue: ms,
			check: func(t *testing.T, d Decision) {
				require.NotNil(t, d.Status.DryRun)
				assert.Equal(t, v1alpha1.PhaseQueued, d.Status.DryRun.Phase)
			},
		},
	})
}

func TestPodThatDoesNotStartFailsTheAttempt(t *testing.T) {
	job1, job2 := naming.TransferJob(builders.Name, 1), naming.TransferJob(builders.Name, 2)
	conv1, conv2 := naming.ConversionJob(builders.Name, 1), naming.ConversionJob(builders.Name, 2)
	transferring := func(opts ...builders.MigrationMod) *v1alpha1.VirtualMachineMigration {
		return newMigration(append([]builders.MigrationMod{builders.Reached(v1alpha1.PhaseTransferringDisks), builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
			s.Transfer = &v1alpha1.JobStatus{JobName: job1, Attempt: 1}
		})}, opts...)...)
	}
	converting := newMigration(builders.Reached(v1alpha1.PhaseConverting), builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
		s.Conversion = conversionAttempt(builders.Name, 1)
	}))
	pull := &PodStartProblem{Reason: "ErrImageNeverPull", Message: `Container image "x:1" is not present with pull policy of Never`}
	stuck := func(name string, conversion bool) obsOpt {
		j := JobObservation{Name: name, CreatedAt: builders.At(-DefaultPodStartTimeout).Time, StartProblem: pull}
		if conversion {
			return conversionJob(j)
		}
		return transferJob(j)
	}
	runCases(t, map[string]decideCase{
		"not started, before the timeout: wait, saying why and until when": {
			m: transferring(), obs: newObs(claims(stagingClaims()...), stuck(job1, false)), now: -time.Minute,
			phase: v1alpha1.PhaseTransferringDisks, requeue: DefaultPollInterval,
			check: func(t *testing.T, d Decision) {
				c := wantCond(t, d, ConditionProgressing, metav1.ConditionTrue, ReasonWorking)
				assert.Contains(t, c.Message, "its pod has not started: ErrImageNeverPull")
				assert.Zero(t, d.Status.Retries)
			},
		},
		"not started at the timeout: a failed attempt, the stuck Job deleted": {
			m: transferring(), obs: newObs(claims(stagingClaims()...), stuck(job1, false)),
			phase: v1alpha1.PhaseTransferringDisks, action: ActionDeleteJob, name: job1,
			check: func(t *testing.T, d Decision) {
				assert.Equal(t, int32(1), d.Status.Retries)
				wantLastError(t, d, v1alpha1.PhaseTransferringDisks, ReasonPodNotStarted)
				assert.Contains(t, d.Status.LastError.Message, "did not start within 5m0s: ErrImageNeverPull")
				assert.Equal(t, job2, d.Status.Transfer.JobName, "the next attempt")
				require.Len(t, d.Action.Objects, 1)
			},
		},
		"not started at the timeout, budget spent: roll back": {
			m: transferring(builders.RetryLimit(0)), obs: newObs(claims(stagingClaims()...), stuck(job1, false)),
			phase: v1alpha1.PhaseRollingBack,
			check: func(t *testing.T, d Decision) {
				wantLastError(t, d, v1alpha1.PhaseTransferringDisks, ReasonPodNotStarted)
				assert.Contains(t, d.Status.LastError.Message, "ErrImageNeverPull")
			},
		},
		"a conversion pod that did not start: only the conversion again": {
			m: converting, obs: newObs(stuck(conv1, true)),
			phase: v1alpha1.PhaseConverting, action: ActionDeleteJob, name: conv1,
			check: func(t *testing.T, d Decision) {
				assert.Equal(t, conv2, d.Status.Conversion.JobName)
				assert.NotNil(t, d.Status.Transfer.CompletedAt, "the transfer is kept: the conversion never touched the disks")
				wantLastError(t, d, v1alpha1.PhaseConverting, ReasonPodNotStarted)
			},
		},
	})
}
