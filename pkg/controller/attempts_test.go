package controller

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/test/builders"
)

// TestLatePodKeepsTheNextAttemptWaiting drives the real sync over the
// fake cluster through the sequence: the transfer pod of attempt
// 1 does not start within the pod start timeout (its image cannot be
// pulled); the reconcile deletes its Job, in the foreground, and records
// attempt 2. The fake API server removes the Job at once but the pod
// stays (the garbage collector has not come yet) and its image pull then
// succeeds: no reconcile creates attempt 2's Job while that pod exists,
// and the first one after it is gone does.
func TestLatePodKeepsTheNextAttemptWaiting(t *testing.T) {
	job1, job2 := naming.TransferJob(builders.Name, 1), naming.TransferJob(builders.Name, 2)
	m := builders.Migration(builders.WithFinalizer, builders.Reached(v1alpha1.PhaseTransferringDisks), builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
		s.Transfer = &v1alpha1.JobStatus{JobName: job1, Attempt: 1}
		s.Progress, s.LastProgressTime = "0%", builders.TP(-statemachine.DefaultPodStartTimeout)
	}))
	job := builders.Job(m, job1, v1alpha1.ComponentTransfer)
	job.CreationTimestamp = builders.At(-statemachine.DefaultPodStartTimeout - time.Second)
	pod := builders.JobPod(job, false, 0, "")
	pod.Status.Phase = corev1.PodPending
	pod.Status.ContainerStatuses[0].State.Waiting = &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image"}
	objs := append(stagingClaimsOf(m), m, job, pod)
	f := newFixture(t, &fakeSource{}, objs...)

	f.sync(m)
	cur := f.get(m)
	require.Equal(t, job2, cur.Status.Transfer.JobName, "the stuck attempt counted as failed: %s", conditionSummary(cur))
	var deleted []k8stesting.DeleteActionImpl
	for _, d := range f.deleteActions() {
		if d.GetResource().Resource == "jobs" {
			deleted = append(deleted, d)
		}
	}
	require.Len(t, deleted, 1, "the stuck Job is deleted: %v", f.writes)
	opts := deleted[0].GetDeleteOptions()
	require.NotNil(t, opts.PropagationPolicy)
	assert.Equal(t, metav1.DeletePropagationForeground, *opts.PropagationPolicy, "its pods go before it")

	// The pull succeeded: the pod runs, now being deleted.
	running, err := f.kube.CoreV1().Pods(m.Namespace).Get(f.ctx, pod.Name, metav1.GetOptions{})
	require.NoError(t, err)
	now := metav1.NewTime(f.clock.Now())
	running.DeletionTimestamp = &now
	running.Status.Phase = corev1.PodRunning
	running.Status.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}
	_, err = f.kube.CoreV1().Pods(m.Namespace).Update(f.ctx, running, metav1.UpdateOptions{})
	require.NoError(t, err)
	for i := range 3 {
		f.clock.Step(statemachine.DefaultPollInterval)
		f.sync(m)
		assert.NotContains(t, f.writes, "create jobs", "reconcile %d: attempt 2's Job created while attempt 1's pod runs", i+1)
		c := condition(f.get(m), statemachine.ConditionProgressing)
		require.NotNil(t, c)
		assert.Equal(t, statemachine.ReasonEarlierAttemptRunning, c.Reason, "reconcile %d: %s", i+1, c.Message)
	}

	require.NoError(t, f.kube.CoreV1().Pods(m.Namespace).Delete(f.ctx, pod.Name, metav1.DeleteOptions{}))
	f.sync(m)
	assert.True(t, slices.Contains(f.writes, "create jobs"), "attempt 2 starts once attempt 1's pod is gone: %v", f.writes)
	_, err = f.kube.BatchV1().Jobs(m.Namespace).Get(f.ctx, job2, metav1.GetOptions{})
	assert.NoError(t, err, "attempt 2's Job")
}

// stagingClaimsOf are m's staging claims, one per disk in status.
func stagingClaimsOf(m *v1alpha1.VirtualMachineMigration) []runtime.Object {
	var out []runtime.Object
	for _, d := range m.Status.Disks {
		out = append(out, builders.StagingClaim(m, d.StagingClaim))
	}
	return out
}
