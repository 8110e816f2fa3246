package pipeline

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/test/builders"
)

// pendingTransfer is a migration transferring in place whose transfer Job
// (created at t0) has a pod the scheduler could not place, and its
// target claim, Pending; events are the claim's.
func pendingTransfer(t *testing.T, events ...corev1.Event) (*fakeStep, *v1alpha1.VirtualMachineMigration) {
	t.Helper()
	m := onePass(linuxBIOS())
	m.Status.Phase = v1alpha1.PhaseTransferringDisks
	m.Status.Transfer = &v1alpha1.JobStatus{JobName: "web-01-migration-transfer-1", Attempt: 1}
	job, err := RenderTransferJob(m, 1, testConfig, nil)
	require.NoError(t, err)
	job.UID, job.CreationTimestamp = "job-1", metav1.NewTime(t0)
	p := pod(job, job.Name+"-x", labelJobName, t0, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}})
	p.Status.Phase = corev1.PodPending
	p.Status.ContainerStatuses = nil
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "SchedulerError",
		Message: `running PreBind plugin "VolumeBinding": binding volumes: provisioning failed`}}
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: builders.ChildMeta(m, m.Status.Disks[0].StagingClaim, v1alpha1.ComponentDisk, false)}
	claim.UID = "claim-1"
	claim.Status.Phase = corev1.ClaimPending
	objs := []runtime.Object{job, p, claim}
	for i := range events {
		e := events[i]
		e.InvolvedObject = corev1.ObjectReference{Kind: "PersistentVolumeClaim", Name: claim.Name, Namespace: claim.Namespace, UID: claim.UID}
		objs = append(objs, &e)
	}
	f := newFakeStep(t, objs...)
	f.step.Config.ClusterFacts = true
	return f, m
}

// observedStart is the transfer Job's start problem at now.
func observedStart(t *testing.T, f *fakeStep, m *v1alpha1.VirtualMachineMigration, now time.Time) *statemachine.PodStartProblem {
	t.Helper()
	f.step.Clock = clocktesting.NewFakePassiveClock(now)
	obs := statemachine.Observation{}
	require.NoError(t, f.step.Observe(m, &obs))
	require.NotNil(t, obs.TransferJob)
	_, err := f.step.ObserveCluster(context.Background(), m, m.Status.Source, &obs)
	require.NoError(t, err)
	return obs.TransferJob.StartProblem
}

// TestClaimThatIsNeverProvisionedIsAStartProblem (issue 46): a transfer
// pod that waits on a claim the provisioner refuses (Block on a class
// that makes only Filesystem volumes) has a start problem in the
// provisioner's words, so that the attempt fails at the pod start
// timeout and, once the attempts are spent, the source is powered on
// again: not a transfer Working at 0% with the source off for a day.
func TestClaimThatIsNeverProvisionedIsAStartProblem(t *testing.T) {
	refused := corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e1", Namespace: "apps"}, Type: corev1.EventTypeWarning,
		Reason: "ProvisioningFailed", Message: `failed to provision volume with StorageClass "local-path": rancher.io/local-path does not support block volume provisioning`,
		LastTimestamp: metav1.NewTime(t0.Add(2 * time.Second))}
	waiting := corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e0", Namespace: "apps"}, Type: corev1.EventTypeNormal,
		Reason: "ExternalProvisioning", Message: `Waiting for a volume to be created either by the external provisioner 'rancher.io/local-path' or manually by the system administrator.`,
		LastTimestamp: metav1.NewTime(t0.Add(time.Second))}
	f, m := pendingTransfer(t, waiting, refused)
	claim := m.Status.Disks[0].StagingClaim
	got := observedStart(t, f, m, t0.Add(10*time.Second))
	require.NotNil(t, got, "a provisioning failure: a start problem at once")
	assert.Equal(t, "ProvisioningFailed", got.Reason)
	assert.Contains(t, got.Message, "claim "+claim+" is Pending")
	assert.Contains(t, got.Message, "does not support block volume provisioning", "the provisioner's words")

	f, m = pendingTransfer(t, waiting)
	assert.Nil(t, observedStart(t, f, m, t0.Add(10*time.Second)), "a claim being provisioned, seconds old: a wait that ends by itself")
	got = observedStart(t, f, m, t0.Add(claimPendingGrace+time.Second))
	require.NotNil(t, got, "still Pending after the grace: said, so that the pod start timeout counts it")
	assert.Equal(t, ReasonClaimPending, got.Reason)
	assert.Contains(t, got.Message, "external provisioner 'rancher.io/local-path'", "the latest word on it")
}
