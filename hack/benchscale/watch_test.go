package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

func benchMigration(name string, phase v1alpha1.Phase) *v1alpha1.VirtualMachineMigration {
	m := &v1alpha1.VirtualMachineMigration{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: benchNamespace}}
	m.Status.Phase = phase
	return m
}

// TestWatcherValidationWait: the time from a migration's first sight (its
// creation) to the first sight of it past Validating, once per migration.
func TestWatcherValidationWait(t *testing.T) {
	w := newWatcher(3)
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	w.now = func() time.Time { return now }
	step := func(d time.Duration) { now = now.Add(d) }
	w.observe(nil, benchMigration("a", ""))
	w.observe(nil, benchMigration("b", ""))
	step(time.Second)
	w.observe(nil, benchMigration("c", ""))
	step(2 * time.Second)
	w.observe(benchMigration("a", ""), benchMigration("a", v1alpha1.PhasePending))
	w.observe(benchMigration("a", v1alpha1.PhasePending), benchMigration("a", v1alpha1.PhaseValidating))
	w.observe(benchMigration("a", v1alpha1.PhaseValidating), benchMigration("a", v1alpha1.PhaseQueued)) // 3 s
	step(4 * time.Second)
	w.observe(benchMigration("b", v1alpha1.PhaseValidating), benchMigration("b", v1alpha1.PhaseFailed)) // 7 s
	w.observe(benchMigration("a", v1alpha1.PhaseQueued), benchMigration("a", v1alpha1.PhaseStoppingSource))
	step(time.Second)
	// Back to Validating after a spec change, and on: not a second sample.
	w.observe(benchMigration("a", v1alpha1.PhaseStoppingSource), benchMigration("a", v1alpha1.PhaseValidating))
	w.observe(benchMigration("a", v1alpha1.PhaseValidating), benchMigration("a", v1alpha1.PhaseQueued))
	assert.ElementsMatch(t, []float64{3, 7}, w.validationWaits(), "seconds from creation to leaving Validating, c still in it")
	assert.Equal(t, 1, w.stillValidating(), "migrations seen not past Validating yet")
}

func TestProofJobsCounted(t *testing.T) {
	w := newWatcher(1)
	job := func(name, uid string) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: benchNamespace, UID: types.UID(uid)}}
	}
	h := w.proofJobHandler()
	h.OnAdd(job("proof-transfer", "1"), false)
	h.OnAdd(job("proof-conversion", "2"), false)
	h.OnUpdate(job("proof-transfer", "1"), job("proof-transfer", "1"))
	h.OnAdd(job("proof-transfer", "1"), false) // seen again after a relist
	h.OnDelete(job("proof-transfer", "1"))
	h.OnAdd(job("proof-transfer", "3"), false) // the same name, created again
	assert.Equal(t, 3, w.proofJobsCreated(), "distinct proof Jobs")
}
