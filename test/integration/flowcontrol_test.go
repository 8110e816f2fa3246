//go:build integration

package integration

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"platform.example/vm-migration/test/framework"
)

// classification is what the API server's API Priority and Fairness says
// it classified a request into, read from the response's headers.
type classification struct {
	status                    int
	flowSchema, priorityLevel types.UID
}

// classify sends GET path with cfg's credentials and returns the
// FlowSchema and priority level the API server put the request in.
func classify(ctx context.Context, cfg *rest.Config, path string) (classification, error) {
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return classification{}, fmt.Errorf("building an HTTP client: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+path, nil)
	if err != nil {
		return classification{}, fmt.Errorf("building GET %s: %w", path, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return classification{}, fmt.Errorf("GET %s: %w", path, err)
	}
	_ = resp.Body.Close()
	return classification{
		status:        resp.StatusCode,
		flowSchema:    types.UID(resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID)),
		priorityLevel: types.UID(resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedPriorityLevelConfigurationUID)),
	}, nil
}

// classificationNames names the FlowSchema and priority level of c, for a
// failure's message.
func classificationNames(t *testing.T, kube kubernetes.Interface, c classification) string {
	t.Helper()
	name := func(uid types.UID, names map[types.UID]string) string {
		if n, ok := names[uid]; ok {
			return n
		}
		return fmt.Sprintf("%q (no such object)", uid)
	}
	schemas, levels := map[types.UID]string{}, map[types.UID]string{}
	if l, err := kube.FlowcontrolV1().FlowSchemas().List(testContext(t), metav1.ListOptions{}); err == nil {
		for _, o := range l.Items {
			schemas[o.UID] = o.Name
		}
	}
	if l, err := kube.FlowcontrolV1().PriorityLevelConfigurations().List(testContext(t), metav1.ListOptions{}); err == nil {
		for _, o := range l.Items {
			levels[o.UID] = o.Name
		}
	}
	return fmt.Sprintf("FlowSchema %s, priority level %s", name(c.flowSchema, schemas), name(c.priorityLevel, levels))
}

// TestControllerHasItsOwnPriorityLevel applies the FlowSchema and
// PriorityLevelConfiguration of manifests/flowcontrol.yaml, as the
// cluster-wide install renders them, and checks that the API server puts
// the controller's ServiceAccount's requests (a resource and a
// non-resource one) in them, and another ServiceAccount's in the built-in
// service-accounts FlowSchema (workload-low), not in ours. They stay
// applied: the cluster-wide install's test applies them too.
func TestControllerHasItsOwnPriorityLevel(t *testing.T) {
	env := framework.Env(t)
	saConfig, _ := controllerIdentity(t, env)
	ctx := testContext(t)

	var objs []*unstructured.Unstructured
	for _, o := range kustomize(t, framework.RepoPath("manifests")) {
		if o.GetAPIVersion() == flowcontrolv1.SchemeGroupVersion.String() {
			objs = append(objs, o)
		}
	}
	applied, err := env.ApplyObjects(ctx, objs, "")
	require.NoError(t, err, "applying the flowcontrol objects of manifests/")
	var ours classification
	var flowSchemaName string
	for _, o := range applied {
		switch o.GetKind() {
		case "FlowSchema":
			require.Empty(t, ours.flowSchema, "manifests/ renders more than one FlowSchema")
			ours.flowSchema, flowSchemaName = o.GetUID(), o.GetName()
		case "PriorityLevelConfiguration":
			require.Empty(t, ours.priorityLevel, "manifests/ renders more than one PriorityLevelConfiguration")
			ours.priorityLevel = o.GetUID()
		}
	}
	require.NotEmpty(t, ours.flowSchema, "manifests/ renders no FlowSchema (manifests/flowcontrol.yaml, listed in manifests/kustomization.yaml)")
	require.NotEmpty(t, ours.priorityLevel, "manifests/ renders no PriorityLevelConfiguration")
	ours.status = http.StatusOK

	// The API server's configuration controller takes the new objects in
	// a moment after they are stored.
	paths := []string{"/apis/migration.platform.example/v1alpha1/virtualmachinemigrations?limit=1", "/version"}
	got := map[string]classification{}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		done := true
		for _, p := range paths {
			c, err := classify(ctx, saConfig, p)
			if err != nil {
				return false, err
			}
			got[p] = c
			done = done && c == ours
		}
		return done, nil
	})
	kube := env.Kubernetes(t)
	for _, p := range paths {
		assert.Equal(t, ours, got[p], "GET %s as the controller's ServiceAccount: the status and the UIDs of the FlowSchema and priority level it was classified in (want ours); it went to %s", p, classificationNames(t, kube, got[p]))
	}
	require.NoError(t, err, "the controller's requests were not put in its own priority level within 30s")

	builtin, err := kube.FlowcontrolV1().FlowSchemas().Get(ctx, "service-accounts", metav1.GetOptions{})
	require.NoError(t, err, "the built-in FlowSchema service-accounts")
	ns := env.Namespace(t)
	other := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "migration-controller", Namespace: ns}}
	_, err = kube.CoreV1().ServiceAccounts(ns).Create(ctx, other, metav1.CreateOptions{})
	require.NoError(t, err, "creating a namesake ServiceAccount in another namespace")
	otherConfig, err := env.ServiceAccountConfig(ctx, ns, other.Name)
	require.NoError(t, err)
	c, err := classify(ctx, otherConfig, "/version")
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, c.status)
	assert.NotEqual(t, ours.flowSchema, c.flowSchema, "%s/%s was classified in the controller's FlowSchema", ns, other.Name)
	assert.NotEqual(t, ours.priorityLevel, c.priorityLevel, "%s/%s was classified in the controller's priority level", ns, other.Name)
	assert.Equal(t, builtin.UID, c.flowSchema, "%s/%s is not in the built-in service-accounts FlowSchema but in %s", ns, other.Name, classificationNames(t, kube, c))

	fs, err := kube.FlowcontrolV1().FlowSchemas().Get(ctx, flowSchemaName, metav1.GetOptions{})
	require.NoError(t, err)
	for _, cond := range fs.Status.Conditions {
		if cond.Type == flowcontrolv1.FlowSchemaConditionDangling {
			assert.Equal(t, flowcontrolv1.ConditionFalse, cond.Status, "the FlowSchema names a priority level that does not exist: %s", cond.Message)
		}
	}
}
