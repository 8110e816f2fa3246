package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/client-go/tools/cache"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/test/builders"
)

func TestDecidedVersions(t *testing.T) {
	key := cache.ObjectName{Namespace: "apps", Name: "web-01"}
	d := newDecidedVersions()
	assert.False(t, d.stale(key, "10"), "nothing written: the cache is as good as any")

	d.wrote(key, "10", "10")
	assert.False(t, d.stale(key, "10"), "a write that changed nothing is not waited for")

	d.wrote(key, "10", "11")
	d.wrote(key, "11", "12") // a failed action's status, written after the decision's
	assert.True(t, d.stale(key, "10"), "the version the decision was made from")
	assert.True(t, d.stale(key, "11"), "the decision's write, superseded by the failed action's")
	assert.False(t, d.stale(key, "12"), "the last write: caught up")
	assert.False(t, d.stale(key, "10"), "once caught up the record is gone")

	d.wrote(key, "12", "13")
	assert.False(t, d.stale(key, "14"), "a version after the write (someone else's)")
	d.wrote(key, "14", "15")
	d.forget(key)
	assert.False(t, d.stale(key, "14"), "forgotten with the migration")

	d.wrote(key, "20", "21")
	d.observed(key, "20")
	assert.True(t, d.stale(key, "20"), "the cache at the version a write was decided from keeps the record")
	d.observed(key, "21")
	assert.Empty(t, d.from, "the cache at the finishing write's version: the record goes")
}

// TestFinishedMigrationLeavesNoWriteRecord: the informer's event of a
// migration that just ended drops the record of its writes, which no
// reconcile of it would read again (bench-scale: one per finished
// migration stayed until its deletion).
func TestFinishedMigrationLeavesNoWriteRecord(t *testing.T) {
	m := builders.Migration(builders.WithFinalizer, builders.Reached(v1alpha1.PhaseSucceeded), func(m *v1alpha1.VirtualMachineMigration) {
		m.Status.ObservedGeneration, m.ResourceVersion = m.Generation, "31"
	})
	f := newFixture(t, &fakeSource{}, m)
	f.c.decided.wrote(key(m), "30", "31")
	f.c.enqueueMigration(m)
	assert.Empty(t, f.c.decided.from)
}
