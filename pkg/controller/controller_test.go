package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/test/builders"
)

func TestNewMigrationGetsFinalizerThenValidating(t *testing.T) {
	m := builders.Migration()
	src := &fakeSource{}
	f := newFixture(t, src, m)

	f.sync(m)
	assert.Equal(t, []string{"update virtualmachinemigrations/status", "patch virtualmachinemigrations"}, f.writes,
		"status initialised, then the finalizer added")
	cur := f.get(m)
	assert.Contains(t, cur.Finalizers, v1alpha1.FinalizerName)
	assert.Equal(t, v1alpha1.PhasePending, cur.Status.Phase)
	require.NotNil(t, cur.Status.StartTime)
	assert.Equal(t, f.clock.Now(), cur.Status.StartTime.Time.UTC())

	f.sync(cur)
	assert.Equal(t, []string{"update virtualmachinemigrations/status"}, f.writes)
	cur = f.get(cur)
	assert.Equal(t, v1alpha1.PhaseValidating, cur.Status.Phase)
	assert.Equal(t, int64(1), cur.Status.ObservedGeneration)
	require.Len(t, cur.Status.Evidence, 1)
	assert.Equal(t, v1alpha1.PhasePending, cur.Status.Evidence[0].Phase)
	assert.Empty(t, src.calls, "Pending never talks to vSphere")
	assert.Contains(t, f.events, "Normal Validating Pending -> Validating: finalizer set and status initialised")
}

func TestMissingSecretWaitsWithConditionAndWritesOnce(t *testing.T) {
	m := builders.Migration(builders.WithFinalizer, builders.InPhase(v1alpha1.PhaseValidating))
	src := &fakeSource{obs: statemachine.SourceObservation{Error: &statemachine.ObservedError{
		Class: statemachine.ErrorNeedsUser, Reason: "CredentialsSecretNotFound", Message: `Secret "vcenter-creds" not found in namespace apps`,
	}}}
	f := newFixture(t, src, m)

	after := f.sync(m)
	assert.Equal(t, statemachine.DefaultWaitInterval, after, "a migration waiting on a person is looked at again later")
	assert.Equal(t, []string{"update virtualmachinemigrations/status"}, f.writes)
	cur := f.get(m)
	cond := condition(cur, statemachine.ConditionProgressing)
	require.NotNil(t, cond)
	assert.Equal(t, metav1.ConditionFalse, cond.Status)
	assert.Equal(t, "CredentialsSecretNotFound", cond.Reason)
	assert.Contains(t, cond.Message, `"vcenter-creds"`)
	assert.Equal(t, int64(1), cond.ObservedGeneration)

	// The same observation later: nothing changed, nothing is written.
	f.clock.Step(time.Minute)
	f.sync(cur)
	assert.Empty(t, f.writes, "an unchanged sync writes no status")
}

func TestUnchangedSyncWritesNothing(t *testing.T) {
	m := builders.Migration(builders.WithFinalizer, builders.RequireApproval, builders.Reached(v1alpha1.PhaseAwaitingApproval))
	f := newFixture(t, &fakeSource{}, m)
	f.sync(m)
	cur := f.get(m)
	require.NotNil(t, condition(cur, statemachine.ConditionApprovalRequired))

	for i := range 3 {
		f.clock.Step(time.Duration(i+1) * time.Minute)
		f.sync(cur)
		assert.Empty(t, f.writes, "sync %d wrote although nothing changed", i)
	}
}

func TestErrorRequeuesWithBackoff(t *testing.T) {
	m := builders.Migration()
	f := newFixture(t, &fakeSource{}, m)
	f.mig.PrependReactor("update", "virtualmachinemigrations", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("etcd is on fire")
	})
	k := key(m)

	f.c.Enqueue(k)
	require.True(t, f.c.processNextItem(f.ctx))
	assert.Equal(t, 1, f.c.queue.NumRequeues(k), "a failed sync is requeued through the rate limiter")
	assert.Equal(t, 0, f.c.queue.Len(), "the retry waits for its backoff")

	// The backoff doubles on each failure (the queue's delays follow the
	// fixture's clock).
	f.clock.Step(50 * time.Millisecond)
	require.Eventually(t, func() bool { return f.c.queue.Len() == 1 }, 5*time.Second, time.Millisecond,
		"the key comes back after the base delay")
	require.True(t, f.c.processNextItem(f.ctx))
	assert.Equal(t, 2, f.c.queue.NumRequeues(k))
	f.clock.Step(50 * time.Millisecond)
	assert.Never(t, func() bool { return f.c.queue.Len() != 0 }, 50*time.Millisecond, time.Millisecond,
		"the second retry waits twice as long")
	f.clock.Step(50 * time.Millisecond)
	require.Eventually(t, func() bool { return f.c.queue.Len() == 1 }, 5*time.Second, time.Millisecond)

	// Success forgets the failures.
	f.mig.ReactionChain = f.mig.ReactionChain[1:]
	require.True(t, f.c.processNextItem(f.ctx))
	assert.Equal(t, 0, f.c.queue.NumRequeues(k))
}

func TestDeletionRunsFinalizerPath(t *testing.T) {
	m := builders.Migration(builders.WithFinalizer, builders.InPhase(v1alpha1.PhaseValidating), builders.Deleted)
	src := &fakeSource{}
	f := newFixture(t, src, m)

	f.sync(m)
	cur := f.get(m)
	assert.Equal(t, v1alpha1.PhaseCancelling, cur.Status.Phase)

	f.sync(cur)
	assert.Equal(t, []string{"update virtualmachinemigrations/status", "patch virtualmachinemigrations"}, f.writes,
		"nothing to undo: the finalizer is released")
	cur = f.get(cur)
	assert.NotContains(t, cur.Finalizers, v1alpha1.FinalizerName)
	assert.Empty(t, src.calls, "a source never touched is not called during cancellation")
}

func TestDeletionRestoresSourceBeforeReleasingFinalizer(t *testing.T) {
	m := builders.Migration(builders.WithFinalizer, builders.InPhase(v1alpha1.PhaseCancelling), builders.Deleted,
		builders.WithSourceControl(func(sc *v1alpha1.SourceControlStatus) {
			sc.OriginalPowerState = statemachine.PowerStateOn
			sc.PowerOffRequestedAt = builders.TP(-time.Hour)
		}))
	src := &fakeSource{obs: statemachine.SourceObservation{Observed: true, PowerState: statemachine.PowerStateOff}}
	f := newFixture(t, src, m)

	f.sync(m)
	assert.Equal(t, []string{"observe", "poweron"}, src.calls)
	cur := f.get(m)
	require.NotNil(t, cur.Status.SourceControl.RestoreRequestedAt, "the intent is written before the call")
	assert.Contains(t, cur.Finalizers, v1alpha1.FinalizerName)

	src.obs.PowerState = statemachine.PowerStateOn
	f.sync(cur)
	cur = f.get(cur)
	require.NotNil(t, cur.Status.SourceControl.RestoredAt)
	f.sync(cur)
	assert.NotContains(t, f.get(cur).Finalizers, v1alpha1.FinalizerName)
}

// onHost is a migration named name in phase p whose source VM runs on
// host-1 with one disk on ds1.
func onHost(name string, p v1alpha1.Phase) *v1alpha1.VirtualMachineMigration {
	return builders.Migration(builders.Named(name), builders.WithFinalizer, builders.InPhase(p),
		builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
			s.ObservedGeneration = 1
			s.Source = &v1alpha1.SourceInventory{Name: name, HostMoRef: "host-1", Disks: []v1alpha1.SourceDisk{{Key: 2000, Datastore: "ds1"}}}
		}))
}

// TestTransferSlotsLimitPerHost: the slot is looked at while observing and
// taken only by the explicit reservation step, which counts a reservation
// the cache does not show yet and refuses a second taker.
func TestTransferSlotsLimitPerHost(t *testing.T) {
	busy := onHost("a", v1alpha1.PhaseTransferringDisks)
	waiting1 := onHost("b", v1alpha1.PhaseQueued)
	waiting2 := onHost("c", v1alpha1.PhaseQueued)
	f := newFixture(t, &fakeSource{}, busy, waiting1, waiting2)
	all := []*v1alpha1.VirtualMachineMigration{busy, waiting1, waiting2}
	lim := slotLimits{perHost: 2}
	now := f.clock.Now()

	assert.True(t, f.c.slots.look(waiting1, all, lim, now).Available)
	assert.True(t, f.c.slots.look(waiting2, all, lim, now).Available, "looking takes nothing")
	require.True(t, f.c.slots.reserve(waiting1, all, lim, now))
	slot := f.c.slots.look(waiting2, all, lim, now)
	assert.False(t, slot.Available, "the reservation of b counts before the cache shows it")
	assert.Contains(t, slot.Message, "2 of 2 transfers")
	assert.False(t, f.c.slots.reserve(waiting2, all, lim, now), "the last slot is taken once")

	// b's decision did not move it into a slot-holding phase: the slot is free again.
	f.c.slots.settle(key(waiting1), v1alpha1.PhaseQueued, now)
	assert.True(t, f.c.slots.look(waiting2, all, lim, now).Available)
}

// TestTwoWorkersCannotBothTakeTheLastSlot: two migrations decided on the
// same cache; the second's decision to stop its source is dropped, not
// written, and it stays Queued.
func TestTwoWorkersCannotBothTakeTheLastSlot(t *testing.T) {
	busy := onHost("a", v1alpha1.PhaseTransferringDisks)
	first, second := onHost("b", v1alpha1.PhaseQueued), onHost("c", v1alpha1.PhaseQueued)
	src := &fakeSource{obs: statemachine.SourceObservation{Observed: true, PowerState: statemachine.PowerStateOn}}
	f := newFixture(t, src, busy, first, second)
	f.c.cfg.MaxTransfersPerHost = 2

	f.sync(first)
	assert.Equal(t, v1alpha1.PhaseStoppingSource, f.get(first).Status.Phase)
	// The cache still shows b Queued (its informer event has not arrived).
	require.NoError(t, f.informers.Migrations.GetIndexer().Update(first))
	_, err := f.c.sync(f.ctx, key(second))
	require.NoError(t, err)
	assert.Equal(t, v1alpha1.PhaseQueued, f.get(second).Status.Phase, "the second taker of the last slot waits")
}

func TestQueuedWithoutSlotDoesNotReadSource(t *testing.T) {
	busy := onHost("a", v1alpha1.PhaseTransferringDisks)
	waiting := onHost("b", v1alpha1.PhaseQueued)
	src := &fakeSource{}
	f := newFixture(t, src, busy, waiting)
	f.c.cfg.MaxTransfersPerHost = 1

	after := f.sync(waiting)
	assert.Empty(t, src.calls, "a migration waiting for a slot does not look at its source")
	assert.Equal(t, statemachine.DefaultWaitInterval, after)
	cur := f.get(waiting)
	assert.Equal(t, v1alpha1.PhaseQueued, cur.Status.Phase)
	cond := condition(cur, statemachine.ConditionProgressing)
	require.NotNil(t, cond)
	assert.Equal(t, statemachine.ReasonWaitingForTransferSlot, cond.Reason)
	assert.Contains(t, cond.Message, "1 of 1 transfers already run from host")
}

// TestCleanupDeletesOnlyWhatIsOurs: the staging claim and both attempts'
// access objects of this migration are deleted, each with a UID
// precondition; an object with an attempt's name that another migration
// (or a person) made survives, and a namesake created after the
// observation is not deleted either.
func TestCleanupDeletesOnlyWhatIsOurs(t *testing.T) {
	m := builders.Migration(builders.WithFinalizer, builders.Reached(v1alpha1.PhaseCleaningUp), builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
		s.Transfer = &v1alpha1.JobStatus{JobName: naming.TransferJob(builders.Name, 2), Attempt: 2}
	}))
	other := builders.Migration(builders.Named("other"))
	ours := naming.TransferAccess(m.Name, 2)
	theirs := naming.TransferAccess(m.Name, 1)
	objs := []runtime.Object{m,
		builders.StagingClaim(m, naming.StagingClaim(m.Name, builders.DiskKey0)),
		builders.ServiceAccount(m, ours), builders.Role(m, ours), builders.RoleBinding(m, ours),
		// Attempt 1's name, but another migration's objects: not ours to delete.
		builders.ServiceAccount(other, theirs), builders.Role(other, theirs), builders.RoleBinding(other, theirs),
	}
	f := newFixture(t, &fakeSource{}, objs...)

	f.sync(m)
	assert.ElementsMatch(t, []string{"update virtualmachinemigrations/status", "delete rolebindings", "delete roles",
		"delete serviceaccounts", "delete persistentvolumeclaims"}, f.writes)
	assert.Empty(t, f.reads, "the cleanup observed everything from the caches")
	for _, a := range f.deleteActions() {
		require.NotNil(t, a.GetDeleteOptions().Preconditions, "delete %s without a precondition", a.GetName())
		assert.NotNil(t, a.GetDeleteOptions().Preconditions.UID, "delete %s without a UID precondition", a.GetName())
	}
	_, err := f.kube.CoreV1().ServiceAccounts(m.Namespace).Get(f.ctx, ours, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "our ServiceAccount was not deleted: %v", err)
	_, err = f.kube.CoreV1().ServiceAccounts(m.Namespace).Get(f.ctx, theirs, metav1.GetOptions{})
	assert.NoError(t, err, "the other migration's ServiceAccount must survive")
	_, err = f.kube.RbacV1().RoleBindings(m.Namespace).Get(f.ctx, theirs, metav1.GetOptions{})
	assert.NoError(t, err, "the other migration's RoleBinding must survive")
	assert.Equal(t, v1alpha1.PhaseCleaningUp, f.get(m).Status.Phase, "not Succeeded before the deletes are seen")

	f.sync(m)
	assert.Equal(t, v1alpha1.PhaseSucceeded, f.get(m).Status.Phase)
}

// deleteActions are the delete calls recorded since the last sync began.
func (f *fixture) deleteActions() []k8stesting.DeleteActionImpl {
	var out []k8stesting.DeleteActionImpl
	for _, a := range f.lastActions {
		if d, ok := a.(k8stesting.DeleteActionImpl); ok {
			out = append(out, d)
		}
	}
	return out
}

// TestDeleteRefusesWhatIsNotOurs: the pipeline step refuses a delete of a
// ref without this migration's UID, whatever the decision asked.
func TestDeleteRefusesWhatIsNotOurs(t *testing.T) {
	m := builders.Migration()
	job := builders.Job(builders.Migration(builders.Named("other")), "web01-mig-transfer-1", v1alpha1.ComponentTransfer)
	f := newFixture(t, &fakeSource{}, m, job)
	ref := statemachine.ObjectRef{Kind: statemachine.KindJob, Name: job.Name, UID: job.UID, MigrationUID: v1alpha1.MigrationUIDOf(job)}
	err := f.c.steps.Pipeline.Delete(f.ctx, m, []statemachine.ObjectRef{ref})
	require.ErrorContains(t, err, "refusing to delete Job")
	_, err = f.kube.BatchV1().Jobs(m.Namespace).Get(context.Background(), job.Name, metav1.GetOptions{})
	assert.NoError(t, err)
}
