package statemachine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/test/builders"
)

// workerPod is a pod of job that may still run, being deleted or not.
func workerPod(job string, deleting bool) obsOpt {
	return func(o *Observation) {
		o.Workers = append(o.Workers, WorkerObservation{Ref: ref(KindPod, job+"-x7k2p"), Job: job, Deleting: deleting})
	}
}

// workerJob is a Job that has not finished, or is being deleted.
func workerJob(job string, deleting bool) obsOpt {
	return func(o *Observation) {
		o.Workers = append(o.Workers, WorkerObservation{Ref: ref(KindJob, job), Job: job, Deleting: deleting})
	}
}

// TestNoAttemptStartsBesideAnEarlierOne: after an attempt counted as
// failed (its pod did not start in time, its Job failed), the next
// attempt's Job is created only once nothing of the earlier attempts may
// run any more: a pod whose image pull succeeds late would otherwise
// write the same claims as the new attempt's. A Job of an earlier attempt
// that still exists is deleted (its pods before it), and a wait that
// does not end fails the migration at the retry deadline, with no second
// writer started.
func TestNoAttemptStartsBesideAnEarlierOne(t *testing.T) {
	job1, job2 := naming.TransferJob(builders.Name, 1), naming.TransferJob(builders.Name, 2)
	conv1, conv2 := naming.ConversionJob(builders.Name, 1), naming.ConversionJob(builders.Name, 2)
	verify2 := naming.VerificationJob(builders.Name, 2)
	transferring := func(opts ...builders.MigrationMod) *v1alpha1.VirtualMachineMigration {
		return newMigration(append([]builders.MigrationMod{builders.Reached(v1alpha1.PhaseTransferringDisks), builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
			s.Transfer = &v1alpha1.JobStatus{JobName: job2, Attempt: 2}
			s.Retries = 1
		})}, opts...)...)
	}
	converting := newMigration(builders.Reached(v1alpha1.PhaseConverting), builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
		s.Conversion = conversionAttempt(builders.Name, 2)
		s.Retries = 1
	}))
	verifying := importedWith(convertedSums(), &v1alpha1.JobStatus{JobName: verify2, Attempt: 2})
	waits := func(earlier ...string) func(t *testing.T, d Decision) {
		return func(t *testing.T, d Decision) {
			c := wantCond(t, d, ConditionProgressing, metav1.ConditionFalse, ReasonEarlierAttemptRunning)
			for _, e := range earlier {
				assert.Contains(t, c.Message, e, "the wait names what it waits for")
			}
			assert.Contains(t, c.Message, "two pods never write the same claims")
		}
	}
	staged := claims(stagingClaims()...)
	runCases(t, map[string]decideCase{
		"transfer: the earlier attempt's pod is still there: no new Job": {
			m: transferring(), obs: newObs(staged, workerPod(job1, true)),
			phase: v1alpha1.PhaseTransferringDisks, action: ActionNone, check: waits(job1 + "-x7k2p"),
		},
		"transfer: the earlier attempt's pod, not being deleted (its Job gone): no new Job": {
			m: transferring(), obs: newObs(staged, workerPod(job1, false)),
			phase: v1alpha1.PhaseTransferringDisks, action: ActionNone, check: waits(job1),
		},
		"transfer: the earlier attempt's Job is being deleted: no new Job": {
			m: transferring(), obs: newObs(staged, workerJob(job1, true)),
			phase: v1alpha1.PhaseTransferringDisks, action: ActionNone, check: waits(job1),
		},
		"transfer: the earlier attempt's Job still there, not being deleted: deleted, no new Job": {
			m: transferring(), obs: newObs(staged, workerJob(job1, false), workerPod(job1, false)),
			phase: v1alpha1.PhaseTransferringDisks, action: ActionDeleteJob, name: job1,
			check: func(t *testing.T, d Decision) {
				assert.Equal(t, []ObjectRef{ref(KindJob, job1)}, d.Action.Objects, "only the Job: its pods go with it")
				waits(job1)(t, d)
			},
		},
		"transfer: a pod of the Job to create, which is gone: not created again beside it": {
			m: transferring(), obs: newObs(staged, workerPod(job2, true)),
			phase: v1alpha1.PhaseTransferringDisks, action: ActionNone, check: waits(job2),
		},
		"transfer: the Job to create shows among the workers only (its add event between two cache reads): neither deleted nor created": {
			m: transferring(), obs: newObs(staged, workerJob(job2, false), workerPod(job2, false)),
			phase: v1alpha1.PhaseTransferringDisks, action: ActionNone,
			check: func(t *testing.T, d Decision) {
				wantCond(t, d, ConditionProgressing, metav1.ConditionTrue, ReasonWorking)
			},
		},
		"verification: the Job to create shows among the workers only: neither deleted nor created": {
			m: verifying, obs: newObs(dataVolumes(DataVolumeSucceeded, "100.0%", false), workerJob(verify2, false)),
			phase: v1alpha1.PhaseImporting, action: ActionNone,
		},
		"transfer: nothing of the earlier attempt left: the next attempt starts": {
			m: transferring(), obs: newObs(staged),
			phase: v1alpha1.PhaseTransferringDisks, action: ActionCreateTransferJob, name: job2,
		},
		"transfer: still there at the retry deadline: failed, no second writer": {
			m: transferring(), obs: newObs(staged, workerPod(job1, true)), now: 23 * time.Hour,
			phase: v1alpha1.PhaseRollingBack,
			check: func(t *testing.T, d Decision) {
				wantLastError(t, d, v1alpha1.PhaseTransferringDisks, ReasonEarlierAttemptRunning)
				assert.Contains(t, d.Status.LastError.Message, "retry deadline of 24h0m0s passed")
				assert.Contains(t, d.Status.LastError.Message, job1+"-x7k2p")
			},
		},
		"transfer: waiting asks to look again by the retry deadline": {
			m: transferring(), obs: newObs(staged, workerPod(job1, true)), now: 23*time.Hour - 5*time.Second,
			phase: v1alpha1.PhaseTransferringDisks, action: ActionNone, requeue: 5 * time.Second, check: waits(job1),
		},
		"conversion: the earlier attempt's pod is still there: no new Job": {
			m: converting, obs: newObs(staged, workerPod(conv1, true)),
			phase: v1alpha1.PhaseConverting, action: ActionNone, check: waits(conv1),
		},
		"conversion: nothing left: the next attempt starts": {
			m: converting, obs: newObs(staged),
			phase: v1alpha1.PhaseConverting, action: ActionCreateConversionJob, name: conv2,
		},
		"verification: the earlier attempt's pod is still there: no new Job": {
			m: verifying, obs: newObs(dataVolumes(DataVolumeSucceeded, "100.0%", false), workerPod(verify1, true)),
			phase: v1alpha1.PhaseImporting, action: ActionNone, check: waits(verify1),
		},
		"verification: nothing left: the next attempt starts": {
			m: verifying, obs: newObs(dataVolumes(DataVolumeSucceeded, "100.0%", false)),
			phase: v1alpha1.PhaseImporting, action: ActionCreateVerificationJob, name: verify2,
		},
	})
}

// TestPodThatStartsLateNeverWritesBesideTheNextAttempt plays the issue's
// sequence: the pod of attempt 1 did not start within the pod start
// timeout, the decision deletes its Job and records attempt 2; the pod,
// whose image pull then succeeds, is still there on the next reconciles:
// attempt 2's Job is created only once it is gone.
func TestPodThatStartsLateNeverWritesBesideTheNextAttempt(t *testing.T) {
	job1, job2 := naming.TransferJob(builders.Name, 1), naming.TransferJob(builders.Name, 2)
	m := newMigration(builders.Reached(v1alpha1.PhaseTransferringDisks), builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
		s.Transfer = &v1alpha1.JobStatus{JobName: job1, Attempt: 1}
	}))
	staged := claims(stagingClaims()...)
	stuck := transferJob(JobObservation{Name: job1, CreatedAt: builders.At(-DefaultPodStartTimeout).Time,
		StartProblem: &PodStartProblem{Reason: "ImagePullBackOff", Message: "Back-off pulling image"}})
	d := decide(m, newObs(staged, stuck, workerJob(job1, false), workerPod(job1, false)))
	require.Equal(t, ActionDeleteJob, d.Action.Type, "the stuck attempt's Job is deleted")
	require.Equal(t, job2, d.Status.Transfer.JobName, "and the next attempt recorded")

	m = after(m, d)
	// The pull succeeded: the pod runs, being deleted with its Job.
	for i, obs := range []Observation{
		newObs(staged, workerJob(job1, true), workerPod(job1, true)),
		newObs(staged, workerPod(job1, true)),
	} {
		d = decideAt(m, obs, time.Duration(i+1)*time.Second)
		assert.NotEqual(t, ActionCreateTransferJob, d.Action.Type, "reconcile %d: attempt 2 created while a pod of attempt 1 may still write the claims", i+1)
		m = after(m, d)
	}
	d = decideAt(m, newObs(staged), 3*time.Second)
	assert.Equal(t, ActionCreateTransferJob, d.Action.Type, "attempt 2 once attempt 1's pod is gone")
	assert.Equal(t, job2, d.Action.Name)
}
