package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/steps/pipeline"
	"platform.example/vm-migration/test/builders"
)

// TestChildCachesHoldTheTargetClaims: the children's caches (their list
// selector, which the fake cluster's mirror does not apply) hold the
// claims the transfer writes the disks into, which every decision of the
// one-pass path looks for, and leave out the claims CDI makes with a
// DataVolume's labels.
func TestChildCachesHoldTheTargetClaims(t *testing.T) {
	sel, err := labels.Parse(childSelector)
	require.NoError(t, err)
	m := builders.Migration(builders.Reached(v1alpha1.PhaseTransferringDisks), builders.InPlace)
	claims, err := pipeline.RenderStagingClaims(m, pipeline.ClaimDefaults{})
	require.NoError(t, err)
	require.NotEmpty(t, claims)
	for _, c := range claims {
		assert.True(t, sel.Matches(labels.Set(c.Labels)), "claim %s (labels %v) is not cached", c.Name, c.Labels)
	}
	cdiMade := labels.Set{v1alpha1.LabelMigrationUID: string(m.UID), v1alpha1.LabelComponent: v1alpha1.ComponentImport}
	assert.False(t, sel.Matches(cdiMade), "a claim CDI made for a DataVolume is cached")
}
