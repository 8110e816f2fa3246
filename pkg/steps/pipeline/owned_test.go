package pipeline

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

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

	list := func(ns string, sel labels.Selector) ([]*corev1.PersistentVolumeClaim, error) {
		return f.step.Listers.Claims.PersistentVolumeClaims(ns).List(sel)
	}
	fromIndex, err := owned(f.step, "persistentvolumeclaims", m, list)
	require.NoError(t, err)
	assert.Equal(t, []string{"mine-disk-2000"}, claimNames(fromIndex))

	unindexed := *f.step
	unindexed.Listers.Caches = nil
	bySelector, err := owned(&unindexed, "persistentvolumeclaims", m, list)
	require.NoError(t, err)
	assert.Equal(t, claimNames(fromIndex), claimNames(bySelector), "the same children either way")

	var c statemachine.Children
	require.NoError(t, f.step.observeChildren(m, &c))
	assert.Equal(t, []string{"mine-disk-2000"}, statemachine.Names(c.StagingClaims))
	assert.Equal(t, []string{"mine-transfer-1"}, statemachine.Names(c.ConfigMaps))
	assert.Equal(t, []string{"mine-transfer-1"}, statemachine.Names(c.TransferAccess))
}

// TestOwnedReadsOnlyTheIndex: when the cache has the index, owned never
// lists the namespace (its list function is not called).
func TestOwnedReadsOnlyTheIndex(t *testing.T) {
	m := builders.Migration(builders.Named("mine"))
	x := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{IndexMigrationUID: byMigrationUID})
	require.NoError(t, x.Add(builders.StagingClaim(m, "mine-disk-2000")))
	s := &Step{Listers: Listers{Caches: map[string]cache.Indexer{"persistentvolumeclaims": x}}}
	listed := false
	got, err := owned(s, "persistentvolumeclaims", m, func(string, labels.Selector) ([]*corev1.PersistentVolumeClaim, error) {
		listed = true
		return nil, nil
	})
	require.NoError(t, err)
	assert.False(t, listed, "the namespace was listed")
	assert.Equal(t, []string{"mine-disk-2000"}, claimNames(got))
}

func claimNames(claims []*corev1.PersistentVolumeClaim) []string {
	out := []string{}
	for _, c := range claims {
		out = append(out, c.Name)
	}
	return out
}
