//go:build integration

package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"platform.example/vm-migration/test/framework"
)

// controllerIdentity applies the controller's namespace and ServiceAccount
// (manifests/base) and the cluster-wide grant (manifests/rbac*.yaml) and
// returns a rest.Config authenticated as the controller's
// ServiceAccount (a token issued by the API server), and the ServiceAccount's
// namespace.
func controllerIdentity(t *testing.T, env *framework.Environment) (*rest.Config, string) {
	t.Helper()
	ctx := testContext(t)
	files := []string{framework.RepoPath("manifests/base/namespace.yaml"), framework.RepoPath("manifests/base/serviceaccount.yaml")}
	more, err := globRepo("manifests/rbac*.yaml")
	require.NoError(t, err, "listing manifests/rbac*.yaml")
	if len(more) == 0 {
		t.Skip("no manifests/rbac*.yaml yet")
	}
	files = append(files, more...)
	var sa *unstructured.Unstructured
	for _, f := range files {
		applied, err := env.Apply(ctx, f, "default")
		require.NoError(t, err, "applying %s", f)
		for _, o := range applied {
			if o.GetKind() == "ServiceAccount" {
				sa = o
			}
		}
	}
	require.NotNil(t, sa, "manifests/base/serviceaccount.yaml defines no ServiceAccount")
	cfg, err := env.ServiceAccountConfig(ctx, sa.GetNamespace(), sa.GetName())
	require.NoError(t, err, "a client config authenticated as %s/%s", sa.GetNamespace(), sa.GetName())
	return cfg, sa.GetNamespace()
}

// TestControllerRBAC checks, as the controller's ServiceAccount and with
// the roles from manifests/, everything the controller needs, and nothing
// it does not use: it watches Secrets (its cache selects the labelled ones)
// but can neither read one by name nor change any.
func TestControllerRBAC(t *testing.T) {
	env := framework.Env(t)
	saConfig, saNamespace := controllerIdentity(t, env)
	ns := env.Namespace(t)
	ctx := testContext(t)

	saKube, err := kubernetes.NewForConfig(saConfig)
	require.NoError(t, err, "creating the ServiceAccount's clientset")
	who, err := saKube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	require.NoError(t, err, "who am I")
	t.Logf("authenticated as %s %v", who.Status.UserInfo.Username, who.Status.UserInfo.Groups)

	type access struct {
		group, resource, subresource, verb string
		// clusterWide checks across all namespaces instead of the test's.
		clusterWide bool
		// namespace overrides the test namespace.
		namespace string
		name      string
	}
	must := []access{
		{group: "migration.platform.example", resource: "virtualmachinemigrations", verb: "list", clusterWide: true},
		{group: "migration.platform.example", resource: "virtualmachinemigrations", verb: "watch", clusterWide: true},
		{group: "migration.platform.example", resource: "virtualmachinemigrations", verb: "patch"},
		{group: "migration.platform.example", resource: "virtualmachinemigrations", verb: "get"},
		{group: "migration.platform.example", resource: "virtualmachinemigrations", verb: "delete"},
		{group: "migration.platform.example", resource: "virtualmachinemigrations", subresource: "status", verb: "update"},
		{group: "migration.platform.example", resource: "virtualmachinemigrations", subresource: "finalizers", verb: "update"},
		{resource: "secrets", verb: "list", clusterWide: true},
		{resource: "secrets", verb: "watch", clusterWide: true},
		{resource: "pods", verb: "watch", clusterWide: true},
		{resource: "serviceaccounts", verb: "watch", clusterWide: true},
		{resource: "serviceaccounts", verb: "patch"},
		{group: "rbac.authorization.k8s.io", resource: "roles", verb: "watch", clusterWide: true},
		{group: "rbac.authorization.k8s.io", resource: "rolebindings", verb: "watch", clusterWide: true},
		{group: "storage.k8s.io", resource: "storageclasses", verb: "watch", clusterWide: true},
		// The nodes, sizing the conversion slots (--max-conversions=auto).
		{resource: "nodes", verb: "list", clusterWide: true},
		{resource: "nodes", verb: "watch", clusterWide: true},
		{resource: "namespaces", verb: "get", clusterWide: true, name: "any"},
		{group: "batch", resource: "jobs", verb: "create"},
		{group: "batch", resource: "jobs", verb: "delete"},
		{group: "batch", resource: "jobs", verb: "list", clusterWide: true},
		{group: "batch", resource: "jobs", verb: "watch", clusterWide: true},
		{resource: "persistentvolumeclaims", verb: "create"},
		{resource: "persistentvolumeclaims", verb: "delete"},
		{resource: "persistentvolumeclaims", verb: "watch", clusterWide: true},
		{resource: "configmaps", verb: "create"},
		{resource: "configmaps", verb: "delete"},
		{resource: "configmaps", verb: "watch", clusterWide: true},
		{group: "cdi.kubevirt.io", resource: "datavolumes", verb: "create"},
		{group: "cdi.kubevirt.io", resource: "datavolumes", verb: "delete"},
		{group: "cdi.kubevirt.io", resource: "datavolumes", verb: "watch", clusterWide: true},
		{group: "kubevirt.io", resource: "virtualmachines", verb: "create"},
		{group: "kubevirt.io", resource: "virtualmachines", verb: "delete"},
		{group: "kubevirt.io", resource: "virtualmachines", verb: "watch", clusterWide: true},
		{group: "kubevirt.io", resource: "virtualmachineinstances", verb: "watch", clusterWide: true},
		{resource: "events", verb: "create"},
		{resource: "events", verb: "patch"},
		{group: "events.k8s.io", resource: "events", verb: "create"},
		// The FailedCreate events of its Jobs; the namespace's PodSecurity
		// label and KubeVirt's launcher configuration (preflight).
		{resource: "events", verb: "list"},
		{resource: "namespaces", verb: "get", clusterWide: true, name: "any"},
		{group: "kubevirt.io", resource: "kubevirts", verb: "list", clusterWide: true},
		// The Multus networks' definitions, in any namespace (preflight).
		{group: "k8s.cni.cncf.io", resource: "network-attachment-definitions", verb: "get", clusterWide: true, name: "any"},
		// CDI's StorageProfiles, cluster-scoped (preflight).
		{group: "cdi.kubevirt.io", resource: "storageprofiles", verb: "list", clusterWide: true},
		{group: "coordination.k8s.io", resource: "leases", verb: "update", namespace: saNamespace},
		// Its own Pod, for the image the transfer Jobs run.
		{resource: "pods", verb: "get", namespace: saNamespace},
	}
	mustNot := []access{
		{resource: "secrets", verb: "get", name: "vcenter-credentials"},
		{resource: "namespaces", verb: "list", clusterWide: true},
		{resource: "namespaces", verb: "delete", clusterWide: true, name: "any"},
		{resource: "secrets", verb: "create"},
		{resource: "secrets", verb: "update", name: "vcenter-credentials"},
		{resource: "secrets", verb: "delete", name: "vcenter-credentials"},
		{group: "migration.platform.example", resource: "virtualmachinemigrations", verb: "create"},
		{resource: "pods", verb: "create"},
		{resource: "pods", verb: "get"},
		{group: "migration.platform.example", resource: "virtualmachinemigrations", verb: "update"},
		{group: "migration.platform.example", resource: "virtualmachinemigrations", subresource: "status", verb: "patch"},
		{group: "cdi.kubevirt.io", resource: "datavolumes", verb: "update"},
		{group: "kubevirt.io", resource: "virtualmachines", verb: "update"},
		{resource: "pods", subresource: "exec", verb: "create"},
		// Events are listed for one Job at a time, never watched.
		{resource: "events", verb: "watch", clusterWide: true},
		// CDI asks for create on datavolumes/source (or pods) in the source
		// namespace only for a clone from another namespace; the
		// controller's clones stay in the migration's namespace, so it
		// holds neither (TestCloneAuthorization).
		{group: "cdi.kubevirt.io", resource: "datavolumes", subresource: "source", verb: "create"},
		{group: "cdi.kubevirt.io", resource: "datavolumes", subresource: "source", verb: "create", clusterWide: true},
		{group: "rbac.authorization.k8s.io", resource: "clusterroles", verb: "escalate"},
		{group: "coordination.k8s.io", resource: "leases", verb: "update", namespace: ns},
	}
	review := func(a access) (bool, string) {
		attrs := &authorizationv1.ResourceAttributes{
			Group: a.group, Resource: a.resource, Subresource: a.subresource, Verb: a.verb, Name: a.name, Namespace: ns,
		}
		if a.clusterWide {
			attrs.Namespace = ""
		}
		if a.namespace != "" {
			attrs.Namespace = a.namespace
		}
		r, err := saKube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: attrs},
		}, metav1.CreateOptions{})
		require.NoError(t, err, "access review")
		return r.Status.Allowed, r.Status.Reason
	}
	describe := func(a access) string {
		r := a.resource
		if a.group != "" {
			r += "." + a.group
		}
		if a.subresource != "" {
			r += "/" + a.subresource
		}
		where := "namespace " + ns
		if a.clusterWide {
			where = "all namespaces"
		}
		if a.namespace != "" {
			where = "namespace " + a.namespace
		}
		if a.name != "" {
			r += " " + a.name
		}
		return fmt.Sprintf("%s %s in %s", a.verb, r, where)
	}
	for _, a := range must {
		ok, reason := review(a)
		assert.True(t, ok, "the controller cannot %s (%s)", describe(a), reason)
	}
	for _, a := range mustNot {
		ok, reason := review(a)
		assert.False(t, ok, "the controller can %s, and must not (%s)", describe(a), reason)
	}

	t.Run("real requests", func(t *testing.T) {
		realRequests(t, env, saConfig, ns)
	})
}

// realRequests makes the controller's requests, as its ServiceAccount,
// against real objects.
func realRequests(t *testing.T, env *framework.Environment, saConfig *rest.Config, ns string) {
	ctx := testContext(t)
	admin := env.Kubernetes(t)
	sa, err := kubernetes.NewForConfig(saConfig)
	require.NoError(t, err, "creating the ServiceAccount's clientset")
	saDynamic, err := dynamic.NewForConfig(saConfig)
	require.NoError(t, err, "creating the ServiceAccount's dynamic client")

	// Secrets: listed and watched (the informer selects the labelled
	// ones), never read by name or changed.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "vcenter-credentials", Namespace: ns}, StringData: map[string]string{"username": "u", "password": "p"}}
	_, err = admin.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{})
	require.NoError(t, err, "creating the Secret")
	_, err = sa.CoreV1().Secrets("").List(ctx, metav1.ListOptions{LabelSelector: "migration.platform.example/vsphere-credentials=true"})
	assert.NoError(t, err, "list labelled Secrets in all namespaces")
	_, err = sa.CoreV1().Secrets(ns).Get(ctx, "vcenter-credentials", metav1.GetOptions{})
	assert.True(t, apierrors.IsForbidden(err), "get Secret by name: got %v, want Forbidden", err)

	// Migrations: list and watch everywhere, update, finalizers, status.
	createAndGet(t, env, ns, newMigration("rbac"))
	saMigrations := saDynamic.Resource(migrationGVR)
	_, err = saMigrations.List(ctx, metav1.ListOptions{})
	assert.NoError(t, err, "list migrations in all namespaces")
	w, err := saMigrations.Watch(ctx, metav1.ListOptions{})
	if assert.NoError(t, err, "watch migrations in all namespaces") {
		w.Stop()
	}
	list, err := saMigrations.Namespace(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err, "list migrations")
	require.Len(t, list.Items, 1, "migrations listed in %s", ns)
	m := &list.Items[0]
	m, err = saMigrations.Namespace(ns).Patch(ctx, "rbac", types.MergePatchType,
		[]byte(`{"metadata":{"finalizers":["migration.platform.example/cleanup"]}}`), metav1.PatchOptions{})
	require.NoError(t, err, "add a finalizer")
	require.NoError(t, unstructured.SetNestedField(m.Object, "Pending", "status", "phase"))
	m, err = saMigrations.Namespace(ns).UpdateStatus(ctx, m, metav1.UpdateOptions{})
	assert.NoError(t, err, "update status")
	_, err = saMigrations.Namespace(ns).Patch(ctx, "rbac", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	assert.NoError(t, err, "remove the finalizer")
	_, err = saMigrations.Namespace(ns).Get(ctx, "rbac", metav1.GetOptions{})
	assert.NoError(t, err, "get a migration (read whole before writing to a finished one)")
	// Deleting a migration whose time to live ended: allowed, and made with
	// a UID precondition, which this one fails without deleting anything.
	wrong := types.UID("not-the-migration")
	err = saMigrations.Namespace(ns).Delete(ctx, "rbac", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &wrong}})
	assert.True(t, apierrors.IsConflict(err), "delete a migration with a wrong UID precondition: got %v, want Conflict (allowed, precondition failed)", err)

	// Children: create and delete each kind the controller owns.
	owner := metav1.OwnerReference{APIVersion: "migration.platform.example/v1alpha1", Kind: "VirtualMachineMigration", Name: "rbac", UID: m.GetUID(), Controller: ptr(true), BlockOwnerDeletion: ptr(true)}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ns, OwnerReferences: []metav1.OwnerReference{owner}}
	}
	children := []struct {
		kind   string
		create func() error
		delete func() error
	}{
		{"ConfigMap", func() error {
			_, err := sa.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: meta("rbac-domain"), Data: map[string]string{"domain.xml": "<domain/>"}}, metav1.CreateOptions{})
			return err
		}, func() error { return sa.CoreV1().ConfigMaps(ns).Delete(ctx, "rbac-domain", metav1.DeleteOptions{}) }},
		{"PersistentVolumeClaim", func() error {
			pvc := &corev1.PersistentVolumeClaim{ObjectMeta: meta("rbac-staging-2000"), Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("11Gi")}},
			}}
			_, err := sa.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{})
			return err
		}, func() error {
			return sa.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "rbac-staging-2000", metav1.DeleteOptions{})
		}},
		{"Job", func() error {
			job := &batchv1.Job{ObjectMeta: meta("rbac-transfer-1"), Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "transfer", Image: "registry.example.com/vm-migration:test"}},
			}}}}
			_, err := sa.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
			return err
		}, func() error {
			// As the pipeline step deletes a Job: its pods first.
			fg := metav1.DeletePropagationForeground
			return sa.BatchV1().Jobs(ns).Delete(ctx, "rbac-transfer-1", metav1.DeleteOptions{PropagationPolicy: &fg})
		}},
		{"DataVolume", func() error {
			return createUnstructured(ctx, saDynamic, ns, schema.GroupVersionResource{Group: "cdi.kubevirt.io", Version: "v1beta1", Resource: "datavolumes"},
				map[string]any{"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume", "metadata": map[string]any{"name": "rbac-disk-0"},
					"spec": map[string]any{"source": map[string]any{"pvc": map[string]any{"namespace": ns, "name": "rbac-staging-2000"}}, "storage": map[string]any{}}})
		}, func() error {
			return saDynamic.Resource(schema.GroupVersionResource{Group: "cdi.kubevirt.io", Version: "v1beta1", Resource: "datavolumes"}).Namespace(ns).Delete(ctx, "rbac-disk-0", metav1.DeleteOptions{})
		}},
		{"VirtualMachine", func() error {
			return createUnstructured(ctx, saDynamic, ns, schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachines"},
				map[string]any{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": map[string]any{"name": "rbac-vm"},
					"spec": map[string]any{"runStrategy": "Halted", "template": map[string]any{"spec": map[string]any{"domain": map[string]any{"devices": map[string]any{}}}}}})
		}, func() error {
			return saDynamic.Resource(schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachines"}).Namespace(ns).Delete(ctx, "rbac-vm", metav1.DeleteOptions{})
		}},
		{"Event", func() error {
			ev := &corev1.Event{
				ObjectMeta:     metav1.ObjectMeta{Name: "rbac.event", Namespace: ns},
				InvolvedObject: corev1.ObjectReference{APIVersion: owner.APIVersion, Kind: owner.Kind, Name: "rbac", Namespace: ns, UID: owner.UID},
				Reason:         "CredentialsMissing", Message: "test", Type: corev1.EventTypeWarning, Source: corev1.EventSource{Component: "vm-migration-controller"},
			}
			_, err := sa.CoreV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{})
			return err
		}, nil},
	}
	for _, c := range children {
		if !assert.NoError(t, c.create(), "create %s", c.kind) {
			continue
		}
		if c.delete != nil {
			assert.NoError(t, c.delete(), "delete %s", c.kind)
		}
	}
}

// globRepo matches pattern under the repository root.
func globRepo(pattern string) ([]string, error) {
	files, err := filepath.Glob(framework.RepoPath(pattern))
	if err != nil {
		return nil, fmt.Errorf("matching %s: %w", pattern, err)
	}
	return files, nil
}

func createUnstructured(ctx context.Context, dc dynamic.Interface, ns string, gvr schema.GroupVersionResource, obj map[string]any) error {
	_, err := dc.Resource(gvr).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	return err
}
