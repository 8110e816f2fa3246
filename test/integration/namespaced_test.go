//go:build integration

package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/manager"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/test/framework"
)

// The names the namespaced overlay ships with and docs/operators/operating.md tells the
// user to change.
const (
	shippedNamespaces      = "  - namespaces/team-a\n  - namespaces/team-b\n"
	shippedNamespacesArg   = "--namespaces=team-a,team-b"
	shippedControllerNS    = "vm-migration-system"
	namespacedOverlayPath  = "overlays/namespaced"
	storageClassReaderRole = "vm-migration-controller-storageclasses"
)

// kustomize renders a kustomization directory with kubectl's kustomize.
func kustomize(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed")
	}
	out, err := exec.CommandContext(testContext(t), kubectl, "kustomize", dir).Output()
	require.NoError(t, err, "kubectl kustomize %s", dir)
	objs, err := framework.DecodeObjects(out)
	require.NoError(t, err)
	return objs
}

// namespacedOverlayFor copies manifests/ and edits its namespaced overlay
// as docs/operators/operating.md says, to watch namespaces, and renders it.
func namespacedOverlayFor(t *testing.T, namespaces ...string) []*unstructured.Unstructured {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(dir, os.DirFS(framework.RepoPath("manifests"))))
	overlay := filepath.Join(dir, namespacedOverlayPath)
	example, err := os.ReadFile(filepath.Join(overlay, "namespaces/team-a/kustomization.yaml"))
	require.NoError(t, err)
	var lines strings.Builder
	for _, ns := range namespaces {
		require.NoError(t, os.MkdirAll(filepath.Join(overlay, "namespaces", ns), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(overlay, "namespaces", ns, "kustomization.yaml"),
			[]byte(strings.ReplaceAll(string(example), "team-a", ns)), 0o644))
		lines.WriteString("  - namespaces/" + ns + "\n")
	}
	kustomization := filepath.Join(overlay, "kustomization.yaml")
	b, err := os.ReadFile(kustomization)
	require.NoError(t, err)
	text := string(b)
	require.Contains(t, text, shippedNamespaces, "the overlay no longer lists namespaces as docs/operators/operating.md says")
	require.Contains(t, text, shippedNamespacesArg, "the overlay no longer sets --namespaces as docs/operators/operating.md says")
	text = strings.Replace(text, shippedNamespaces, lines.String(), 1)
	text = strings.Replace(text, shippedNamespacesArg, "--namespaces="+strings.Join(namespaces, ","), 1)
	require.NoError(t, os.WriteFile(kustomization, []byte(text), 0o644))
	return kustomize(t, overlay)
}

// ruleSet spells each rule out as "verb group/resource" (resourceNames
// aside: the controller's rules have none).
func ruleSet(t *testing.T, objs []*unstructured.Unstructured, keep func(*unstructured.Unstructured) bool) []string {
	t.Helper()
	var out []string
	for _, o := range objs {
		if (o.GetKind() != "ClusterRole" && o.GetKind() != "Role") || !keep(o) {
			continue
		}
		var role rbacv1.ClusterRole
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &role))
		for _, r := range role.Rules {
			require.Empty(t, r.ResourceNames, "%s %s", o.GetKind(), o.GetName())
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						out = append(out, v+" "+g+"/"+res)
					}
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestNamespacedOverlayRules renders both installs: the namespaced one
// grants exactly the cluster-wide ClusterRole's rules, split into the Role
// of each listed namespace and one ClusterRole that only reads what
// preflight reads (StorageClasses, namespaces, KubeVirt's configuration);
// it binds nothing else cluster-wide, holds no API Priority and Fairness
// objects (a cluster admin applies manifests/flowcontrol.yaml), and the
// Deployment watches the listed namespaces.
func TestNamespacedOverlayRules(t *testing.T) {
	clusterWide := kustomize(t, framework.RepoPath("manifests"))
	namespaced := namespacedOverlayFor(t, "ns-one", "ns-two")
	byName := func(kind, name string) func(*unstructured.Unstructured) bool {
		return func(o *unstructured.Unstructured) bool { return o.GetKind() == kind && o.GetName() == name }
	}
	want := ruleSet(t, clusterWide, byName("ClusterRole", "vm-migration-controller"))
	require.NotEmpty(t, want)
	for _, ns := range []string{"ns-one", "ns-two"} {
		role := ruleSet(t, namespaced, func(o *unstructured.Unstructured) bool {
			return o.GetKind() == "Role" && o.GetNamespace() == ns && o.GetName() == "vm-migration-controller"
		})
		cluster := ruleSet(t, namespaced, func(o *unstructured.Unstructured) bool { return o.GetKind() == "ClusterRole" })
		assert.Equal(t, []string{"get /namespaces", "get k8s.cni.cncf.io/network-attachment-definitions", "list /nodes", "list cdi.kubevirt.io/storageprofiles",
			"list kubevirt.io/kubevirts", "list storage.k8s.io/storageclasses", "watch /nodes", "watch storage.k8s.io/storageclasses"}, cluster,
			"the namespaced install's only cluster-wide rules: reads for preflight, and of the nodes for the conversion slots")
		assert.Equal(t, want, slices.Compact(slices.Sorted(slices.Values(append(role, cluster...)))),
			"the Role in %s and the cluster read are not the cluster-wide ClusterRole's rules", ns)
	}
	var bound []string
	for _, o := range namespaced {
		switch o.GetKind() {
		case "FlowSchema", "PriorityLevelConfiguration":
			// Cluster-scoped, beyond what the namespaced install may
			// assume: a cluster admin applies manifests/flowcontrol.yaml.
			assert.Fail(t, "the namespaced install renders a "+o.GetKind(), o.GetName())
		case "ClusterRoleBinding":
			ref, _, _ := unstructured.NestedString(o.Object, "roleRef", "name")
			bound = append(bound, "ClusterRole "+ref)
		case "RoleBinding":
			ref, _, _ := unstructured.NestedString(o.Object, "roleRef", "name")
			bound = append(bound, o.GetNamespace()+" Role "+ref)
		case "Deployment":
			args, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			require.Len(t, args, 1)
			assert.Contains(t, args[0].(map[string]any)["args"], "--namespaces=ns-one,ns-two")
		}
	}
	slices.Sort(bound)
	assert.Equal(t, []string{
		"ClusterRole " + storageClassReaderRole,
		"ns-one Role vm-migration-controller",
		"ns-two Role vm-migration-controller",
		shippedControllerNS + " Role vm-migration-controller-leader-election",
	}, bound)
}

// installNamespacedOverlay renders the namespaced overlay for namespaces
// and applies it, with the controller's own namespace renamed to
// controllerNS and its ClusterRole and ClusterRoleBinding to names of
// their own: on this shared API server the cluster-wide tests bind the
// vm-migration-system ServiceAccount cluster-wide. It returns a config
// authenticated as the installed ServiceAccount.
func installNamespacedOverlay(t *testing.T, env *framework.Environment, controllerNS string, namespaces ...string) *rest.Config {
	t.Helper()
	ctx := testContext(t)
	var objs []*unstructured.Unstructured
	for _, o := range namespacedOverlayFor(t, namespaces...) {
		b, err := o.MarshalJSON()
		require.NoError(t, err)
		text := strings.ReplaceAll(string(b), `"`+shippedControllerNS+`"`, `"`+controllerNS+`"`)
		text = strings.ReplaceAll(text, "="+shippedControllerNS+`"`, "="+controllerNS+`"`)
		text = strings.ReplaceAll(text, `"`+storageClassReaderRole+`"`, `"`+storageClassReaderRole+"-"+controllerNS+`"`)
		renamed := &unstructured.Unstructured{}
		require.NoError(t, renamed.UnmarshalJSON([]byte(text)))
		objs = append(objs, renamed)
	}
	_, err := env.ApplyObjects(ctx, objs, "")
	require.NoError(t, err, "applying the namespaced overlay")
	cfg, err := env.ServiceAccountConfig(ctx, controllerNS, "migration-controller")
	require.NoError(t, err)
	return cfg
}

// may asks the API server whether the config's user may verb resource
// ("resource/subresource" for a subresource) in namespace ns ("" for all
// namespaces).
func may(t *testing.T, kube kubernetes.Interface, verb, group, resource, ns string) bool {
	t.Helper()
	resource, subresource, _ := strings.Cut(resource, "/")
	r, err := kube.AuthorizationV1().SelfSubjectAccessReviews().Create(testContext(t), &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: verb, Group: group, Resource: resource, Subresource: subresource, Namespace: ns,
		}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return r.Status.Allowed
}

// TestNamespacedInstall applies the namespaced overlay for two namespaces
// and runs the controller in-process as its ServiceAccount, watching
// them: a migration in each is reconciled (it reaches the
// CredentialsSecretNotFound wait), one in a third namespace is left alone;
// the ServiceAccount may not read Secrets or create Jobs there, nor
// anything across all namespaces but StorageClasses; and a controller
// asked to watch the third namespace refuses to start, naming it.
func TestNamespacedInstall(t *testing.T) {
	env := framework.Env(t)
	controllerNS, one, two, other := env.Namespace(t), env.Namespace(t), env.Namespace(t), env.Namespace(t)
	saConfig := installNamespacedOverlay(t, env, controllerNS, one, two)
	saKube, err := kubernetes.NewForConfig(saConfig)
	require.NoError(t, err)

	t.Run("access", func(t *testing.T) {
		for _, ns := range []string{one, two} {
			assert.True(t, may(t, saKube, "watch", "", "secrets", ns), "watch secrets in %s", ns)
			assert.True(t, may(t, saKube, "create", "batch", "jobs", ns), "create jobs in %s", ns)
			assert.True(t, may(t, saKube, "patch", v1alpha1.SchemeGroupVersion.Group, "virtualmachinemigrations", ns), "patch migrations in %s", ns)
			assert.True(t, may(t, saKube, "update", v1alpha1.SchemeGroupVersion.Group, "virtualmachinemigrations/status", ns), "update migration status in %s", ns)
			assert.False(t, may(t, saKube, "update", v1alpha1.SchemeGroupVersion.Group, "virtualmachinemigrations", ns), "update migrations in %s: the controller only patches its finalizer", ns)
		}
		for _, ns := range []string{other, ""} {
			for _, verb := range []string{"get", "list", "watch"} {
				assert.False(t, may(t, saKube, verb, "", "secrets", ns), "%s secrets in %q", verb, ns)
			}
			assert.False(t, may(t, saKube, "create", "batch", "jobs", ns), "create jobs in %q", ns)
			assert.False(t, may(t, saKube, "list", v1alpha1.SchemeGroupVersion.Group, "virtualmachinemigrations", ns), "list migrations in %q", ns)
			assert.False(t, may(t, saKube, "create", "", "configmaps", ns), "create configmaps in %q", ns)
		}
		assert.True(t, may(t, saKube, "watch", "storage.k8s.io", "storageclasses", ""), "watch storageclasses")
		assert.True(t, may(t, saKube, "watch", "", "nodes", ""), "watch nodes")
	})

	t.Run("refuses a namespace without its Role", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := manager.Run(ctx, saConfig, manager.Options{Namespaces: []string{one, other}})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "in namespace "+other+":")
		assert.NotContains(t, err.Error(), one+":")
	})

	t.Run("reconciles the listed namespaces only", func(t *testing.T) {
		migration := newMigration("web-01", set("spec.source.url", "https://127.0.0.1:1/sdk"))
		createAndGet(t, env, other, migration.DeepCopy())
		runController(t, saConfig, manager.Options{
			Namespaces: []string{two, one}, Workers: 2, VSphereCallTimeout: 5 * time.Second,
			Decisions: statemachine.Config{WaitInterval: 2 * time.Second},
		})
		client := migrationClient(t, env).MigrationV1alpha1()
		ctx := testContext(t)
		for _, ns := range []string{one, two} {
			createAndGet(t, env, ns, migration.DeepCopy())
		}
		for _, ns := range []string{one, two} {
			var last atomic.Pointer[v1alpha1.VirtualMachineMigration]
			require.Eventually(t, func() bool {
				m, err := client.VirtualMachineMigrations(ns).Get(ctx, "web-01", metav1.GetOptions{})
				if err != nil {
					return false
				}
				last.Store(m)
				return conditionWithReason(m.Status.Conditions, "CredentialsSecretNotFound") != nil
			}, 30*time.Second, 200*time.Millisecond, "the migration in %s did not wait for its Secret: %s", ns, describeLater(&last))
		}
		assert.Never(t, func() bool {
			m, err := client.VirtualMachineMigrations(other).Get(ctx, "web-01", metav1.GetOptions{})
			return err != nil || m.Status.Phase != "" || len(m.Status.Conditions) > 0 || len(m.Finalizers) > 0
		}, 3*time.Second, 200*time.Millisecond, "the migration in the namespace not listed was touched (or could not be read)")
	})
}

// describeLater describes the migration last holds when it is printed.
func describeLater(last *atomic.Pointer[v1alpha1.VirtualMachineMigration]) fmt.Stringer {
	return stringer(func() string { return describeStatus(last.Load()) })
}

type stringer func() string

func (s stringer) String() string { return s() }
