//go:build integration

package integration

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

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
			if err != nil {
				t.Fatal(err)
			}
			updated, err := tc.addFinalizer(m)
			if err != nil {
				t.Fatal(err)
			}
			after, err := migrations(t, env, ns).Get(ctx, tc.name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if updated.Generation != tc.wantGeneration || !slices.Contains(updated.Finalizers, v1alpha1.FinalizerName) {
				t.Errorf("generation %d with finalizers %v, want %d with the finalizer; spec before: %v; after: %v",
					updated.Generation, updated.Finalizers, tc.wantGeneration, before.Object["spec"], after.Object["spec"])
			}
			unchanged := reflect.DeepEqual(before.Object["spec"], after.Object["spec"])
			if unchanged != (tc.wantGeneration == 1) {
				t.Errorf("stored spec unchanged: %v, want %v; before: %v; after: %v", unchanged, tc.wantGeneration == 1, before.Object["spec"], after.Object["spec"])
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
	var last *v1alpha1.VirtualMachineMigration
	err := wait.PollUntilContextTimeout(testContext(t), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		m, err := client.Get(ctx, "web-01", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = m
		return slices.Contains(m.Finalizers, v1alpha1.FinalizerName) && m.Status.Phase == v1alpha1.PhaseValidating, nil
	})
	if err != nil {
		t.Fatalf("the controller did not set its finalizer and reach Validating within 30s; status: %s", describeStatus(last))
	}
	if last.Generation != 1 || last.Status.ObservedGeneration != 1 {
		t.Errorf("generation %d, observed %d, want 1 and 1: something but the user wrote spec", last.Generation, last.Status.ObservedGeneration)
	}
}
