package apply

import (
	"context"
	"encoding/base64"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"

	"platform.example/vm-migration/test/framework"
)

var (
	crdGVR        = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	apiServiceGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
)

// Applier applies objects to one cluster under one field manager.
type Applier struct {
	// Kube is a clientset of the cluster.
	Kube kubernetes.Interface
	// Dynamic is a dynamic client of the cluster.
	Dynamic   dynamic.Interface
	manager   string
	namespace string
	mapper    *restmapper.DeferredDiscoveryRESTMapper
	logf      func(format string, args ...any)
}

// New returns an Applier of the cluster cfg reaches: objects are applied
// under fieldManager, namespaced objects without a namespace go to
// namespace, and logf (when not nil) is told what was applied.
func New(cfg *rest.Config, fieldManager, namespace string, logf func(format string, args ...any)) (*Applier, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating a clientset: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating a dynamic client: %w", err)
	}
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating a discovery client: %w", err)
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return &Applier{Kube: kube, Dynamic: dyn, manager: fieldManager, namespace: namespace, logf: logf,
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))}, nil
}

// Apply server-side applies obj (typed or unstructured), forcing
// ownership of its fields, and returns the object as stored.
func (a *Applier) Apply(ctx context.Context, obj runtime.Object) (*unstructured.Unstructured, error) {
	u, ri, err := a.target(obj)
	if err != nil {
		return nil, err
	}
	out, err := ri.Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: a.manager, Force: true})
	if err != nil {
		return nil, fmt.Errorf("applying %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return out, nil
}

// target is obj as unstructured (ToUnstructured) and the dynamic client
// of its resource (and namespace, setting the default one where it has
// none).
func (a *Applier) target(obj runtime.Object) (*unstructured.Unstructured, dynamic.ResourceInterface, error) {
	u, err := ToUnstructured(obj)
	if err != nil {
		return nil, nil, err
	}
	gvk := u.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		a.mapper.Reset()
		m, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("mapping %s: %w", gvk, err)
	}
	if m.Scope.Name() != meta.RESTScopeNameNamespace {
		return u, a.Dynamic.Resource(m.Resource), nil
	}
	if u.GetNamespace() == "" {
		u.SetNamespace(a.namespace)
	}
	return u, a.Dynamic.Resource(m.Resource).Namespace(u.GetNamespace()), nil
}

// ToUnstructured turns a typed object into an unstructured one with its
// apiVersion and kind (from the client-go scheme) set, without its
// creation time and status.
func ToUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u, nil
	}
	gvks, _, err := scheme.Scheme.ObjectKinds(obj)
	if err != nil || len(gvks) == 0 {
		return nil, fmt.Errorf("finding the kind of %T: %w", obj, err)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("converting %T: %w", obj, err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvks[0])
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "status")
	return u, nil
}

// ApplyFile applies every object of a YAML file, each changed first by
// mutate when it is not nil, and returns how many it applied.
func (a *Applier) ApplyFile(ctx context.Context, path string, mutate func(*unstructured.Unstructured) error) (int, error) {
	objs, err := framework.ReadObjects(path)
	if err != nil {
		return 0, err
	}
	for _, o := range objs {
		if mutate != nil {
			if err := mutate(o); err != nil {
				return 0, err
			}
		}
		if _, err := a.Apply(ctx, o); err != nil {
			return 0, err
		}
	}
	return len(objs), nil
}

// ApplyDir applies the YAML files of dir in name order (each through
// mutate when it is not nil) and returns how many objects it applied.
func (a *Applier) ApplyDir(ctx context.Context, dir string, mutate func(*unstructured.Unstructured) error) (int, error) {
	files, err := yamlFiles(dir)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, f := range files {
		n, err := a.ApplyFile(ctx, f, mutate)
		if err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}

func yamlFiles(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no YAML files in %s: %v", dir, err)
	}
	sort.Strings(files)
	return files, nil
}

// ApplyCRDs applies every CustomResourceDefinition of the YAML files in
// dir, waits until each is Established, and returns their names.
func (a *Applier) ApplyCRDs(ctx context.Context, dir string) ([]string, error) {
	files, err := yamlFiles(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, f := range files {
		objs, err := framework.ReadObjects(f)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			if o.GetKind() != "CustomResourceDefinition" {
				continue
			}
			if _, err := a.Apply(ctx, o); err != nil {
				return nil, err
			}
			names = append(names, o.GetName())
		}
	}
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for _, n := range names {
			crd, err := a.Dynamic.Resource(crdGVR).Get(ctx, n, metav1.GetOptions{})
			if err != nil || !ConditionTrue(crd, "Established") {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for %d CRDs to be Established: %w", len(names), err)
	}
	a.mapper.Reset()
	a.logf("%d CRDs Established", len(names))
	return names, nil
}

// WaitDeployments waits until every named Deployment of namespace is
// Available at its current generation; on a timeout the error says what
// each pod of the namespace is doing.
func (a *Applier) WaitDeployments(ctx context.Context, namespace string, names ...string) error {
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for _, n := range names {
			d, err := a.Kube.AppsV1().Deployments(namespace).Get(ctx, n, metav1.GetOptions{})
			if err != nil || !deploymentAvailable(d) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for Deployments %s: %w; pods: %s", strings.Join(names, ", "), err, a.PodSummary(context.Background(), namespace))
	}
	return nil
}

func deploymentAvailable(d *appsv1.Deployment) bool {
	if d.Status.ObservedGeneration < d.Generation {
		return false
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// PodSummary says what each pod of namespace is doing, with the last log
// lines of its containers that are not ready, for errors.
func (a *Applier) PodSummary(ctx context.Context, namespace string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pods, err := a.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "(listing pods: " + err.Error() + ")"
	}
	if len(pods.Items) == 0 {
		return "none"
	}
	var parts []string
	for _, p := range pods.Items {
		parts = append(parts, a.podLine(ctx, &p))
	}
	return strings.Join(parts, "; ")
}

// podLine is one pod of PodSummary: its phase, each container's state
// (init containers first), the conditions not met, and the last log
// lines of each container not ready (of the crashed instance when one
// waits to restart); an init container that completed is not quoted.
func (a *Applier) podLine(ctx context.Context, p *corev1.Pod) string {
	s := p.Name + " " + string(p.Status.Phase)
	statuses := append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...)
	for _, c := range statuses {
		switch {
		case c.State.Waiting != nil:
			s += fmt.Sprintf(" [%s waiting: %s %s]", c.Name, c.State.Waiting.Reason, c.State.Waiting.Message)
		case c.State.Terminated != nil:
			s += fmt.Sprintf(" [%s terminated: %s exit %d]", c.Name, c.State.Terminated.Reason, c.State.Terminated.ExitCode)
		default:
			s += fmt.Sprintf(" [%s ready=%t restarts=%d]", c.Name, c.Ready, c.RestartCount)
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			s += fmt.Sprintf(" (%s: %s)", c.Type, c.Message)
		}
	}
	for _, c := range statuses {
		if c.Ready || (c.State.Terminated != nil && c.State.Terminated.ExitCode == 0) {
			continue
		}
		previous := c.State.Waiting != nil && c.RestartCount > 0
		logs, err := a.Kube.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name, TailLines: ptr.To(int64(15)), Previous: previous}).DoRaw(ctx)
		if err == nil && len(logs) > 0 {
			s += fmt.Sprintf("\n  last lines of %s:\n%s", c.Name, logs)
		}
	}
	return s
}

// SetCABundle sets the caBundle of an APIService or of every webhook of a
// webhook configuration to ca; any other kind is an error.
func SetCABundle(u *unstructured.Unstructured, ca []byte) error {
	enc := base64.StdEncoding.EncodeToString(ca)
	switch u.GetKind() {
	case "APIService":
		return unstructured.SetNestedField(u.Object, enc, "spec", "caBundle")
	case "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration":
		hooks, _, err := unstructured.NestedSlice(u.Object, "webhooks")
		if err != nil {
			return fmt.Errorf("reading the webhooks of %s: %w", u.GetName(), err)
		}
		for i := range hooks {
			h, ok := hooks[i].(map[string]any)
			if !ok {
				return fmt.Errorf("webhook %d of %s is not an object", i, u.GetName())
			}
			if err := unstructured.SetNestedField(h, enc, "clientConfig", "caBundle"); err != nil {
				return fmt.Errorf("setting the CA bundle of %s: %w", u.GetName(), err)
			}
		}
		return unstructured.SetNestedSlice(u.Object, hooks, "webhooks")
	}
	return fmt.Errorf("a CA bundle for an unexpected %s %s", u.GetKind(), u.GetName())
}

// WaitAPIService waits for the aggregator to reach the APIService's
// backend (Available).
func (a *Applier) WaitAPIService(ctx context.Context, name string) error {
	var last string
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		s, err := a.Dynamic.Resource(apiServiceGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = ConditionMessage(s, "Available")
		return ConditionTrue(s, "Available"), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for APIService %s: %w (Available: %s)", name, err, last)
	}
	return nil
}

func conditions(u *unstructured.Unstructured) []map[string]any {
	list, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var out []map[string]any
	for _, c := range list {
		if m, ok := c.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// ConditionTrue reports whether u's status has the condition typ True.
func ConditionTrue(u *unstructured.Unstructured, typ string) bool {
	for _, c := range conditions(u) {
		if c["type"] == typ {
			return c["status"] == "True"
		}
	}
	return false
}

// ConditionMessage says the status, reason and message of u's condition
// typ, or that it has none yet.
func ConditionMessage(u *unstructured.Unstructured, typ string) string {
	for _, c := range conditions(u) {
		if c["type"] == typ {
			return fmt.Sprintf("%v %v: %v", c["status"], c["reason"], c["message"])
		}
	}
	return "no condition yet"
}

// Replace creates obj, or updates the stored object to it, as a plain
// create or update: for objects server-side apply refuses, such as
// KubeVirt's virt-api Deployment, whose container lists port 8443 twice
// (once for the API, once for metrics), which the merge key of ports
// (containerPort, protocol) forbids; virt-operator creates and updates it
// the same way.
func (a *Applier) Replace(ctx context.Context, obj runtime.Object) (*unstructured.Unstructured, error) {
	u, ri, err := a.target(obj)
	if err != nil {
		return nil, err
	}
	cur, err := ri.Get(ctx, u.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		out, err := ri.Create(ctx, u, metav1.CreateOptions{FieldManager: a.manager})
		if err != nil {
			return nil, fmt.Errorf("creating %s %s: %w", u.GetKind(), u.GetName(), err)
		}
		return out, nil
	case err != nil:
		return nil, fmt.Errorf("reading %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	u.SetResourceVersion(cur.GetResourceVersion())
	out, err := ri.Update(ctx, u, metav1.UpdateOptions{FieldManager: a.manager})
	if err != nil {
		return nil, fmt.Errorf("updating %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return out, nil
}
