package controller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/steps/pipeline"
	"platform.example/vm-migration/test/builders"
	"platform.example/vm-migration/test/fakes"
)

// TestStaleCacheDoesNotUndoAWrite: the decision that records the target
// disks verified also deletes the verification Job. When the Job's
// deletion reaches the caches before the migration's status write does
// (two watches, no order between them), the next reconcile reads a
// migration whose status still waits for the Job, and no Job: before the
// fix it created the verification Job a second time (seen in the e2e
// crash and leader tests: "times Job/crash-3-verify-1 was created, want
// once: 2"). It now waits for the cache.
func TestStaleCacheDoesNotUndoAWrite(t *testing.T) {
	f := newWalkFixture(t, walkOptions{})
	if !f.walk(walkOptions{}, func(p v1alpha1.Phase) bool { return p == v1alpha1.PhaseImporting }) {
		t.Fatal("the walk did not stop in Importing")
	}
	// The conversion's read of the disks written in place is older than
	// the verification's maximum age: a verification Job reads them.
	f.clock.Step(statemachine.DefaultVerificationMaxAge + time.Minute)
	f.setDataVolumePhases(cdiv1.Succeeded, "100.0%")
	m := f.syncTo(v1alpha1.PhaseImporting)
	require.NotNil(t, m.Status.Verification, "the aged read is renewed")
	verifyJob := naming.VerificationJob(walkName, 1)
	readBack, err := builders.ReadBackResult(m, 1<<20)
	require.NoError(t, err)
	f.finishJob(verifyJob, pipeline.VerificationContainer, true, readBack)

	before := f.migration()
	f.sync() // records the disks verified and deletes the Job
	require.NotNil(t, f.migration().Status.Verification.CompletedAt)
	require.Contains(t, f.writes, "delete jobs")

	// The Job's deletion is in the caches, the status write not yet.
	f.resync()
	require.NoError(t, f.informers.Migrations.GetIndexer().Update(before))
	f.cluster.Clear()
	after, err := f.c.sync(f.ctx, key(f.m))
	require.NoError(t, err)
	_, writes := fakes.Calls(f.cluster.Actions())
	assert.NotContains(t, writes, "create jobs", "the verification Job created again from a stale cache")
	assert.Equal(t, staleCacheRequeue, after, "looks again once the cache has the write")

	// Once the cache has the write, the migration goes on.
	m = f.syncTo(v1alpha1.PhaseCreatingVM)
	assert.NotNil(t, m.Status.Verification.CompletedAt)
}
