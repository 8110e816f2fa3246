//go:build integration

package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	miginformers "platform.example/vm-migration/pkg/generated/migration/informers/externalversions"
	"platform.example/vm-migration/pkg/manager"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/test/framework"
)

// migrationCRD is our CustomResourceDefinition's name.
const migrationCRD = "virtualmachinemigrations.migration.platform.example"

// oldDurationRule is the rule the duration fields carried before they were
// bounded: it admits values Go's duration parser overflows on.
const oldDurationRule = `self.matches('^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$') && !self.matches('^([0]+(\\.[0]+)?(ms|s|m|h))+$')`

// durationFields are the duration properties of the spec (and of
// status.appliedSpec, which copies it).
var durationFields = map[string]bool{"stallTimeout": true, "startTimeout": true, "timeout": true, "deadline": true}

// worstOldDurations are values the old schema admitted and Go cannot parse.
var worstOldDurations = map[string]string{
	"spec.policy.stallTimeout":     "9999999999h",
	"spec.policy.startTimeout":     "2562048h",
	"spec.policy.shutdown.timeout": "99999999999999999999s",
	"spec.policy.retry.deadline":   "9223372036854775808ms",
}

// worstNewDurations are the longest values the bounded schema admits,
// spelled in several ways.
var worstNewDurations = map[string]string{
	"spec.policy.stallTimeout":     "8760h",
	"spec.policy.startTimeout":     "525600m",
	"spec.policy.shutdown.timeout": "8759h59m59.999999999s",
	"spec.policy.retry.deadline":   "31536000000ms",
}

// TestStoredDurationsNeverStopTheCache stores, with the schema as it was
// before durations were bounded, a migration whose durations Go's parser
// overflows on; then, with the bounded schema, the longest durations it
// admits. An informer over all namespaces must still sync and hold every
// migration (one undecodable item used to fail the whole LIST, freezing
// the cache of every namespace), and the controller must reconcile a
// migration in another namespace and give the bad one a condition that
// names its fields.
func TestStoredDurationsNeverStopTheCache(t *testing.T) {
	env := framework.Env(t)
	ctx := testContext(t)
	nsOld, nsNew, nsOther := env.Namespace(t), env.Namespace(t), env.Namespace(t)

	withOldDurationSchema(t, env, func() {
		createAndGet(t, env, nsOld, newMigration("old-durations", setAll(worstOldDurations)...))
	})
	for path, value := range worstOldDurations {
		_, err := migrations(t, env, nsNew).Create(ctx, newMigration("refused", set(path, value)), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		require.Error(t, err, "the bounded schema admits %s=%s", path, value)
		assert.Contains(t, err.Error(), path)
	}
	createAndGet(t, env, nsNew, newMigration("longest-durations", setAll(worstNewDurations)...))
	createAndGet(t, env, nsOther, newMigration("web-01", set("spec.source.url", "https://127.0.0.1:1/sdk")))
	t.Cleanup(func() {
		dropFinalizers(t, env, map[string]string{nsOld: "old-durations", nsNew: "longest-durations", nsOther: "web-01"})
	})

	// A cluster-wide informer syncs and holds all three.
	factory := miginformers.NewSharedInformerFactory(migrationClient(t, env), 0)
	informer := factory.Migration().V1alpha1().VirtualMachineMigrations().Informer()
	stop := make(chan struct{})
	factory.Start(stop)
	t.Cleanup(func() { close(stop); factory.Shutdown() })
	syncCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	require.True(t, cache.WaitForCacheSync(syncCtx.Done(), informer.HasSynced),
		"the cluster-wide migration informer did not sync within 20s: a stored duration fails the LIST")
	for _, key := range []string{nsOld + "/old-durations", nsNew + "/longest-durations", nsOther + "/web-01"} {
		obj, ok, err := informer.GetStore().GetByKey(key)
		require.NoError(t, err)
		require.True(t, ok, "%s is not in the cache", key)
		if key == nsNew+"/longest-durations" {
			p := obj.(*v1alpha1.VirtualMachineMigration).Spec.Policy
			assert.Equal(t, v1alpha1.MaxDuration, p.StallAfter())
			assert.Equal(t, v1alpha1.MaxDuration, p.StartDeadline())
			assert.Equal(t, v1alpha1.MaxDuration-time.Nanosecond, p.ShutdownTimeout())
			assert.Equal(t, v1alpha1.MaxDuration, p.RetryDeadline())
			assert.Empty(t, p.DurationProblems())
		}
	}

	// The old object stays writable: the bounded rule is false, never an
	// evaluation error, for what it holds, so the API server ratchets it
	// (a rule that errors is not ratcheted, and every write of the
	// object, its status included, would be refused).
	_, err := migrations(t, env, nsOld).Patch(ctx, "old-durations", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"touched":"yes"}}}`), metav1.PatchOptions{})
	require.NoError(t, err, "a metadata change of a migration stored under the old schema is refused")

	// The controller, watching the three namespaces, reconciles the
	// migration of the third and tells the first what is wrong.
	runController(t, env.Config(), manager.Options{
		Namespaces: []string{nsOld, nsNew, nsOther}, Workers: 2, VSphereCallTimeout: 2 * time.Second,
		Decisions: statemachine.Config{WaitInterval: 2 * time.Second, PollInterval: time.Second},
	})
	client := migrationClient(t, env).MigrationV1alpha1()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		m, err := client.VirtualMachineMigrations(nsOther).Get(ctx, "web-01", metav1.GetOptions{})
		require.NoError(c, err)
		assert.Contains(c, m.Finalizers, v1alpha1.FinalizerName, "not reconciled: %s", describeStatus(m))
		assert.NotEmpty(c, m.Status.Phase, "not reconciled: %s", describeStatus(m))
	}, 30*time.Second, 200*time.Millisecond, "the migration of another namespace was not reconciled")
	var cond *metav1.Condition
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		m, err := client.VirtualMachineMigrations(nsOld).Get(ctx, "old-durations", metav1.GetOptions{})
		require.NoError(c, err)
		cond = conditionWithReason(m.Status.Conditions, "DurationOutOfRange")
		assert.NotNil(c, cond, "no DurationOutOfRange condition: %s", describeStatus(m))
	}, 30*time.Second, 200*time.Millisecond, "the migration with overflowing durations got no condition")
	t.Logf("condition %s=%s: %s", cond.Type, cond.Status, cond.Message)
	for path, value := range worstOldDurations {
		assert.Contains(t, cond.Message, path+" "+`"`+value+`"`)
	}
	// The cutover copies the spec into status.appliedSpec: that copy, a
	// new path the API server does not ratchet, must pass the schema.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		old, err := client.VirtualMachineMigrations(nsOld).Get(ctx, "old-durations", metav1.GetOptions{})
		if err != nil {
			return err
		}
		old.Status.AppliedSpec = old.Spec.DeepCopy()
		_, err = client.VirtualMachineMigrations(nsOld).UpdateStatus(ctx, old, metav1.UpdateOptions{})
		return err
	})
	require.NoError(t, err, "a status.appliedSpec copied from a spec stored under the old schema is refused")

	m, err := client.VirtualMachineMigrations(nsNew).Get(ctx, "longest-durations", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Nil(t, conditionWithReason(m.Status.Conditions, "DurationOutOfRange"), "the longest admitted durations are reported: %s", describeStatus(m))
}

// setAll sets each path to its value.
func setAll(values map[string]string) []modifier {
	var mods []modifier
	for path, value := range values {
		mods = append(mods, set(path, value))
	}
	return mods
}

// withOldDurationSchema runs f while the migration CRD's duration fields
// carry the rule they had before they were bounded, then puts the CRD
// back as installed (also when the test fails).
func withOldDurationSchema(t *testing.T, env *framework.Environment, f func()) {
	t.Helper()
	ctx := testContext(t)
	crds := env.Dynamic(t).Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	installed, err := crds.Get(ctx, migrationCRD, metav1.GetOptions{})
	require.NoError(t, err)
	restore := func() {
		cur, err := crds.Get(ctx, migrationCRD, metav1.GetOptions{})
		require.NoError(t, err)
		back := installed.DeepCopy()
		back.SetResourceVersion(cur.GetResourceVersion())
		_, err = crds.Update(ctx, back, metav1.UpdateOptions{})
		require.NoError(t, err, "putting the CRD back")
		waitForDurationRule(t, env, false)
	}
	old := installed.DeepCopy()
	versions, _, _ := unstructured.NestedSlice(old.Object, "spec", "versions")
	for _, v := range versions {
		loosenDurations(v.(map[string]any))
	}
	require.NoError(t, unstructured.SetNestedSlice(old.Object, versions, "spec", "versions"))
	_, err = crds.Update(ctx, old, metav1.UpdateOptions{})
	require.NoError(t, err, "installing the old duration rule")
	done := false
	t.Cleanup(func() {
		if !done {
			restore()
		}
	})
	waitForDurationRule(t, env, true)
	f()
	restore()
	done = true
}

// loosenDurations gives every duration property under schema the old rule.
func loosenDurations(schema map[string]any) {
	for key, value := range schema {
		child, ok := value.(map[string]any)
		if !ok {
			continue
		}
		if key == "properties" {
			for name, prop := range child {
				p, ok := prop.(map[string]any)
				if ok && durationFields[name] && p["type"] == "string" {
					p["x-kubernetes-validations"] = []any{map[string]any{"rule": oldDurationRule, "message": "must be a positive duration such as 90s, 5m or 1h30m"}}
					delete(p, "maxLength")
				}
			}
		}
		loosenDurations(child)
	}
}

// waitForDurationRule waits until the API server applies the old rule
// (old: an overflowing duration is admitted) or the bounded one.
func waitForDurationRule(t *testing.T, env *framework.Environment, old bool) {
	t.Helper()
	ns := env.Namespace(t)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, err := migrations(t, env, ns).Create(testContext(t), newMigration("probe", set("spec.policy.stallTimeout", "9999999999h")),
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if old {
			assert.NoError(c, err)
		} else {
			assert.True(c, apierrors.IsInvalid(err), "an overflowing duration is still admitted: %v", err)
		}
	}, 30*time.Second, 200*time.Millisecond, "the API server did not apply the changed CRD within 30s")
}

// dropFinalizers removes the finalizers of the migrations (namespace to
// name), so that their namespaces can go.
func dropFinalizers(t *testing.T, env *framework.Environment, byNamespace map[string]string) {
	ctx := testContext(t)
	for ns, name := range byNamespace {
		_, err := migrations(t, env, ns).Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Logf("dropping the finalizers of %s/%s: %v", ns, name, err)
		}
		_ = migrations(t, env, ns).Delete(ctx, name, metav1.DeleteOptions{})
	}
}
