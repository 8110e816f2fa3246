package manager

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"platform.example/vm-migration/pkg/controller"
)

// everything a namespaced controller caches, as one rule.
var cachedRule = authorizationv1.ResourceRule{
	Verbs:     []string{"get", "list", "watch"},
	APIGroups: []string{"", "migration.platform.example", "batch", "rbac.authorization.k8s.io", "cdi.kubevirt.io", "kubevirt.io"},
	Resources: []string{"virtualmachinemigrations", "secrets", "pods", "persistentvolumeclaims", "configmaps", "serviceaccounts",
		"jobs", "roles", "rolebindings", "datavolumes", "virtualmachines", "virtualmachineinstances"},
}

// reviewer answers the controller's access reviews: rules per namespace,
// whether they are complete, and whether storage classes may be read.
type reviewer struct {
	rules        map[string][]authorizationv1.ResourceRule
	incomplete   bool
	storageRead  bool
	rulesReviews []string
}

func (r *reviewer) client() *k8sfake.Clientset {
	kube := k8sfake.NewSimpleClientset()
	kube.PrependReactor("create", "selfsubjectrulesreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		review := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectRulesReview)
		r.rulesReviews = append(r.rulesReviews, review.Spec.Namespace)
		review.Status = authorizationv1.SubjectRulesReviewStatus{ResourceRules: r.rules[review.Spec.Namespace], Incomplete: r.incomplete}
		return true, review, nil
	})
	kube.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		review := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
		review.Status.Allowed = r.storageRead && review.Spec.ResourceAttributes.Resource == "storageclasses"
		return true, review, nil
	})
	return kube
}

func TestCheckAccess(t *testing.T) {
	noSecrets := cachedRule
	noSecrets.Resources = []string{"virtualmachinemigrations", "pods", "persistentvolumeclaims", "configmaps", "serviceaccounts",
		"jobs", "roles", "rolebindings", "datavolumes", "virtualmachines", "virtualmachineinstances"}
	someSecrets := authorizationv1.ResourceRule{Verbs: []string{"list", "watch"}, APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"x"}}
	wildcard := authorizationv1.ResourceRule{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}
	tests := []struct {
		name        string
		namespaces  []string
		r           reviewer
		wantErr     string
		wantReviews []string
	}{
		{name: "cluster-wide is not checked", namespaces: []string{""}, r: reviewer{}},
		{name: "both namespaces granted", namespaces: []string{"a", "b"}, wantReviews: []string{"a", "b"},
			r: reviewer{storageRead: true, rules: map[string][]authorizationv1.ResourceRule{"a": {cachedRule}, "b": {cachedRule}}}},
		{name: "wildcards grant", namespaces: []string{"a"}, wantReviews: []string{"a"},
			r: reviewer{storageRead: true, rules: map[string][]authorizationv1.ResourceRule{"a": {wildcard}}}},
		{name: "a namespace without the Role", namespaces: []string{"a", "c"}, wantReviews: []string{"a", "c"},
			r:       reviewer{storageRead: true, rules: map[string][]authorizationv1.ResourceRule{"a": {cachedRule}}},
			wantErr: "may not list and watch virtualmachinemigrations.migration.platform.example, secrets,"},
		{name: "secrets missing", namespaces: []string{"a"}, wantReviews: []string{"a"},
			r:       reviewer{storageRead: true, rules: map[string][]authorizationv1.ResourceRule{"a": {noSecrets}}},
			wantErr: "may not list and watch secrets in namespace a:"},
		{name: "secrets by name only", namespaces: []string{"a"}, wantReviews: []string{"a"},
			r:       reviewer{storageRead: true, rules: map[string][]authorizationv1.ResourceRule{"a": {noSecrets, someSecrets}}},
			wantErr: "may not list and watch secrets in namespace a:"},
		{name: "rules the server cannot enumerate", namespaces: []string{"a"}, wantReviews: []string{"a"},
			r: reviewer{storageRead: true, incomplete: true}},
		{name: "storage classes not readable", namespaces: []string{"a"}, wantReviews: []string{"a"},
			r:       reviewer{rules: map[string][]authorizationv1.ResourceRule{"a": {cachedRule}}},
			wantErr: "may not list storageclasses.storage.k8s.io"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckAccess(context.Background(), tc.r.client(), tc.namespaces)
			if tc.wantErr == "" {
				require.NoError(t, err)
			} else {
				require.ErrorContains(t, err, tc.wantErr)
			}
			assert.Equal(t, tc.wantReviews, tc.r.rulesReviews)
		})
	}
}

// TestCheckAccessToNodes: a controller that sizes its conversion slots
// from the nodes fails at start when it may not list and watch them,
// saying how to do without.
func TestCheckAccessToNodes(t *testing.T) {
	granted := map[string][]authorizationv1.ResourceRule{"a": {cachedRule}}
	r := reviewer{storageRead: true, rules: granted}
	err := CheckAccess(context.Background(), r.client(), []string{"a"}, nodes)
	require.ErrorContains(t, err, "the controller may not list nodes: bind it to a ClusterRole that may (manifests/overlays/namespaced/cluster-read.yaml), or set --max-conversions to a number")
	require.NoError(t, CheckAccess(context.Background(), r.client(), []string{"a"}), "nodes not asked for")
	assert.Nil(t, Options{Conversions: controller.ConversionLimit{Max: 4}}.conversions().readsNodes(), "a set budget reads no nodes")
	auto := Options{Conversions: controller.ConversionLimit{Auto: true}}.conversions()
	assert.Equal(t, []schema.GroupResource{nodes}, auto.readsNodes())
	assert.Equal(t, "1", auto.PodRequests.Cpu().String(), "the default conversion pod's CPU request")
	assert.Equal(t, "3Gi", auto.PodRequests.Memory().String(), "the default conversion pod's memory request")
}
