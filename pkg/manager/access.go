package manager

import (
	"context"
	"fmt"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// cachedResources are what the controller's informers list and watch in
// each watched namespace (controller.Watch): the migrations, the
// credentials Secrets, the children and the name caches.
var cachedResources = []schema.GroupResource{
	v1alpha1.Resource("virtualmachinemigrations"),
	{Resource: "secrets"},
	{Resource: "pods"},
	{Resource: "persistentvolumeclaims"},
	{Resource: "configmaps"},
	{Resource: "serviceaccounts"},
	{Group: "batch", Resource: "jobs"},
	{Group: "rbac.authorization.k8s.io", Resource: "roles"},
	{Group: "rbac.authorization.k8s.io", Resource: "rolebindings"},
	{Group: "cdi.kubevirt.io", Resource: "datavolumes"},
	{Group: "kubevirt.io", Resource: "virtualmachines"},
	{Group: "kubevirt.io", Resource: "virtualmachineinstances"},
}

// storageClasses is the cluster-scoped resource the controller always
// caches; nodes, the one it caches to size its conversion slots from them
// (--max-conversions=auto).
var (
	storageClasses = schema.GroupResource{Group: "storage.k8s.io", Resource: "storageclasses"}
	nodes          = schema.GroupResource{Resource: "nodes"}
)

// CheckAccess fails, with one line that names what is missing and where,
// when a controller of listed namespaces may not list and watch what it
// caches in one of them, or the storage classes, or the cluster-scoped
// resources named in clusterScoped: the namespaces of
// --namespaces and those given the Roles of manifests/overlays/namespaced
// must agree, and without this check a missing Role only shows as caches
// that never sync. A cluster-wide controller (namespaces [""]) is not
// checked. Rules the API server cannot enumerate (a review it reports
// incomplete, or one it refuses) are not held against the controller.
func CheckAccess(ctx context.Context, kube kubernetes.Interface, namespaces []string, clusterScoped ...schema.GroupResource) error {
	if len(namespaces) == 0 || slices.Contains(namespaces, metav1.NamespaceAll) {
		return nil
	}
	logger := klog.FromContext(ctx)
	for _, ns := range namespaces {
		review, err := kube.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx,
			&authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: ns}}, metav1.CreateOptions{})
		if err != nil || review.Status.Incomplete {
			logger.Info("could not review the controller's access; going on", "namespace", ns, "err", err)
			continue
		}
		if missing := notListedAndWatched(review.Status.ResourceRules, cachedResources); len(missing) > 0 {
			return fmt.Errorf("the controller may not list and watch %s in namespace %s: give it the Roles of manifests/overlays/namespaced there, or drop the namespace from --namespaces",
				strings.Join(missing, ", "), ns)
		}
	}
	for _, r := range append([]schema.GroupResource{storageClasses}, clusterScoped...) {
		for _, verb := range []string{"list", "watch"} {
			review, err := kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
				Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
					Verb: verb, Group: r.Group, Resource: r.Resource,
				}},
			}, metav1.CreateOptions{})
			if err != nil {
				logger.Info("could not review the controller's access to a cluster-scoped resource; going on", "resource", r.String(), "err", err)
				return nil
			}
			if !review.Status.Allowed {
				return fmt.Errorf("the controller may not %s %s: bind it to a ClusterRole that may (manifests/overlays/namespaced/cluster-read.yaml)%s", verb, r, accessHint(r))
			}
		}
	}
	return nil
}

// accessHint says what else a missing grant of r allows.
func accessHint(r schema.GroupResource) string {
	if r == nodes {
		return ", or set --max-conversions to a number: it reads the nodes only to size the conversion slots"
	}
	return ""
}

// notListedAndWatched returns the resources the rules do not let list and
// watch, in order.
func notListedAndWatched(rules []authorizationv1.ResourceRule, resources []schema.GroupResource) []string {
	var missing []string
	for _, r := range resources {
		if !grants(rules, "list", r) || !grants(rules, "watch", r) {
			missing = append(missing, r.String())
		}
	}
	return missing
}

// grants reports whether a rule lets verb on every object of r; a rule
// limited to some names does not.
func grants(rules []authorizationv1.ResourceRule, verb string, r schema.GroupResource) bool {
	matches := func(values []string, want string) bool {
		return slices.Contains(values, want) || slices.Contains(values, "*")
	}
	for _, rule := range rules {
		if len(rule.ResourceNames) == 0 && matches(rule.Verbs, verb) &&
			matches(rule.APIGroups, r.Group) && matches(rule.Resources, r.Resource) {
			return true
		}
	}
	return false
}
