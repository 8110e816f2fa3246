//go:build integration

package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	cdiclient "platform.example/vm-migration/pkg/generated/cdi/clientset/versioned"
	"platform.example/vm-migration/pkg/steps/pipeline"
	"platform.example/vm-migration/test/framework"
	"platform.example/vm-migration/test/standins"
)

// TestCloneAuthorization plays CDI v1.66's clone authorization against the
// real API server, as the controller's ServiceAccount under the shipped
// RBAC. CDI's mutating webhook asks, by SubjectAccessReview for the
// request's user, whether the DataVolume's creator may create
// datavolumes/source (or pods) in the source namespace, but only when the
// source is in another namespace: a clone within one namespace, which is
// all the controller ever makes (its staging claims live beside its
// DataVolumes), is admitted without any such permission. So the shipped
// RBAC grants none, and this test shows both sides: the controller's own
// DataVolumes go through; a clone from another namespace is refused as CDI
// refuses it (admission error, no DataVolume, no claim) until the
// permission is granted in the source namespace.
func TestCloneAuthorization(t *testing.T) {
	env := framework.Env(t)
	saConfig, saNamespace := controllerIdentity(t, env)
	src, dst := env.Namespace(t), env.Namespace(t)
	ctx := testContext(t)
	startAdmission(t, env, src)
	startAdmission(t, env, dst)
	sa := kubernetes.NewForConfigOrDie(saConfig)
	saCDI := cdiclient.NewForConfigOrDie(saConfig)
	user := fmt.Sprintf("system:serviceaccount:%s:migration-controller", saNamespace)

	require.False(t, canCreateCloneSource(ctx, t, sa, src),
		"the shipped RBAC lets the controller create datavolumes/source in %s: it needs no such permission", src)

	m := renderedMigration(src)
	dvs, err := pipeline.RenderDataVolumes(m, nil)
	require.NoError(t, err, "rendering the DataVolumes")
	got, err := saCDI.CdiV1beta1().DataVolumes(src).Create(ctx, dvs[0], metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
	require.NoError(t, err, "the controller's own clone (same namespace) is refused")
	assert.NotEmpty(t, got.Annotations[standins.AnnotationCloneToken], "the admitted clone has no clone token")
	t.Logf("same-namespace clone admitted as %s without datavolumes/source", user)

	cross := dvs[1].DeepCopy()
	cross.Namespace = dst
	crossAPI := saCDI.CdiV1beta1().DataVolumes(dst)
	_, err = crossAPI.Create(ctx, cross, metav1.CreateOptions{})
	want := fmt.Sprintf(`admission webhook "datavolume-mutate.cdi.kubevirt.io" denied the request:  User %s has insufficient permissions in clone source namespace %s`, user, src)
	require.ErrorContains(t, err, want, "cross-namespace clone without permission")
	// CDI's refusal: 422 with one cause, on spec.source.PVC.namespace.
	const notCDIs = "the refusal is not CDI's (422, one cause on spec.source.PVC.namespace): %#v"
	if assert.Implements(t, (*apierrors.APIStatus)(nil), err, notCDIs, err) {
		s := err.(apierrors.APIStatus).Status()
		assert.Equal(t, int32(422), s.Code, notCDIs, err)
		if assert.NotNil(t, s.Details, notCDIs, err) && assert.Len(t, s.Details.Causes, 1, notCDIs, err) {
			assert.Equal(t, "spec.source.PVC.namespace", s.Details.Causes[0].Field, notCDIs, err)
		}
	}
	_, err = crossAPI.Get(ctx, cross.Name, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "a refused DataVolume exists: %v", err)
	_, err = env.Kubernetes(t).CoreV1().PersistentVolumeClaims(dst).Get(ctx, cross.Name, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "a refused clone has a target claim: %v", err)

	grantCloneSource(ctx, t, env, src, saNamespace)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, err := crossAPI.Create(ctx, cross, metav1.CreateOptions{})
		assert.NoError(c, err, "creating the cross-namespace clone")
	}, 20*time.Second, 200*time.Millisecond, "cross-namespace clone still refused 20s after datavolumes/source was granted in %s", src)
}

// canCreateCloneSource asks, as the ServiceAccount, whether it may create
// datavolumes/source in ns.
func canCreateCloneSource(ctx context.Context, t *testing.T, sa kubernetes.Interface, ns string) bool {
	t.Helper()
	r, err := sa.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Verb: "create", Group: cdiv1.SchemeGroupVersion.Group, Resource: "datavolumes", Subresource: "source",
		}},
	}, metav1.CreateOptions{})
	require.NoError(t, err, "reviewing create datavolumes/source in %s", ns)
	return r.Status.Allowed
}

// grantCloneSource lets the controller's ServiceAccount clone from ns, as
// CDI documents: create on datavolumes/source there.
func grantCloneSource(ctx context.Context, t *testing.T, env *framework.Environment, ns, saNamespace string) {
	t.Helper()
	kube := env.Kubernetes(t)
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "clone-source", Namespace: ns},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{cdiv1.SchemeGroupVersion.Group}, Resources: []string{"datavolumes/source"}, Verbs: []string{"create"}}},
	}
	_, err := kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{})
	require.NoError(t, err, "creating the Role %s/%s", ns, role.Name)
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "clone-source", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "migration-controller", Namespace: saNamespace}},
	}
	_, err = kube.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{})
	require.NoError(t, err, "creating the RoleBinding %s/%s", ns, binding.Name)
}
