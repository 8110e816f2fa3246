package pipeline

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
)

// TestProofAccountBlocksItsJobsDeletion (issue 46): the proof Job owns
// its ServiceAccount with blockOwnerDeletion, so a foreground deletion
// of a stale proof (or its TTL's) ends only once the account is gone: the
// garbage collector never removes the account a newer Job of the key was
// given.
func TestProofAccountBlocksItsJobsDeletion(t *testing.T) {
	cfg := testConfig
	cfg.TransferProgress, cfg.ImageProofs = true, true
	f := newFakeStep(t)
	f.step.Config, f.step.Clock = cfg, clocktesting.NewFakePassiveClock(t0)
	m := validating("web-01", func(m *v1alpha1.VirtualMachineMigration) { m.Spec.Conversion.Skip = true })
	require.NoError(t, f.step.CreateProofJob(context.Background(), m, v1alpha1.ComponentTransfer))
	_, sa, err := RenderProof(m, v1alpha1.ComponentTransfer, cfg)
	require.NoError(t, err)
	got, err := f.Kube.CoreV1().ServiceAccounts(sa.Namespace).Get(context.Background(), sa.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, got.OwnerReferences, 1)
	assert.Equal(t, ptrTrue, got.OwnerReferences[0].BlockOwnerDeletion, "the Job's deletion waits for its account")
}

var ptrTrue = func() *bool { b := true; return &b }()

// TestProofAccountOfAGoneJobIsNotHandedOver (issue 46): an account left
// by an earlier proof Job of the key that is gone is the garbage
// collector's to delete at any moment: it is deleted (its UID as a
// precondition) and made again for the new Job, never handed over.
func TestProofAccountOfAGoneJobIsNotHandedOver(t *testing.T) {
	cfg := testConfig
	cfg.TransferProgress, cfg.ImageProofs = true, true
	m := validating("web-01", func(m *v1alpha1.VirtualMachineMigration) { m.Spec.Conversion.Skip = true })
	_, sa, err := RenderProof(m, v1alpha1.ComponentTransfer, cfg)
	require.NoError(t, err)
	doomed := sa.DeepCopy()
	doomed.UID = "old-account"
	doomed.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "vmm-proof-transfer-x", UID: "gone-job"}}
	f := newFakeStep(t, doomed)
	f.step.Config, f.step.Clock = cfg, clocktesting.NewFakePassiveClock(t0)
	var createdAccounts int
	f.Kube.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		createdAccounts++
		sa := a.(k8stesting.CreateAction).GetObject().(*corev1.ServiceAccount)
		if createdAccounts > 1 {
			sa.UID = types.UID("new-account")
		}
		return false, nil, nil
	})

	require.NoError(t, f.step.CreateProofJob(context.Background(), m, v1alpha1.ComponentTransfer))
	var deleted []k8stesting.DeleteActionImpl
	for _, a := range f.Actions() {
		if d, ok := a.(k8stesting.DeleteActionImpl); ok && d.GetResource().Resource == "serviceaccounts" {
			deleted = append(deleted, d)
		}
	}
	require.Len(t, deleted, 1, "the gone Job's account is deleted, not handed over")
	require.NotNil(t, deleted[0].DeleteOptions.Preconditions)
	assert.Equal(t, types.UID("old-account"), *deleted[0].DeleteOptions.Preconditions.UID)
	got, err := f.Kube.CoreV1().ServiceAccounts(sa.Namespace).Get(context.Background(), sa.Name, metav1.GetOptions{})
	require.NoError(t, err)
	job, err := f.Kube.BatchV1().Jobs(sa.Namespace).Get(context.Background(), naming_proofJob(t, m, cfg), metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, got.OwnerReferences, 1)
	assert.Equal(t, job.UID, got.OwnerReferences[0].UID, "the new account is the new Job's")
}

func naming_proofJob(t *testing.T, m *v1alpha1.VirtualMachineMigration, cfg Config) string {
	job, _, err := RenderProof(m, v1alpha1.ComponentTransfer, cfg)
	require.NoError(t, err)
	return job.Name
}

// TestCompletedProofWhosePodIsGone (issue 46): a completed proof Job whose
// pod is gone (terminated-pod garbage collection, a removed node), read
// with no result kept (after a restart), has lost its result: it is
// stale (deleted and proven again), not an incompatible image refusing
// every migration of its key.
func TestCompletedProofWhosePodIsGone(t *testing.T) {
	skip := func(m *v1alpha1.VirtualMachineMigration) { m.Spec.Conversion.Skip = true }
	job := proofJob(t, v1alpha1.ComponentTransfer, batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue})
	job.Status.Succeeded = 1
	f := newFakeStep(t, job)
	f.step.Clock = clocktesting.NewFakePassiveClock(t0.Add(time.Minute))
	f.step.Config.ImageProofs = true
	var obs statemachine.Observation
	require.NoError(t, f.step.Observe(validating("web-01", skip), &obs))
	require.Len(t, obs.Proofs, 1)
	p := obs.Proofs[0]
	assert.Nil(t, p.Result, "no result: the pod that held it is gone (%+v)", p.Result)
	require.NotNil(t, p.Stale, "the Job is proven again")
	assert.Equal(t, job.UID, p.Stale.UID)

	failed := proofJob(t, v1alpha1.ComponentTransfer, batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded"})
	failed.Status.Failed = 1
	f = newFakeStep(t, failed)
	f.step.Clock = clocktesting.NewFakePassiveClock(t0.Add(time.Minute))
	f.step.Config.ImageProofs = true
	obs = statemachine.Observation{}
	require.NoError(t, f.step.Observe(validating("web-01", skip), &obs))
	assert.Nil(t, obs.Proofs[0].Result, "a pod that ran and failed, gone: its words are lost too")
	assert.NotNil(t, obs.Proofs[0].Stale)
}

// TestInitContainerDoesNotStartThePod: the conversion pod's init
// container (vm-transfer copied in) ends before the main container's
// image is pulled; a pull that cannot succeed is a start problem all the
// same, and a proof of an image not on the node fails at once, not at its
// deadline.
func TestInitContainerDoesNotStartThePod(t *testing.T) {
	job := proofJob(t, v1alpha1.ComponentConversion)
	p := proofPodIn(job, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImageNeverPull",
		Message: `Container image "x:1" is not present with pull policy of Never`}})
	p.Status.Phase = corev1.PodPending
	p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: ToolsContainer,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}}
	got := StartProblem(&p)
	if assert.NotNil(t, got, "a start problem though the init container ran") {
		assert.Equal(t, "ErrImageNeverPull", got.Reason)
	}
	res, _ := ProofOutcome(v1alpha1.ComponentConversion, job, []corev1.Pod{p}, t0.Add(2*time.Second), DefaultProofTimeout)
	if assert.NotNil(t, res) {
		assert.Equal(t, v1alpha1.ProofFailed, res.Result)
		assert.Equal(t, "ErrImageNeverPull", res.Reason)
	}
}
