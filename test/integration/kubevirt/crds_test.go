//go:build integration

package kubevirt

import (
	"context"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.example/vm-migration/test/framework"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// wantCRDs are the CRDs virt-controller's informers list and watch: each
// must be among the generated ones.
var wantCRDs = []string{
	"kubevirts.kubevirt.io",
	"virtualmachines.kubevirt.io",
	"virtualmachineinstances.kubevirt.io",
	"virtualmachineinstancereplicasets.kubevirt.io",
	"virtualmachineinstancemigrations.kubevirt.io",
	"virtualmachineinstancepresets.kubevirt.io",
	"virtualmachinepools.pool.kubevirt.io",
	"migrationpolicies.migrations.kubevirt.io",
	"virtualmachinesnapshots.snapshot.kubevirt.io",
	"virtualmachinesnapshotcontents.snapshot.kubevirt.io",
	"virtualmachinerestores.snapshot.kubevirt.io",
	"virtualmachineexports.export.kubevirt.io",
	"virtualmachineclones.clone.kubevirt.io",
	"virtualmachineinstancetypes.instancetype.kubevirt.io",
	"virtualmachineclusterinstancetypes.instancetype.kubevirt.io",
	"virtualmachinepreferences.instancetype.kubevirt.io",
	"virtualmachineclusterpreferences.instancetype.kubevirt.io",
	"virtualmachinebackups.backup.kubevirt.io",
	"virtualmachinebackuptrackers.backup.kubevirt.io",
}

// generatedCRDs reads every CRD in $KUBEVIRT_DIR/crds.
func generatedCRDs(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(kubevirtDir(t), "crds", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no CRD files in %s/crds", kubevirtDir(t))
	var crds []*unstructured.Unstructured
	for _, f := range files {
		objs, err := framework.ReadObjects(f)
		require.NoError(t, err, "reading %s", f)
		require.Len(t, objs, 1, "%s holds one object", f)
		require.Equal(t, "CustomResourceDefinition", objs[0].GetKind(), f)
		crds = append(crds, objs[0])
	}
	return crds
}

// TestGeneratedCRDsAreEstablished applies every CRD KubeVirt's generators
// wrote and checks that the API server establishes each one, and that they
// include every CRD virt-controller watches.
func TestGeneratedCRDsAreEstablished(t *testing.T) {
	crds := generatedCRDs(t)
	env := framework.Env(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	require.NoError(t, env.InstallCRDs(ctx, filepath.Join(kubevirtDir(t), "crds")))

	dc := env.Dynamic(t)
	var names []string
	for _, crd := range crds {
		got, err := dc.Resource(crdGVR).Get(ctx, crd.GetName(), metav1.GetOptions{})
		require.NoError(t, err, "getting CRD %s", crd.GetName())
		assert.True(t, established(got), "CRD %s is not Established", crd.GetName())
		names = append(names, crd.GetName())
	}
	sort.Strings(names)
	for _, want := range wantCRDs {
		assert.Contains(t, names, want, "the generators wrote no CRD %s", want)
	}
	t.Logf("%d CRDs established: %v", len(names), names)
}

// established reports whether crd has the condition Established=True.
func established(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}
