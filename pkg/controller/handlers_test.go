package controller

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/test/builders"
)

// TestFinishedMigrationsAreNotEnqueued: the events of a finished migration
// (ended, not being deleted, status up to date) and of its children and
// Secret enqueue nothing; a deletion, a spec change or an unfinished
// phase does.
func TestFinishedMigrationsAreNotEnqueued(t *testing.T) {
	succeeded := func(m *v1alpha1.VirtualMachineMigration) {
		builders.Reached(v1alpha1.PhaseSucceeded)(m)
		m.Status.ObservedGeneration = m.Generation
	}
	tests := []struct {
		name  string
		mods  []builders.MigrationMod
		event string // child, migration, secret
		want  bool
	}{
		{"child of a running migration", []builders.MigrationMod{builders.Reached(v1alpha1.PhaseTransferringDisks)}, "child", true},
		{"child of a succeeded migration", []builders.MigrationMod{succeeded}, "child", false},
		{"child of a failed migration", []builders.MigrationMod{builders.Reached(v1alpha1.PhaseFailed), func(m *v1alpha1.VirtualMachineMigration) { m.Status.ObservedGeneration = 1 }}, "child", false},
		{"child of a succeeded migration being deleted", []builders.MigrationMod{succeeded, builders.Deleted}, "child", true},
		{"child of a succeeded migration whose spec changed", []builders.MigrationMod{succeeded, func(m *v1alpha1.VirtualMachineMigration) { m.Generation = 2 }}, "child", true},
		{"update of a succeeded migration (or its resync)", []builders.MigrationMod{succeeded}, "migration", false},
		{"update of a running migration", []builders.MigrationMod{builders.Reached(v1alpha1.PhaseConverting)}, "migration", true},
		{"deletion of a succeeded migration begins", []builders.MigrationMod{succeeded, builders.Deleted}, "migration", true},
		{"credentials of a succeeded migration", []builders.MigrationMod{succeeded}, "secret", false},
		{"credentials of a validating migration", []builders.MigrationMod{builders.InPhase(v1alpha1.PhaseValidating)}, "secret", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := builders.Migration(append([]builders.MigrationMod{builders.WithFinalizer}, tt.mods...)...)
			f := newFixture(t, &fakeSource{}, m)
			switch tt.event {
			case "child":
				f.c.enqueueLabelledOwner(builders.ConfigMap(m, "some-child", v1alpha1.ComponentTransfer, nil))
			case "migration":
				f.c.enqueueMigration(m)
			case "secret":
				f.c.enqueueCredentialUsers(builders.CredentialsSecret(m.Namespace, builders.SecretName, nil))
			}
			want := []string(nil)
			if tt.want {
				want = []string{key(m).String()}
			}
			assert.Equal(t, want, queued(f.c))
		})
	}
}

// TestChildOfAnUncachedMigrationIsEnqueued: a child whose migration the
// cache does not hold enqueues it (its sync finds it gone and settles).
func TestChildOfAnUncachedMigrationIsEnqueued(t *testing.T) {
	m := builders.Migration(builders.Reached(v1alpha1.PhaseSucceeded))
	f := newFixture(t, &fakeSource{})
	f.c.enqueueLabelledOwner(builders.ConfigMap(m, "orphan", v1alpha1.ComponentTransfer, nil))
	assert.Equal(t, []string{key(m).String()}, queued(f.c))
}

// TestQueuedKeyOfAFinishedMigrationIsDropped: a requeue that comes due
// after the migration ended is dropped without a reconcile: no client
// call, no reconcile counted, one skip counted.
func TestQueuedKeyOfAFinishedMigrationIsDropped(t *testing.T) {
	done := builders.Migration(builders.Named("done"), builders.WithFinalizer, builders.Reached(v1alpha1.PhaseSucceeded))
	done.Status.ObservedGeneration = done.Generation
	f := newFixture(t, &fakeSource{}, done)
	f.cluster.Actions()
	skips, reconciles := testutil.ToFloat64(finishedSkips), testutil.ToFloat64(reconcileTotal.WithLabelValues("success"))

	f.c.Enqueue(key(done))
	require.True(t, f.c.processNextItem(f.ctx))
	assert.Empty(t, f.cluster.Actions(), "no client call")
	assert.Equal(t, skips+1, testutil.ToFloat64(finishedSkips))
	assert.Equal(t, reconciles, testutil.ToFloat64(reconcileTotal.WithLabelValues("success")), "no reconcile")
	assert.Zero(t, f.c.queue.Len())
}

// TestEndingSyncAsksNoRequeue: the reconcile that ends a migration asks
// for no further look, although the phase change alone would.
func TestEndingSyncAsksNoRequeue(t *testing.T) {
	m := builders.Migration(builders.WithFinalizer, builders.Reached(v1alpha1.PhaseCleaningUp))
	f := newFixture(t, &fakeSource{}, m)
	after := f.sync(m)
	require.Equal(t, v1alpha1.PhaseSucceeded, f.get(m).Status.Phase)
	assert.Zero(t, after)
}

// TestSlotReleaseWakesTheOldestWaiter: when a migration leaves a transfer
// slot, the oldest migration waiting in Queued on its host (and, with a
// per-datastore limit, on each of its datastores) is enqueued, once the
// cache shows the release.
func TestSlotReleaseWakesTheOldestWaiter(t *testing.T) {
	created := func(m *v1alpha1.VirtualMachineMigration, after time.Duration) *v1alpha1.VirtualMachineMigration {
		m.CreationTimestamp = metav1.NewTime(builders.T0.Add(after))
		return m
	}
	holder := placed("holder", v1alpha1.PhaseTransferringDisks, "h1", "ds1")
	moved := holder.DeepCopy()
	moved.Status.Phase = v1alpha1.PhaseConverting
	progressed := holder.DeepCopy()
	progressed.Status.Progress = "50%"
	deleting := holder.DeepCopy()
	builders.Deleted(deleting)
	tests := []struct {
		name      string
		now       any // the holder's new state; nil: gone
		host, ds  int
		wantWoken []string
	}{
		{"moves on", moved, 4, 0, []string{"w-second"}},
		{"is gone", nil, 4, 0, []string{"w-second"}},
		{"is being deleted", deleting, 4, 0, []string{"w-second"}},
		{"still transfers", progressed, 4, 0, nil},
		{"no limits, nobody waits", moved, 0, 0, nil},
		{"per-datastore limit", moved, 0, 1, []string{"w-oldest-ds1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, &fakeSource{}, holder,
				created(placed("w-third", v1alpha1.PhaseQueued, "h1", "ds7"), 3*time.Second),
				created(placed("w-second", v1alpha1.PhaseQueued, "h1", "ds8"), 2*time.Second),
				created(placed("w-oldest-ds1", v1alpha1.PhaseQueued, "h2", "ds1"), time.Second),
				created(placed("w-other", v1alpha1.PhaseQueued, "h3", "ds3"), 0))
			f.c.cfg.MaxTransfersPerHost, f.c.cfg.MaxTransfersPerDatastore = tt.host, tt.ds
			if tt.now != nil {
				require.NoError(t, f.informers.Migrations.GetIndexer().Update(tt.now))
			} else {
				require.NoError(t, f.informers.Migrations.GetIndexer().Delete(holder))
			}
			f.c.wakeSlotWaiters(holder, tt.now)
			var want []string
			for _, name := range tt.wantWoken {
				want = append(want, cache.NewObjectName(builders.Namespace, name).String())
			}
			assert.Equal(t, want, queued(f.c))
		})
	}
}

// TestProofOutcomeWakesTheValidatingMigrations: a shared proof Job names
// no migration; once it has its outcome (or is gone) it wakes the
// migrations of its namespace in Validating, which may wait on it, and no
// other; while it runs, they look at it at their own polls.
func TestProofOutcomeWakesTheValidatingMigrations(t *testing.T) {
	a := builders.Migration(builders.Named("a"), builders.WithFinalizer, builders.InPhase(v1alpha1.PhaseValidating))
	b := builders.Migration(builders.Named("b"), builders.WithFinalizer, builders.InPhase(v1alpha1.PhaseValidating))
	queuedOne := builders.Migration(builders.Named("c"), builders.WithFinalizer, builders.InPhase(v1alpha1.PhaseQueued))
	proof := func(conds ...batchv1.JobCondition) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "vmm-proof-transfer-0123456789abcdef", Namespace: a.Namespace,
			Labels: map[string]string{v1alpha1.LabelMigrationUID: "", v1alpha1.LabelComponent: v1alpha1.ComponentProof}},
			Status: batchv1.JobStatus{Conditions: conds}}
	}
	complete := batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}
	failed := batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue}
	validating := []string{key(a).String(), key(b).String()}
	for name, tc := range map[string]struct {
		event any
		want  []string
	}{
		"running":          {proof(), nil},
		"passed":           {proof(complete), validating},
		"failed":           {proof(failed), validating},
		"gone (tombstone)": {cache.DeletedFinalStateUnknown{Key: "x", Obj: proof()}, validating},
		"not a proof Job": {&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: a.Namespace,
			Labels: map[string]string{v1alpha1.LabelMigrationUID: ""}}, Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{complete}}}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, &fakeSource{}, a, b, queuedOne)
			f.c.enqueueLabelledOwner(tc.event)
			assert.ElementsMatch(t, tc.want, queued(f.c))
		})
	}
}
