//go:build integration

package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/manager"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/test/framework"
)

// TestFinalizerWritesAndGeneration shows why the controller must add its
// finalizer with a patch: a typed Update of a migration read unchanged
// rewrites its spec (an empty spec.conversion and spec.target.storage come
// back as {}, durations such as "30m" as "30m0s"), which the API server
// counts as a spec change (generation 2); a merge patch of
// metadata.finalizers, guarded by the resourceVersion, leaves the spec as
// the user wrote it.
func TestFinalizerWritesAndGeneration(t *testing.T) {
	env := framework.Env(t)
	ns := env.Namespace(t)
	ctx := testContext(t)
	client := migrationClient(t, env).MigrationV1alpha1().VirtualMachineMigrations(ns)
	cases := []struct {
		name           string
		addFinalizer   func(m *v1alpha1.VirtualMachineMigration) (*v1alpha1.VirtualMachineMigration, error)
		wantGeneration int64
	}{
		{name: "typed-update", wantGeneration: 2, addFinalizer: func(m *v1alpha1.VirtualMachineMigration) (*v1alpha1.VirtualMachineMigration, error) {
			m.Finalizers = append(m.Finalizers, v1alpha1.FinalizerName)
			return client.Update(ctx, m, metav1.UpdateOptions{})
		}},
		{name: "merge-patch", wantGeneration: 1, addFinalizer: func(m *v1alpha1.VirtualMachineMigration) (*v1alpha1.VirtualMachineMigration, error) {
			patch := fmt.Sprintf(`{"metadata":{"finalizers":[%q],"resourceVersion":%q}}`, v1alpha1.FinalizerName, m.ResourceVersion)
			return client.Patch(ctx, m.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := createAndGet(t, env, ns, newMigration(tc.name, set("spec.policy.stallTimeout", "45m")))
			m, err := client.Get(ctx, tc.name, metav1.GetOptions{})
			require.NoError(t, err, "getting %s", tc.name)
			updated, err := tc.addFinalizer(m)
			require.NoError(t, err, "adding the finalizer")
			after, err := migrations(t, env, ns).Get(ctx, tc.name, metav1.GetOptions{})
			require.NoError(t, err, "getting %s after the finalizer was added", tc.name)
			assert.Equal(t, tc.wantGeneration, updated.Generation, "generation once the finalizer was added; spec before: %v; after: %v",
				before.Object["spec"], after.Object["spec"])
			assert.Contains(t, updated.Finalizers, v1alpha1.FinalizerName, "finalizers once the finalizer was added")
			if tc.wantGeneration == 1 {
				assert.Equal(t, before.Object["spec"], after.Object["spec"], "the stored spec, want it unchanged")
			} else {
				assert.NotEqual(t, before.Object["spec"], after.Object["spec"], "the stored spec, want it rewritten")
			}
		})
	}
}

// TestUneditedMigrationKeepsGeneration runs the controller on a migration
// nobody edits, until it has set its finalizer and written status: the
// generation stays 1.
func TestUneditedMigrationKeepsGeneration(t *testing.T) {
	env := framework.Env(t)
	saConfig, _ := controllerIdentity(t, env)
	ns := env.Namespace(t)
	runController(t, saConfig, manager.Options{
		Namespace: ns, Workers: 1, VSphereCallTimeout: 5 * time.Second,
		Decisions: statemachine.Config{WaitInterval: 2 * time.Second},
	})
	createAndGet(t, env, ns, newMigration("web-01", set("spec.source.url", "https://127.0.0.1:1/sdk")))
	client := migrationClient(t, env).MigrationV1alpha1().VirtualMachineMigrations(ns)
	// The polls run one at a time; last is read once one succeeded.
	var last *v1alpha1.VirtualMachineMigration
	ctx := testContext(t)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		m, err := client.Get(ctx, "web-01", metav1.GetOptions{})
		require.NoError(c, err, "getting web-01")
		last = m
		assert.Contains(c, m.Finalizers, v1alpha1.FinalizerName, "finalizers; status: %s", describeStatus(m))
		assert.Equal(c, v1alpha1.PhaseValidating, m.Status.Phase, "phase; status: %s", describeStatus(m))
	}, 30*time.Second, 200*time.Millisecond, "the controller did not set its finalizer and reach Validating within 30s")
	assert.Equal(t, int64(1), last.Generation, "generation: something but the user wrote spec")
	assert.Equal(t, int64(1), last.Status.ObservedGeneration, "observed generation")
}
