package controller

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/test/builders"
)

// finishedMigrations are finished migrations of every kind the summary
// must describe as the whole does.
func finishedMigrations() map[string]*v1alpha1.VirtualMachineMigration {
	leftOff := builders.WithSourceControl(func(sc *v1alpha1.SourceControlStatus) { sc.RestoredAt = nil })
	midTransfer := builders.WithStatus(func(st *v1alpha1.VirtualMachineMigrationStatus) {
		st.Disks[0].TransferredAt, st.Disks[0].RateBytesPerSecond = nil, 4096
		st.Conditions = []metav1.Condition{
			{Type: statemachine.ConditionFailed, Status: metav1.ConditionTrue, Reason: "TransferFailed", Message: "a long message"},
			{Type: statemachine.ConditionReady, Status: metav1.ConditionFalse, Reason: "TransferFailed", Message: "another"},
		}
	})
	ttl := builders.WithSpec(func(s *v1alpha1.VirtualMachineMigrationSpec) { s.TTLSecondsAfterFinished = ptr.To[int32](120) })
	return map[string]*v1alpha1.VirtualMachineMigration{
		"succeeded":                  builders.Migration(builders.WithFinalizer, builders.Reached(v1alpha1.PhaseSucceeded), ttl),
		"failed, source restored":    builders.Migration(builders.WithFinalizer, builders.Reached(v1alpha1.PhaseFailed)),
		"failed, source left off":    builders.Migration(builders.WithFinalizer, builders.Reached(v1alpha1.PhaseFailed), leftOff, ttl),
		"failed during its transfer": builders.Migration(builders.WithFinalizer, builders.Reached(v1alpha1.PhaseFailed), midTransfer),
	}
}

// exported is what the metrics say of one migration, as text.
func exported(t *testing.T, m *v1alpha1.VirtualMachineMigration) []string {
	t.Helper()
	var out []string
	for _, metric := range migrationMetrics(m) {
		var pb dto.Metric
		require.NoError(t, metric.Write(&pb))
		out = append(out, metric.Desc().String()+" "+pb.String())
	}
	sort.Strings(out)
	return out
}

// TestSummaryIsReadAsTheWhole: what the controller reads of a finished
// migration while it stays finished reads the same from its summary: it
// is finished, holds no claim and no slot, expires at the same time, and
// exports the same metrics; and it is marked, the whole is not.
func TestSummaryIsReadAsTheWhole(t *testing.T) {
	indexers := migrationIndexers()
	for name, m := range finishedMigrations() {
		t.Run(name, func(t *testing.T) {
			require.True(t, finished(m))
			obj, err := cacheMigration(m.DeepCopy())
			require.NoError(t, err)
			s := obj.(*v1alpha1.VirtualMachineMigration)
			assert.True(t, isSummary(s))
			assert.False(t, isSummary(m))
			assert.True(t, finished(s))
			assert.Equal(t, exported(t, m), exported(t, s))
			for index, f := range indexers {
				keys, err := f(s)
				require.NoError(t, err)
				assert.Empty(t, keys, "a summary is in index %s", index)
			}
			for _, ttl := range []time.Duration{0, time.Hour} {
				wantAt, wantOK := statemachine.TTLExpiry(m, ttl)
				at, ok := statemachine.TTLExpiry(s, ttl)
				assert.Equal(t, wantOK, ok)
				assert.True(t, wantAt.Equal(at))
			}
			assert.Equal(t, m.Finalizers, s.Finalizers)
			assert.Nil(t, s.Status.Source, "the inventory is not kept")
			assert.Nil(t, s.Status.Evidence, "the evidence is not kept")
			assert.Nil(t, s.Status.AppliedSpec, "the applied spec is not kept")
		})
	}
}

// TestUnfinishedMigrationsAreCachedWhole: a migration that runs, one
// being deleted and one whose spec changed after it ended are cached
// whole (without managedFields).
func TestUnfinishedMigrationsAreCachedWhole(t *testing.T) {
	for name, m := range map[string]*v1alpha1.VirtualMachineMigration{
		"running":               builders.Migration(builders.Reached(v1alpha1.PhaseImporting)),
		"deleted after success": builders.Migration(builders.Reached(v1alpha1.PhaseSucceeded), builders.Deleted),
		"spec changed after it ended": builders.Migration(builders.Reached(v1alpha1.PhaseSucceeded), builders.WithGeneration(3),
			builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) { s.ObservedGeneration = 2 })),
	} {
		t.Run(name, func(t *testing.T) {
			m.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
			obj, err := cacheMigration(m.DeepCopy())
			require.NoError(t, err)
			want := m.DeepCopy()
			want.ManagedFields = nil
			assert.Equal(t, want, obj)
		})
	}
}

// finishedWalk walks a migration to Succeeded with ttl set, and makes
// the migration cache hold it as the informer would: as its summary.
func finishedWalk(t *testing.T, ttl int32) (*walkFixture, *v1alpha1.VirtualMachineMigration) {
	t.Helper()
	f := newWalkFixture(t, walkOptions{})
	require.False(t, f.walk(walkOptions{}, nil), "the walk reaches Succeeded")
	f.updateMigration(func(m *v1alpha1.VirtualMachineMigration) { m.Spec.TTLSecondsAfterFinished = ptr.To(ttl) })
	f.sync()
	whole := f.migration()
	require.Equal(t, v1alpha1.PhaseSucceeded, whole.Status.Phase)
	require.True(t, finished(whole), "the new generation is observed")
	f.cacheAsInformer()
	return f, whole
}

// cacheAsInformer makes the migration cache hold what the informer's
// transform makes of each migration (the fixture's mirror copies them as
// they are).
func (f *fixture) cacheAsInformer() {
	f.t.Helper()
	idx := f.informers.Migrations.GetIndexer()
	for _, obj := range idx.List() {
		trimmed, err := cacheMigration(obj.(*v1alpha1.VirtualMachineMigration).DeepCopy())
		require.NoError(f.t, err)
		require.NoError(f.t, idx.Update(trimmed))
	}
}

// deleteAsAPIServer makes the fake API server delete migrations as the
// real one does: an object with finalizers is only marked deleted.
func (f *fixture) deleteAsAPIServer() {
	f.mig.PrependReactor("delete", "virtualmachinemigrations", func(action k8stesting.Action) (bool, runtime.Object, error) {
		del := action.(k8stesting.DeleteAction)
		obj, err := f.mig.Tracker().Get(del.GetResource(), del.GetNamespace(), del.GetName())
		if err != nil {
			return true, nil, err
		}
		m := obj.(*v1alpha1.VirtualMachineMigration)
		if len(m.Finalizers) == 0 {
			return false, nil, nil
		}
		now := metav1.NewTime(f.clock.Now())
		m.DeletionTimestamp = &now
		return true, m, f.mig.Tracker().Update(del.GetResource(), m, del.GetNamespace())
	})
}

// TestFinishedWrittenFromTheSummaryKeepsItsStatus: a reconcile that finds
// a finished migration's summary in the cache (its key was taken before
// it finished) reads it whole from the API server, and the status stays
// as it was, every field of it.
func TestFinishedWrittenFromTheSummaryKeepsItsStatus(t *testing.T) {
	f, whole := finishedWalk(t, 3600)
	cached, err := f.c.migrations.VirtualMachineMigrations(walkNamespace).Get(walkName)
	require.NoError(t, err)
	require.True(t, isSummary(cached))

	f.cluster.Clear()
	_, err = f.c.sync(f.ctx, key(whole))
	require.NoError(t, err)
	assert.Contains(t, f.cluster.Actions(), k8stesting.NewGetAction(migrationsResource, walkNamespace, walkName),
		"the whole migration is read from the API server")
	after := f.migration()
	assert.Equal(t, whole.Status, after.Status, "the status after a reconcile from the summary")
	assert.Equal(t, whole.ResourceVersion, after.ResourceVersion, "nothing was written")

	// Nothing may write a summary, whatever asks.
	_, _, err = f.c.writeStatus(f.ctx, cached, statemachine.Decision{Status: v1alpha1.VirtualMachineMigrationStatus{Phase: v1alpha1.PhaseSucceeded}})
	assert.ErrorIs(t, err, errSummaryWrite)
	assert.ErrorIs(t, f.c.setFinalizer(f.ctx, cached, false), errSummaryWrite)
	assert.Equal(t, whole, f.migration())

	// Gone from the API server, still summarised in the cache: nothing to do.
	require.NoError(t, f.mig.Tracker().Delete(migrationsResource, walkNamespace, walkName))
	_, err = f.c.sync(f.ctx, key(whole))
	assert.NoError(t, err, "a reconcile of a finished migration that is gone")
}

// TestTTLDeletesTheFinishedMigrationAndKeepsWhatItMade: once its time to
// live ended, a finished migration held as a summary is read whole, its
// evidence recorded (the disks' checksums are not in the summary), and it
// is deleted; its status stays whole until it is gone, and the VM and its
// DataVolumes stay.
func TestTTLDeletesTheFinishedMigrationAndKeepsWhatItMade(t *testing.T) {
	f, whole := finishedWalk(t, 600)
	f.deleteAsAPIServer()
	kept := f.children()
	require.NotEmpty(t, kept)

	// Before its time: the key comes back later, nothing is written.
	f.c.Enqueue(key(whole))
	require.True(t, f.c.processNextItem(f.ctx))
	assert.Equal(t, whole, f.migration())

	f.clock.Step(11 * time.Minute)
	f.c.Enqueue(key(whole))
	f.drainEvents()
	before := len(f.events)
	require.True(t, f.c.processNextItem(f.ctx))
	f.drainEvents()
	cur := f.migration()
	require.NotNil(t, cur.DeletionTimestamp, "the migration is deleted")
	assert.Equal(t, whole.Status, cur.Status, "its status, whole")
	require.Len(t, f.events[before:], 1)
	event := f.events[before]
	assert.True(t, strings.HasPrefix(event, "Normal "+ReasonExpired+" time to live ended"), event)
	for _, d := range whole.Status.Disks {
		assert.Contains(t, event, fmt.Sprintf("sha256 %s", d.SHA256), "the event records disk %s's checksum", d.Name)
		assert.Contains(t, event, "DataVolume "+d.DataVolume)
	}
	for _, e := range whole.Status.Evidence {
		assert.Contains(t, event, string(e.Phase)+" "+stamp(&e.ReachedAt), "the time %s was reached", e.Phase)
		if e.Phase == v1alpha1.PhaseAwaitingApproval {
			assert.Contains(t, event, "cutover approved "+stamp(&e.ReachedAt))
		}
	}
	assert.Contains(t, event, "completed "+stamp(whole.Status.CompletionTime))

	// The deletion runs as any other: the finalizer goes, what it made stays,
	// handed over (the VM and its DataVolumes lose the migration's labels).
	for i := 0; f.migration() != nil; i++ {
		require.Less(t, i, 5, "the migration is still there after 5 syncs")
		f.sync()
	}
	f.requireReleased(whole)
	var instances []string
	for _, c := range kept {
		if strings.HasPrefix(c, "VirtualMachineInstance/") {
			instances = append(instances, c)
		}
	}
	f.requireChildren("after the migration expired (what still carries its labels)", append(instances, targetClaims(whole)...)...)
}

var migrationsResource = v1alpha1.SchemeGroupVersion.WithResource("virtualmachinemigrations")

// TestExpiryScheduledFromEvents: the informer's events of finished
// migrations queue their keys for when their time to live ends, and no
// sooner; finished migrations without one are not queued.
func TestExpiryScheduledFromEvents(t *testing.T) {
	f := newFixture(t, &fakeSource{})
	f.c.cfg.DefaultTTLAfterFinished = time.Hour
	ms := finishedMigrations()
	for name, m := range ms {
		m.Name = strings.ReplaceAll(name, " ", "-")
		m.Name = strings.ReplaceAll(m.Name, ",", "")
		f.c.enqueueMigration(m)
	}
	assert.Zero(t, f.c.queue.Len(), "nothing is due now")
	f.clock.Step(59 * time.Second) // completed a minute before T0; the spec TTL is two
	time.Sleep(50 * time.Millisecond)
	assert.Zero(t, f.c.queue.Len(), "nothing is due a second before")
	f.clock.Step(2 * time.Second)
	require.Eventually(t, func() bool { return f.c.queue.Len() == 1 }, 5*time.Second, 10*time.Millisecond)
	got, _ := f.c.queue.Get()
	f.c.queue.Done(got)
	assert.Equal(t, cache.ObjectName{Namespace: ms["succeeded"].Namespace, Name: "succeeded"}, got,
		"the spec's TTL; the failed one that left its source off never expires")
	f.clock.Step(time.Hour)
	require.Eventually(t, func() bool { return f.c.queue.Len() == 2 }, 5*time.Second, 10*time.Millisecond,
		"the default TTL of the others")
}
