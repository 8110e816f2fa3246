package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/steps/source"
	"platform.example/vm-migration/pkg/vsphere"
)

// deleteNamespace plays the deletion of the walk's namespace: the
// namespace is Terminating, the namespace controller deletes the
// credentials Secret (nothing holds it) and marks the migration deleted
// (its finalizer holds it).
func (f *walkFixture) deleteNamespace() {
	f.t.Helper()
	now := metav1.NewTime(f.clock.Now())
	f.add(&corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: walkNamespace, DeletionTimestamp: &now, Finalizers: nil},
		Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating},
	})
	require.NoError(f.t, f.kube.CoreV1().Secrets(walkNamespace).Delete(f.ctx, "vcenter-credentials", metav1.DeleteOptions{}))
	f.deleteMigration()
	f.resync()
}

// syncUntilGone syncs (a poll interval apart) until the migration is gone,
// at most n times; it reports whether it went.
func (f *walkFixture) syncUntilGone(n int) bool {
	f.t.Helper()
	for range n {
		if f.migration() == nil {
			return true
		}
		f.clock.Step(statemachine.DefaultWaitInterval)
		f.fixture.sync(f.m)
		f.playAPIServer()
		f.resync()
	}
	return f.migration() == nil
}

// TestDeletedNamespaceRestoresTheSource: deleting the namespace of a
// migration that stopped its source deletes the credentials Secret, and a
// Terminating namespace accepts no new one; the restore uses the
// credentials the controller kept in memory, powers the source on, and
// releases the finalizer, so the namespace can go.
func TestDeletedNamespaceRestoresTheSource(t *testing.T) {
	f := newWalkFixture(t, walkOptions{})
	require.True(t, f.walk(walkOptions{}, func(p v1alpha1.Phase) bool { return p == v1alpha1.PhaseTransferringDisks }))
	require.Equal(t, vsphereOff, f.powerState())

	f.deleteNamespace()
	if !f.syncUntilGone(30) {
		require.Fail(t, "the migration is still there after 30 syncs: "+conditionSummary(f.migration()))
	}
	assert.Equal(t, vsphereOn, f.powerState(), "the source was left powered off")
	assert.Contains(t, f.events, "Normal "+statemachine.ReasonSourceRestored+" the source VM is powered on again, as it was found")
}

// TestDeletedNamespaceWithoutCredentialsSaysSo: when the controller holds
// no credentials for the restore (it restarted while the namespace was
// being deleted), nothing can bring them back into a Terminating
// namespace: the controller says so (a warning event naming the source
// VM, a metric for the alert) and releases the finalizer rather than
// holding the namespace for ever.
func TestDeletedNamespaceWithoutCredentialsSaysSo(t *testing.T) {
	f := newWalkFixture(t, walkOptions{})
	require.True(t, f.walk(walkOptions{}, func(p v1alpha1.Phase) bool { return p == v1alpha1.PhaseTransferringDisks }))
	require.Equal(t, vsphereOff, f.powerState())
	vm := f.migration().Status.Source.Name

	f.deleteNamespace()
	// A restart: a source step with nothing in memory.
	restarted := &source.Step{Sessions: vsphere.NewSessionCache(), Secrets: f.factories.Secrets.Core().V1().Secrets().Lister()}
	t.Cleanup(func() { _ = restarted.Sessions.Close(context.Background()) })
	f.c.steps.Source = restarted

	if !f.syncUntilGone(30) {
		require.Fail(t, "the migration is still there after 30 syncs: "+conditionSummary(f.migration()))
	}
	assert.Equal(t, vsphereOff, f.powerState())
	i := slices.IndexFunc(f.events, func(e string) bool { return strings.HasPrefix(e, "Warning SourceRestoreAbandoned ") })
	require.GreaterOrEqual(t, i, 0, "no SourceRestoreAbandoned event: %v", f.events)
	assert.Contains(t, f.events[i], vm, "the event does not name the source VM")
	assert.Contains(t, f.events[i], "powered off")

	// The metric the alert reads names it too, after the migration is gone.
	want := fmt.Sprintf(`# HELP vm_migration_source_restore_abandoned %s
# TYPE vm_migration_source_restore_abandoned gauge
vm_migration_source_restore_abandoned{endpoint="%s",migration="%s",namespace="%s",source_vm="%s"} %d
`, abandonedHelp, f.m.Spec.Source.URL, walkName, walkNamespace, vm, f.clock.Now().Unix())
	require.NoError(t, testutil.CollectAndCompare(f.c.abandoned, strings.NewReader(want)))
}
