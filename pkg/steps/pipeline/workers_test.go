package pipeline

import (
	"context"
	"testing"

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

// deleting marks an object's deletion as asked for, as the API server
// shows an object with finalizers (a Job deleted in the foreground, a
// pod within its grace period).
func deleting[T metav1.Object](o T) T {
	o.SetDeletionTimestamp(builders.TP(0))
	o.SetFinalizers([]string{metav1.FinalizerDeleteDependents})
	return o
}

// withPhase sets a pod's phase.
func withPhase(p *corev1.Pod, phase corev1.PodPhase) *corev1.Pod {
	p.Status.Phase = phase
	return p
}

// TestObserveWorkers: what may still run of the migration's transfer,
// conversion and verification attempts is observed (a Job not finished
// or being deleted, a pod not ended), and nothing else: a finished Job,
// a pod that ended, a proof pod, another migration's pod.
func TestObserveWorkers(t *testing.T) {
	m := linuxBIOS()
	m.Status.Phase = v1alpha1.PhaseTransferringDisks
	other := linuxBIOS()
	other.Name, other.UID = "other", "uid-other"
	transfer1 := deleting(builders.Job(m, naming.TransferJob(m.Name, 1), v1alpha1.ComponentTransfer))
	transfer2 := builders.Job(m, naming.TransferJob(m.Name, 2), v1alpha1.ComponentTransfer, builders.JobFailed("BackoffLimitExceeded", "failed"))
	conversion1 := builders.Job(m, naming.ConversionJob(m.Name, 1), v1alpha1.ComponentConversion, builders.JobComplete)
	verification1 := builders.Job(m, naming.VerificationJob(m.Name, 1), v1alpha1.ComponentVerification)
	proof := builders.Job(m, "proof-transfer", v1alpha1.ComponentProof)
	theirs := builders.Job(other, naming.TransferJob(other.Name, 1), v1alpha1.ComponentTransfer)
	late := deleting(withPhase(builders.JobPod(transfer1, false, 0, ""), corev1.PodRunning))
	pending := withPhase(builders.JobPod(verification1, false, 0, ""), corev1.PodPending)
	failedButTerminating := deleting(withPhase(builders.JobPod(transfer2, false, 0, ""), corev1.PodRunning))
	f := newFakeStep(t, transfer1, transfer2, conversion1, verification1, proof, theirs,
		late, pending, failedButTerminating,
		builders.JobPod(conversion1, true, 0, "{}"),
		withPhase(builders.JobPod(proof, false, 0, ""), corev1.PodRunning),
		withPhase(builders.JobPod(theirs, false, 0, ""), corev1.PodRunning))

	var obs statemachine.Observation
	require.NoError(t, f.step.Observe(m, &obs))
	ref := func(kind string, o metav1.Object) statemachine.ObjectRef { return refTo(kind, o) }
	assert.Equal(t, []statemachine.WorkerObservation{
		{Ref: ref(statemachine.KindJob, transfer1), Job: transfer1.Name, Deleting: true},
		{Ref: ref(statemachine.KindJob, verification1), Job: verification1.Name},
		{Ref: ref(statemachine.KindPod, late), Job: transfer1.Name, Deleting: true},
		{Ref: ref(statemachine.KindPod, failedButTerminating), Job: transfer2.Name, Deleting: true},
		{Ref: ref(statemachine.KindPod, pending), Job: verification1.Name},
	}, obs.Workers)

	m.Status.Phase = v1alpha1.PhaseCleaningUp
	obs = statemachine.Observation{}
	require.NoError(t, f.step.Observe(m, &obs))
	assert.Empty(t, obs.Workers, "only the phases that start attempts look at them")
}

// TestDeleteJobsInTheForeground: a Job is deleted with foreground
// propagation, so that it is seen until its pods are gone (no attempt
// starts while one is); the other kinds keep background propagation.
func TestDeleteJobsInTheForeground(t *testing.T) {
	ctx := context.Background()
	m := linuxBIOS()
	job := builders.Job(m, naming.TransferJob(m.Name, 1), v1alpha1.ComponentTransfer)
	claim := builders.StagingClaim(m, naming.StagingClaim(m.Name, 2000))
	f := newFakeStep(t, []runtime.Object{job, claim}...)
	refs := []statemachine.ObjectRef{refTo(statemachine.KindJob, job), refTo(statemachine.KindPersistentVolumeClaim, claim)}
	require.NoError(t, f.step.Delete(ctx, m, refs))
	want := map[string]metav1.DeletionPropagation{"jobs": metav1.DeletePropagationForeground, "persistentvolumeclaims": metav1.DeletePropagationBackground}
	seen := 0
	for _, a := range f.Actions() {
		d, ok := a.(k8stesting.DeleteActionImpl)
		if !ok {
			continue
		}
		seen++
		opts := d.GetDeleteOptions()
		require.NotNil(t, opts.PropagationPolicy, "delete %s without a propagation policy", d.GetResource().Resource)
		assert.Equal(t, want[d.GetResource().Resource], *opts.PropagationPolicy, "propagation of the delete of %s %s", d.GetResource().Resource, d.GetName())
		require.NotNil(t, opts.Preconditions)
		assert.NotNil(t, opts.Preconditions.UID, "delete %s without a UID precondition", d.GetName())
	}
	assert.Equal(t, 2, seen, "deletes")
}
