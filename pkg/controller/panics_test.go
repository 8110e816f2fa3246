package controller

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/test/builders"
)

// panickingSource panics when it observes the migration named panicOn,
// as a defect reached by one migration's data would.
type panickingSource struct {
	fakeSource
	panicOn string
}

func (s *panickingSource) Observe(ctx context.Context, m *v1alpha1.VirtualMachineMigration, need statemachine.SourceNeed) statemachine.SourceObservation {
	if m.Name == s.panicOn {
		var guest []string
		_ = guest[len(m.Name)] // index out of range
	}
	return s.fakeSource.Observe(ctx, m, need)
}

// TestPanicFailsOnlyItsReconcile: a panic in one migration's reconcile
// becomes that reconcile's failure (backoff, a ReconcilePanic event
// naming the migration, the panics counter), and the worker goes on to
// reconcile the next migration.
func TestPanicFailsOnlyItsReconcile(t *testing.T) {
	bad := builders.Migration(builders.Named("bad"), builders.WithFinalizer, builders.Reached(v1alpha1.PhaseValidating))
	good := builders.Migration(builders.Named("good"))
	f := newFixture(t, &panickingSource{panicOn: "bad"}, bad, good)
	panics, failures := testutil.ToFloat64(reconcilePanics), testutil.ToFloat64(reconcileTotal.WithLabelValues("panic"))

	f.c.Enqueue(key(bad))
	require.True(t, f.c.processNextItem(f.ctx), "the worker goes on after a panic")
	assert.Equal(t, panics+1, testutil.ToFloat64(reconcilePanics))
	assert.Equal(t, failures+1, testutil.ToFloat64(reconcileTotal.WithLabelValues("panic")))
	assert.Equal(t, 1, f.c.queue.NumRequeues(key(bad)), "retried with backoff")
	f.drainEvents()
	require.Len(t, f.events, 1)
	assert.True(t, strings.HasPrefix(f.events[0], "Warning ReconcilePanic The controller's reconcile of this migration panicked (runtime error: index out of range [3] with length 0)"), f.events[0])

	f.c.Enqueue(key(good))
	require.Equal(t, 1, f.c.queue.Len(), "only the other migration is due: the panicked one waits out its backoff")
	require.True(t, f.c.processNextItem(f.ctx))
	f.resync()
	assert.NotEqual(t, v1alpha1.Phase(""), f.get(good).Status.Phase, "the other migration was reconciled")
}

// TestPanicOutsideTheWorkIsRecovered: a panic in the handling of a
// finished migration's key, outside any reconcile's work, is recovered
// the same way.
func TestPanicOutsideTheWorkIsRecovered(t *testing.T) {
	f := newFixture(t, &fakeSource{})
	f.c.migrations = nil // any use panics
	panics := testutil.ToFloat64(reconcilePanics)
	f.c.Enqueue(key(builders.Migration(builders.Named("any"))))
	assert.True(t, f.c.processNextItem(f.ctx))
	assert.Equal(t, panics+1, testutil.ToFloat64(reconcilePanics))
}
