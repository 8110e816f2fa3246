//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/controller"
	"platform.example/vm-migration/test/builders"
)

// TestTTLAfterFinished: a migration with spec.ttlSecondsAfterFinished,
// approved by a person, succeeds and is deleted by the controller once its
// time to live ended, not before; every version of it until it is gone
// (the controller holds it as a summary, reads it whole, deletes it and
// releases its finalizer) has the status it had when it succeeded, but for
// the observed generation that the deletion (a new generation) moves. Its evidence outlives it in an event:
// every disk's checksum, its times, the approval and the field manager
// that wrote it. The migrated VM, still running, its DataVolumes and
// their claims stay, the same objects; the source stays off.
func TestTTLAfterFinished(t *testing.T) {
	s := newStack(t, stackOptions{})
	const name, ttl = "ttl-01", 8
	s.addVM(name, 71)
	mig := s.newMigration(name, name)
	builders.RequireApproval(mig)
	mig.Spec.TTLSecondsAfterFinished = ptr.To[int32](ttl)
	m := s.create(mig)
	s.waitPhase(m.Name, v1alpha1.PhaseAwaitingApproval, time.Minute)
	_, err := s.mig.MigrationV1alpha1().VirtualMachineMigrations(s.ns).Patch(s.ctx, m.Name, types.MergePatchType,
		[]byte(`{"spec":{"policy":{"approved":true}}}`), metav1.PatchOptions{FieldManager: "e2e-approver"})
	require.NoError(t, err, "approving")
	m = s.waitPhase(m.Name, v1alpha1.PhaseSucceeded, 3*time.Minute)
	require.NotNil(t, m.Status.CompletionTime)

	vm, err := s.kv.KubevirtV1().VirtualMachines(s.ns).Get(s.ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	dvUIDs := map[string]types.UID{}
	for _, d := range m.Status.Disks {
		dv, err := s.cdi.CdiV1beta1().DataVolumes(s.ns).Get(s.ctx, d.DataVolume, metav1.GetOptions{})
		require.NoError(t, err)
		dvUIDs[dv.Name] = dv.UID
	}

	seen := s.statusesUntilGone(m.Name, time.Minute)
	gone := time.Now()
	require.True(t, slices.ContainsFunc(seen, func(v v1alpha1.VirtualMachineMigration) bool { return v.DeletionTimestamp != nil }),
		"the controller deleted it: a version marked deleted was seen before it was gone")
	for _, v := range seen {
		assert.Equal(t, withoutGenerations(m.Status), withoutGenerations(v.Status),
			"the status of version %s (deleting: %t): nothing of the finished migration is lost while the controller holds it as a summary",
			v.ResourceVersion, v.DeletionTimestamp != nil)
	}
	assert.GreaterOrEqual(t, gone.Sub(m.Status.CompletionTime.Time), time.Duration(ttl)*time.Second-time.Second,
		"deleted only once its time to live ended (completion times have a second's precision)")

	fragments := []string{"time to live ended", "Succeeded", "field manager e2e-approver",
		"completed " + m.Status.CompletionTime.UTC().Format(time.RFC3339)}
	for _, d := range m.Status.Disks {
		require.NotEmpty(t, d.SHA256)
		fragments = append(fragments, fmt.Sprintf("%s (disk key %d): %d of %d bytes, sha256 %s", d.Name, d.Key, d.BytesTransferred, d.CapacityBytes, d.SHA256))
	}
	s.waitEvent(m, corev1.EventTypeNormal, controller.ReasonExpired, fragments...)

	got, err := s.kv.KubevirtV1().VirtualMachines(s.ns).Get(s.ctx, name, metav1.GetOptions{})
	require.NoError(t, err, "the migrated VM is gone with its migration")
	assert.Equal(t, vm.UID, got.UID)
	require.NotNil(t, got.Spec.RunStrategy)
	assert.Equal(t, kubevirtv1.RunStrategyAlways, *got.Spec.RunStrategy, "the migrated VM keeps running")
	for dvName, uid := range dvUIDs {
		dv, err := s.cdi.CdiV1beta1().DataVolumes(s.ns).Get(s.ctx, dvName, metav1.GetOptions{})
		if assert.NoError(t, err, "data volume %s is gone with the migration", dvName) {
			assert.Equal(t, uid, dv.UID, "data volume %s was replaced", dvName)
		}
		_, err = s.kube.CoreV1().PersistentVolumeClaims(s.ns).Get(s.ctx, dvName, metav1.GetOptions{})
		assert.NoError(t, err, "the claim of data volume %s", dvName)
	}
	s.waitNoLeftovers(m, time.Minute)
	assert.Equal(t, "poweredOff", s.powerState(name), "the migrated source stays off")
}

// statusesUntilGone watches a migration until it is gone and returns
// every version of it seen, the current one first.
func (s *stack) statusesUntilGone(name string, timeout time.Duration) []v1alpha1.VirtualMachineMigration {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.ctx, timeout)
	defer cancel()
	api := s.mig.MigrationV1alpha1().VirtualMachineMigrations(s.ns)
	cur, err := api.Get(ctx, name, metav1.GetOptions{})
	require.NoError(s.t, err)
	seen := []v1alpha1.VirtualMachineMigration{*cur}
	w, err := api.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: cur.ResourceVersion})
	require.NoError(s.t, err)
	defer w.Stop()
	for ev := range w.ResultChan() {
		m, ok := ev.Object.(*v1alpha1.VirtualMachineMigration)
		require.True(s.t, ok, "watch event %s: %v", ev.Type, ev.Object)
		if ev.Type == watch.Deleted {
			return seen
		}
		seen = append(seen, *m)
	}
	require.FailNow(s.t, fmt.Sprintf("migration %s still exists after %s", name, timeout))
	return nil
}

// withoutGenerations is st without its observed generations.
func withoutGenerations(st v1alpha1.VirtualMachineMigrationStatus) v1alpha1.VirtualMachineMigrationStatus {
	out := *st.DeepCopy()
	out.ObservedGeneration = 0
	for i := range out.Conditions {
		out.Conditions[i].ObservedGeneration = 0
	}
	return out
}
