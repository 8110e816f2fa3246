package pipeline

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/test/builders"
)

// TestChildrenComeFromTheMigrationIndex: a migration's children are read
// through the migration-UID index of the child caches: its own, not its
// neighbours' in the same namespace; a cache without the index is read by
// label selector, with the same result.
func TestChildrenComeFromTheMigrationIndex(t *testing.T) {
	m := builders.Migration(builders.Named("mine"))
	other := builders.Migration(builders.Named("theirs"))
	f := newFakeStep(t,
		builders.StagingClaim(m, "mine-disk-2000"), builders.StagingClaim(other, "theirs-disk-2000"),
		builders.ConfigMap(m, "mine-transfer-1", v1alpha1.ComponentTransfer, nil),
		builders.ConfigMap(other, "theirs-transfer-1", v1alpha1.ComponentTransfer, nil),
		builders.ServiceAccount(m, "mine-transfer-1"), builders.Role(other, "theirs-transfer-1"))
	claims := f.step.Listers.Caches["persistentvolumeclaims"]
	require.NotNil(t, claims)
	require.Contains(t, claims.GetIndexers(), IndexMigrationUID)

	fromIndex, err := owned[*corev1.PersistentVolumeClaim](f.step, "persistentvolumeclaims", m)
	require.NoError(t, err)
	assert.Equal(t, []string{"mine-disk-2000"}, claimNames(fromIndex))

	// The same objects in a cache without the index (an informer that
	// already ran refuses new indexes): read by label over the namespace.
	plain := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range claims.List() {
		require.NoError(t, plain.Add(o))
	}
	unindexed := &Step{Kube: f.step.Kube, Listers: f.step.Listers}
	unindexed.Listers.Caches = map[string]cache.Indexer{"persistentvolumeclaims": plain}
	bySelector, err := owned[*corev1.PersistentVolumeClaim](unindexed, "persistentvolumeclaims", m)
	require.NoError(t, err)
	assert.Equal(t, claimNames(fromIndex), claimNames(bySelector), "the same children either way")

	_, err = owned[*corev1.PersistentVolumeClaim](&Step{}, "persistentvolumeclaims", m)
	assert.ErrorContains(t, err, "no cache of persistentvolumeclaims")

	var c statemachine.Children
	require.NoError(t, f.step.observeChildren(m, &c))
	assert.Equal(t, []string{"mine-disk-2000"}, statemachine.Names(c.StagingClaims))
	assert.Equal(t, []string{"mine-transfer-1"}, statemachine.Names(c.ConfigMaps))
	assert.Equal(t, []string{"mine-transfer-1"}, statemachine.Names(c.TransferAccess))
}

// TestOwnedReadsOnlyTheIndex: when the cache has the index, owned never
// lists the namespace or the whole cache.
func TestOwnedReadsOnlyTheIndex(t *testing.T) {
	m := builders.Migration(builders.Named("mine"))
	x := &listCounter{Indexer: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{
		IndexMigrationUID: byMigrationUID, cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})}
	require.NoError(t, x.Add(builders.StagingClaim(m, "mine-disk-2000")))
	s := &Step{Listers: Listers{Caches: map[string]cache.Indexer{"persistentvolumeclaims": x}}}
	got, err := owned[*corev1.PersistentVolumeClaim](s, "persistentvolumeclaims", m)
	require.NoError(t, err)
	assert.Zero(t, x.lists, "the namespace or the whole cache was listed")
	assert.Equal(t, []string{"mine-disk-2000"}, claimNames(got))

	x.Indexer = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	require.NoError(t, x.Add(builders.StagingClaim(m, "mine-disk-2000")))
	got, err = owned[*corev1.PersistentVolumeClaim](s, "persistentvolumeclaims", m)
	require.NoError(t, err)
	assert.Positive(t, x.lists, "without the index, the namespace is listed")
	assert.Equal(t, []string{"mine-disk-2000"}, claimNames(got))
}

// listCounter counts the reads of a cache that list a namespace or the
// whole cache.
type listCounter struct {
	cache.Indexer
	lists int
}

func (c *listCounter) Index(name string, obj any) ([]any, error) {
	c.lists++
	return c.Indexer.Index(name, obj)
}

func (c *listCounter) List() []any {
	c.lists++
	return c.Indexer.List()
}

func claimNames(claims []*corev1.PersistentVolumeClaim) []string {
	out := []string{}
	for _, c := range claims {
		out = append(out, c.Name)
	}
	return out
}

// TestCopiesWithTheMigrationsLabelsAreNotItsChildren (issue 46): a claim
// or DataVolume carrying the migration's labels but not named in its
// status as one of its disks' (a copy a KubeVirt snapshot's restore made,
// labels included), or a claim of a disk's name but not of the UID the
// transfer wrote, is no child of the migration: no rollback or deletion
// of it deletes it.
func TestCopiesWithTheMigrationsLabelsAreNotItsChildren(t *testing.T) {
	m := onePass(linuxBIOS())
	disk := m.Status.Disks[0]
	written := &corev1.PersistentVolumeClaim{ObjectMeta: builders.ChildMeta(m, disk.StagingClaim, v1alpha1.ComponentDisk, false)}
	written.UID = disk.TargetClaimUID
	restored := &corev1.PersistentVolumeClaim{ObjectMeta: builders.ChildMeta(m, "restore-8f1e2d-"+disk.StagingClaim, v1alpha1.ComponentDisk, false)}
	dv := builders.DataVolume(m, disk.DataVolume, cdiv1.Succeeded, nil)
	restoredDV := builders.DataVolume(m, "restore-8f1e2d-"+disk.DataVolume, cdiv1.Succeeded, nil)
	f := newFakeStep(t, written, restored, dv, restoredDV)
	var obs statemachine.Observation
	require.NoError(t, f.step.Observe(m, &obs))
	assert.Equal(t, []string{disk.StagingClaim}, statemachine.Names(obs.Children.TargetClaims), "the restored copy is not the migration's")
	assert.Equal(t, []string{disk.DataVolume}, statemachine.Names(obs.Children.DataVolumes), "nor the restored DataVolume")

	m.Status.Disks[0].TargetClaimUID = "the-uid-the-transfer-wrote"
	obs = statemachine.Observation{}
	require.NoError(t, f.step.Observe(m, &obs))
	assert.Empty(t, obs.Children.TargetClaims, "a claim of the name but another UID is not the one written")
}
