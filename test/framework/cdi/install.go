package cdi

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
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

// fieldManager owns what Install applies.
const fieldManager = "vm-migration-cdi-install"

// defaultTimeout bounds Install when Options.Timeout is zero.
const defaultTimeout = 5 * time.Minute

var (
	crdGVR        = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	cdiConfigGVR  = schema.GroupVersionResource{Group: "cdi.kubevirt.io", Version: "v1beta1", Resource: "cdiconfigs"}
	dataVolumeGVR = schema.GroupVersionResource{Group: "cdi.kubevirt.io", Version: "v1beta1", Resource: "datavolumes"}
	apiServiceGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
)

// Options says what Install installs and how it reports.
type Options struct {
	// Images are CDI's images, already on the node.
	Images Images
	// CRDDir holds CDI's CustomResourceDefinitions (hack/build-cdi.sh's
	// crds/).
	CRDDir string
	// ResourcesDir holds the YAML of CDI's operator generators
	// (hack/build-cdi-images.sh's resources/).
	ResourcesDir string
	// Timeout bounds the whole installation; zero means five minutes.
	Timeout time.Duration
	// Logf, when set, is told each step and how long it took.
	Logf func(format string, args ...any)
}

// installer holds the clients of one Install.
type installer struct {
	o      Options
	kube   kubernetes.Interface
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

// Install installs CDI into the cluster cfg reaches, as the package doc
// says, and returns once it serves: its Deployments Available, the
// CDIConfig status filled by the controller, the DataVolume webhooks
// answering and the upload APIService Available.
func Install(ctx context.Context, cfg *rest.Config, o Options) error {
	if o.Timeout == 0 {
		o.Timeout = defaultTimeout
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	in, err := newInstaller(cfg, o)
	if err != nil {
		return err
	}
	steps := []struct {
		what string
		do   func(context.Context) error
	}{
		{"namespace and CRDs", in.namespaceAndCRDs},
		{"RBAC of CDI's generators", in.rbac},
		{"certificates, CA bundles and the token key", in.certificates},
		{"CDI CR and CDIConfig", in.customResources},
		{"Services and Deployments", in.workloads},
		{"Deployments Available", in.waitDeployments},
		{"APIService and webhook configurations", in.registrations},
		{"CDIConfig read by the controller", in.waitConfig},
		{"DataVolume webhooks answering", in.waitWebhooks},
		{"upload APIService Available", in.waitAPIService},
	}
	start := time.Now()
	for _, s := range steps {
		t := time.Now()
		if err := s.do(ctx); err != nil {
			return fmt.Errorf("installing CDI: %s: %w", s.what, err)
		}
		o.Logf("cdi: %s in %s", s.what, time.Since(t).Round(time.Millisecond))
	}
	o.Logf("cdi: installed in %s", time.Since(start).Round(time.Millisecond))
	return nil
}

func newInstaller(cfg *rest.Config, o Options) (*installer, error) {
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
	return &installer{o: o, kube: kube, dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))}, nil
}

// apply server-side applies obj (typed or unstructured) under Install's
// field manager.
func (in *installer) apply(ctx context.Context, obj runtime.Object) (*unstructured.Unstructured, error) {
	u, err := toUnstructured(obj)
	if err != nil {
		return nil, err
	}
	gvk := u.GroupVersionKind()
	m, err := in.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		in.mapper.Reset()
		m, err = in.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return nil, fmt.Errorf("mapping %s: %w", gvk, err)
	}
	var ri dynamic.ResourceInterface = in.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if u.GetNamespace() == "" {
			u.SetNamespace(Namespace)
		}
		ri = in.dyn.Resource(m.Resource).Namespace(u.GetNamespace())
	}
	out, err := ri.Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
	if err != nil {
		return nil, fmt.Errorf("applying %s %s: %w", gvk.Kind, u.GetName(), err)
	}
	return out, nil
}

// toUnstructured turns a typed object into an unstructured one with its
// apiVersion and kind (from the client-go scheme) set.
func toUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
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

// applyFile applies every object of a YAML file of the build.
func (in *installer) applyFile(ctx context.Context, path string, mutate func(*unstructured.Unstructured) error) (int, error) {
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
		if _, err := in.apply(ctx, o); err != nil {
			return 0, err
		}
	}
	return len(objs), nil
}

func (in *installer) namespaceAndCRDs(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace, Labels: commonLabels()}}
	if _, err := in.apply(ctx, ns); err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(in.o.CRDDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no CRDs in %s (run hack/build-cdi.sh): %v", in.o.CRDDir, err)
	}
	sort.Strings(files)
	var names []string
	for _, f := range files {
		objs, err := framework.ReadObjects(f)
		if err != nil {
			return err
		}
		for _, o := range objs {
			if o.GetKind() != "CustomResourceDefinition" {
				continue
			}
			if _, err := in.apply(ctx, o); err != nil {
				return err
			}
			names = append(names, o.GetName())
		}
	}
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for _, n := range names {
			crd, err := in.dyn.Resource(crdGVR).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			if !conditionTrue(crd, "Established") {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %d CRDs to be Established: %w", len(names), err)
	}
	in.mapper.Reset()
	in.o.Logf("cdi: %d CRDs Established", len(names))
	return nil
}

func (in *installer) rbac(ctx context.Context) error {
	for _, f := range []string{"cluster-rbac.yaml", "namespaced-rbac.yaml"} {
		n, err := in.applyFile(ctx, filepath.Join(in.o.ResourcesDir, f), nil)
		if err != nil {
			return err
		}
		in.o.Logf("cdi: %s: %d objects", f, n)
	}
	return nil
}

// apiCA reads back the API server's CA bundle (certificates may come from
// an earlier Install into the same cluster).
func (in *installer) apiCA(ctx context.Context) ([]byte, error) {
	cm, err := in.kube.CoreV1().ConfigMaps(Namespace).Get(ctx, "cdi-apiserver-signer-bundle", metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading the API server's CA bundle: %w", err)
	}
	b := cm.Data["ca-bundle.crt"]
	if b == "" {
		return nil, errors.New("the API server's CA bundle is empty")
	}
	return []byte(b), nil
}

func (in *installer) certificates(ctx context.Context) error {
	p, err := newPKI(Namespace, time.Now())
	if err != nil {
		return err
	}
	for _, s := range p.secrets {
		if _, err := in.apply(ctx, s); err != nil {
			return err
		}
	}
	for _, cm := range p.configMaps {
		if _, err := in.apply(ctx, cm); err != nil {
			return err
		}
	}
	in.o.Logf("cdi: %d Secrets and %d CA bundles", len(p.secrets), len(p.configMaps))
	return nil
}

func (in *installer) customResources(ctx context.Context) error {
	cr, err := in.apply(ctx, cdiCR())
	if err != nil {
		return err
	}
	_, err = in.apply(ctx, cdiConfig(cr))
	return err
}

func (in *installer) workloads(ctx context.Context) error {
	for _, s := range services() {
		if _, err := in.apply(ctx, s); err != nil {
			return err
		}
	}
	for _, d := range []*appsv1.Deployment{controllerDeployment(in.o.Images), apiServerDeployment(in.o.Images), uploadProxyDeployment(in.o.Images)} {
		if _, err := in.apply(ctx, d); err != nil {
			return err
		}
	}
	return nil
}

func (in *installer) waitDeployments(ctx context.Context) error {
	names := []string{ControllerName, APIServerName, UploadProxyName}
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for _, n := range names {
			d, err := in.kube.AppsV1().Deployments(Namespace).Get(ctx, n, metav1.GetOptions{})
			if err != nil || !deploymentAvailable(d) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("%w; pods: %s", err, in.podSummary(context.Background()))
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

// podSummary says what each pod of the namespace is doing, for errors.
func (in *installer) podSummary(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pods, err := in.kube.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "(listing pods: " + err.Error() + ")"
	}
	if len(pods.Items) == 0 {
		return "none"
	}
	var parts []string
	for _, p := range pods.Items {
		s := p.Name + " " + string(p.Status.Phase)
		for _, c := range p.Status.ContainerStatuses {
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
		for _, c := range p.Status.ContainerStatuses {
			if c.Ready {
				continue
			}
			logs, err := in.kube.CoreV1().Pods(Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name, TailLines: ptr.To(int64(15))}).DoRaw(ctx)
			if err == nil && len(logs) > 0 {
				s += fmt.Sprintf("\n  last lines of %s:\n%s", c.Name, logs)
			}
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// registrations applies the APIService and the webhook configurations of
// CDI's generators with the API server's CA bundle.
func (in *installer) registrations(ctx context.Context) error {
	ca, err := in.apiCA(ctx)
	if err != nil {
		return err
	}
	n, err := in.applyFile(ctx, filepath.Join(in.o.ResourcesDir, "registrations.yaml"), func(u *unstructured.Unstructured) error {
		return setCABundle(u, ca)
	})
	if err != nil {
		return err
	}
	in.o.Logf("cdi: registrations.yaml: %d objects", n)
	return nil
}

// setCABundle sets the caBundle of an APIService or of every webhook of
// a webhook configuration.
func setCABundle(u *unstructured.Unstructured, ca []byte) error {
	enc := ca
	switch u.GetKind() {
	case "APIService":
		return unstructured.SetNestedField(u.Object, encode(enc), "spec", "caBundle")
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
			if err := unstructured.SetNestedField(h, encode(enc), "clientConfig", "caBundle"); err != nil {
				return fmt.Errorf("setting the CA bundle of %s: %w", u.GetName(), err)
			}
		}
		return unstructured.SetNestedSlice(u.Object, hooks, "webhooks")
	}
	return fmt.Errorf("registrations.yaml holds an unexpected %s %s", u.GetKind(), u.GetName())
}

// waitConfig waits for the controller to fill the CDIConfig's status,
// which it does once it has read the CDI CR and the CDIConfig.
func (in *installer) waitConfig(ctx context.Context) error {
	return wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		c, err := in.dyn.Resource(cdiConfigGVR).Get(ctx, ConfigName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		overhead, found, _ := unstructured.NestedString(c.Object, "status", "filesystemOverhead", "global")
		if found && overhead != "" {
			in.o.Logf("cdi: CDIConfig status: filesystem overhead %s", overhead)
			return true, nil
		}
		return false, nil
	})
}

// waitWebhooks waits until a DataVolume create (dry run) reaches CDI's
// webhooks: the API server calls them through the cdi-api Service's
// endpoints, which it learns a moment after the pod is ready.
func (in *installer) waitWebhooks(ctx context.Context) error {
	dv := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cdi.kubevirt.io/v1beta1",
		"kind":       "DataVolume",
		"metadata":   map[string]any{"name": "install-probe", "namespace": Namespace},
		"spec": map[string]any{
			"source": map[string]any{"http": map[string]any{"url": "http://install-probe.invalid/disk.img"}},
			"pvc": map[string]any{
				"accessModes": []any{"ReadWriteOnce"},
				"resources":   map[string]any{"requests": map[string]any{"storage": "1Mi"}},
			},
		},
	}}
	var last error
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, last = in.dyn.Resource(dataVolumeGVR).Namespace(Namespace).Create(ctx, dv, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("%w (last answer: %v)", err, last)
	}
	return nil
}

// waitAPIService waits for the aggregator to find cdi-apiserver serving
// upload.cdi.kubevirt.io.
func (in *installer) waitAPIService(ctx context.Context) error {
	var last string
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		a, err := in.dyn.Resource(apiServiceGVR).Get(ctx, "v1beta1.upload.cdi.kubevirt.io", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = conditionMessage(a, "Available")
		return conditionTrue(a, "Available"), nil
	})
	if err != nil {
		return fmt.Errorf("%w (Available: %s)", err, last)
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

func conditionTrue(u *unstructured.Unstructured, kind string) bool {
	for _, c := range conditions(u) {
		if c["type"] == kind {
			return c["status"] == "True"
		}
	}
	return false
}

func conditionMessage(u *unstructured.Unstructured, kind string) string {
	for _, c := range conditions(u) {
		if c["type"] == kind {
			return fmt.Sprintf("%v %v: %v", c["status"], c["reason"], c["message"])
		}
	}
	return "no condition yet"
}

// encode is a []byte field's JSON form.
func encode(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
