package kubevirt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"platform.example/vm-migration/test/framework"
	"platform.example/vm-migration/test/framework/apply"
)

// Namespace is where KubeVirt's control plane is installed.
const Namespace = "kubevirt"

// Names of what Install creates or waits for.
const (
	// CRName is the KubeVirt CR's name.
	CRName = "kubevirt"
	// APIName and ControllerName are the Deployments.
	APIName        = "virt-api"
	ControllerName = "virt-controller"
	// HandlerName is virt-handler's DaemonSet.
	HandlerName = "virt-handler"
	// SubresourcesAPIService is virt-api's aggregated API.
	SubresourcesAPIService = "v1.subresources.kubevirt.io"
	// caConfigMap holds kubevirt-ca's bundle (key ca-bundle).
	caConfigMap = "kubevirt-ca"
)

// fieldManager owns what Install applies.
const fieldManager = "vm-migration-kubevirt-install"

// defaultTimeout bounds Install when Options.Timeout is zero.
const defaultTimeout = 5 * time.Minute

var (
	kubeVirtGVR       = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "kubevirts"}
	virtualMachineGVR = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachines"}
)

// Options says what Install installs and how it reports.
type Options struct {
	// Build is hack/build-kubevirt.sh's folder, its images already on the
	// node.
	Build *Build
	// Node, when set, is hack/build-kubevirt-node.sh's folder, its images
	// already on the node: virt-handler's DaemonSet is installed too, and
	// KubeVirt itself runs the guests (no stand-in plays virt-handler).
	Node *NodeBuild
	// Timeout bounds the whole installation; zero means five minutes.
	Timeout time.Duration
	// Logf, when set, is told each step and how long it took.
	Logf func(format string, args ...any)
}

type installer struct {
	*apply.Applier
	o Options
}

// Install installs KubeVirt's control plane into the cluster cfg reaches,
// as the package doc says, and returns once it serves.
func Install(ctx context.Context, cfg *rest.Config, o Options) error {
	if o.Build == nil {
		return errors.New("installing KubeVirt: no build")
	}
	if o.Timeout == 0 {
		o.Timeout = defaultTimeout
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	a, err := apply.New(cfg, fieldManager, Namespace, func(format string, args ...any) { o.Logf("kubevirt: "+format, args...) })
	if err != nil {
		return fmt.Errorf("installing KubeVirt: %w", err)
	}
	in := &installer{Applier: a, o: o}
	steps := []apply.Step{
		{What: "namespace and CRDs", Do: in.namespaceAndCRDs},
		{What: "certificates and CA bundles", Do: in.certificates},
		{What: "KubeVirt CR, Deployed", Do: in.customResource},
		{What: "RBAC, Service, webhooks, APIServices and Deployments of install/", Do: in.components},
	}
	if o.Node != nil {
		steps = append(steps, apply.Step{What: "virt-handler's DaemonSet of node/", Do: in.handler})
	}
	steps = append(steps,
		apply.Step{What: "virt-api and virt-controller Available", Do: in.waitDeployments},
		apply.Step{What: "subresources APIService Available", Do: in.waitAPIService},
		apply.Step{What: "VirtualMachine webhooks answering", Do: in.waitWebhooks},
	)
	if o.Node != nil {
		steps = append(steps, apply.Step{What: "virt-handler ready, its node schedulable", Do: in.waitHandler})
	}
	return in.Install(ctx, "KubeVirt "+o.Build.Version, steps)
}

func (in *installer) namespaceAndCRDs(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}
	if in.o.Node != nil {
		// virt-handler is privileged, as virt-operator labels its
		// namespace for.
		ns.Labels = map[string]string{"pod-security.kubernetes.io/enforce": "privileged"}
	}
	if _, err := in.Apply(ctx, ns); err != nil {
		return err
	}
	_, err := in.ApplyCRDs(ctx, filepath.Join(in.o.Build.Dir, "crds"))
	return err
}

// certificates has the build's kubevirt-crds write the certificates into a
// private folder, applies them and removes the folder.
func (in *installer) certificates(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "kubevirt-certs-")
	if err != nil {
		return fmt.Errorf("creating a folder for the certificates: %w", err)
	}
	defer os.RemoveAll(dir)
	cmd := exec.CommandContext(ctx, filepath.Join(in.o.Build.Dir, "kubevirt-crds"), "-certs-out", dir, "-namespace", Namespace)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("kubevirt-crds -certs-out: %w: %s", err, strings.TrimSpace(string(out)))
	}
	n, err := in.ApplyDir(ctx, dir, nil)
	if err != nil {
		return err
	}
	in.o.Logf("kubevirt: %d certificate Secrets and CA bundles", n)
	return nil
}

// customResource applies the KubeVirt CR and marks it Deployed, as
// virt-operator does once it installed the components: virt-api and
// virt-controller read their configuration only from a KubeVirt CR with a
// phase.
func (in *installer) customResource(ctx context.Context) error {
	kv := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1",
		"kind":       "KubeVirt",
		"metadata":   map[string]any{"name": CRName, "namespace": Namespace},
		"spec": map[string]any{
			"imageRegistry": "localhost/kubevirt",
			"imageTag":      in.o.Build.Version,
			"configuration": launcherConfiguration(in.o.Node != nil),
		},
	}}
	cur, err := in.Apply(ctx, kv)
	if err != nil {
		return err
	}
	if err := unstructured.SetNestedField(cur.Object, "Deployed", "status", "phase"); err != nil {
		return fmt.Errorf("setting the KubeVirt CR's phase: %w", err)
	}
	for _, f := range []struct{ key, value string }{
		{"observedKubeVirtVersion", in.o.Build.Version}, {"targetKubeVirtVersion", in.o.Build.Version},
		{"observedKubeVirtRegistry", "localhost/kubevirt"}, {"targetKubeVirtRegistry", "localhost/kubevirt"},
		// SetDefaultArchitecture's: virt-api's mutator gives each VM this
		// architecture, without which the VMI webhook refuses its instance.
		{"defaultArchitecture", runtime.GOARCH},
	} {
		if err := unstructured.SetNestedField(cur.Object, f.value, "status", f.key); err != nil {
			return fmt.Errorf("setting the KubeVirt CR's %s: %w", f.key, err)
		}
	}
	if _, err := in.Dynamic.Resource(kubeVirtGVR).Namespace(Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{FieldManager: fieldManager}); err != nil {
		return fmt.Errorf("marking the KubeVirt CR Deployed: %w", err)
	}
	return nil
}

// launcherConfiguration is the KubeVirt CR's configuration: TCG
// (useEmulation; KVM stays behind the project's own probe), and the
// launcher pods fit for the test node and its namespaces: a RuntimeDefault
// seccomp profile (what PodSecurity restricted requires, and what the
// controller's preflight looks for) and the requests of a node with two
// cores running twenty small VMs at once: 10m per vCPU (cpuAllocationRatio
// 100, KubeVirt's default is 10) and half the guest's memory
// (memoryOvercommit 200). Without the real node side (realLauncher
// false), no guest-console-log container either: the launcher image of
// test/images writes the serial console to the pod's log and has no
// virt-tail. The real virt-launcher keeps it: its virt-tail prints the
// serial console in that container's log.
func launcherConfiguration(realLauncher bool) map[string]any {
	c := map[string]any{
		"developerConfiguration": map[string]any{"useEmulation": true, "cpuAllocationRatio": int64(100), "memoryOvercommit": int64(200)},
		"seccompConfiguration": map[string]any{
			"virtualMachineInstanceProfile": map[string]any{"customProfile": map[string]any{"runtimeDefaultProfile": true}},
		},
	}
	if !realLauncher {
		c["virtualMachineOptions"] = map[string]any{"disableSerialConsoleLog": map[string]any{}}
	}
	return c
}

// components applies install/ in order: the webhook configurations and
// APIServices with kubevirt-ca's bundle, the Deployments with one replica.
func (in *installer) components(ctx context.Context) error {
	cm, err := in.Kube.CoreV1().ConfigMaps(Namespace).Get(ctx, caConfigMap, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading the CA bundle: %w", err)
	}
	ca := cm.Data["ca-bundle"]
	if ca == "" {
		return fmt.Errorf("the %s ConfigMap holds no ca-bundle", caConfigMap)
	}
	files, err := filepath.Glob(filepath.Join(in.o.Build.Dir, "install", "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no install objects in %s/install: %v", in.o.Build.Dir, err)
	}
	sort.Strings(files)
	n := 0
	for _, f := range files {
		objs, err := framework.ReadObjects(f)
		if err != nil {
			return err
		}
		for _, u := range objs {
			if err := in.install(ctx, u, []byte(ca)); err != nil {
				return err
			}
			n++
		}
	}
	in.o.Logf("kubevirt: install/: %d objects", n)
	return nil
}

// install applies one object of install/: a webhook configuration or
// APIService with the CA bundle, a Deployment with one replica and by a
// plain create or update (server-side apply refuses virt-api's: see
// apply.Applier.Replace).
func (in *installer) install(ctx context.Context, u *unstructured.Unstructured, ca []byte) error {
	var err error
	switch u.GetKind() {
	case "APIService", "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration":
		if err := apply.SetCABundle(u, ca); err != nil {
			return err
		}
	case "Deployment":
		if err := unstructured.SetNestedField(u.Object, int64(1), "spec", "replicas"); err != nil {
			return fmt.Errorf("setting the replicas of %s: %w", u.GetName(), err)
		}
		_, err = in.Replace(ctx, u)
		return err
	}
	_, err = in.Apply(ctx, u)
	return err
}

// handler applies node/, virt-handler's DaemonSet, with the references
// of the node build's images.
func (in *installer) handler(ctx context.Context) error {
	n, err := in.ApplyDir(ctx, filepath.Join(in.o.Node.Dir, "node"), func(u *unstructured.Unstructured) error {
		if u.GetKind() != "DaemonSet" {
			return nil
		}
		return checkImages(u, in.o.Node.Images)
	})
	if err != nil {
		return err
	}
	in.o.Logf("kubevirt: node/: %d objects", n)
	return nil
}

// checkImages fails unless every container of DaemonSet u runs one of
// images: the DaemonSet and the images came from the same version.
func checkImages(u *unstructured.Unstructured, images map[string]string) error {
	known := map[string]bool{}
	for _, ref := range images {
		known[ref] = true
	}
	for _, field := range []string{"initContainers", "containers"} {
		cs, _, err := unstructured.NestedSlice(u.Object, "spec", "template", "spec", field)
		if err != nil {
			return fmt.Errorf("reading the %s of %s: %w", field, u.GetName(), err)
		}
		for _, c := range cs {
			image, _, _ := unstructured.NestedString(c.(map[string]any), "image")
			if !known[image] {
				return fmt.Errorf("%s runs %s, which the node build did not make", u.GetName(), image)
			}
		}
	}
	return nil
}

// waitHandler waits until virt-handler's pod is ready and its node is
// labelled schedulable, as virt-handler labels it once its node labeller
// and device plugins run.
func (in *installer) waitHandler(ctx context.Context) error {
	var last string
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		ds, err := in.Kube.AppsV1().DaemonSets(Namespace).Get(ctx, HandlerName, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		if ds.Status.DesiredNumberScheduled == 0 || ds.Status.NumberReady < ds.Status.DesiredNumberScheduled {
			last = fmt.Sprintf("%d of %d virt-handler pods ready", ds.Status.NumberReady, ds.Status.DesiredNumberScheduled)
			return false, nil
		}
		nodes, err := in.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "kubevirt.io/schedulable=true"})
		if err != nil || len(nodes.Items) == 0 {
			last = fmt.Sprintf("no node labelled kubevirt.io/schedulable=true (%v)", err)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("%w (%s); pods: %s", err, last, in.PodSummary(context.Background(), Namespace))
	}
	return nil
}

func (in *installer) waitDeployments(ctx context.Context) error {
	return in.WaitDeployments(ctx, Namespace, APIName, ControllerName)
}

func (in *installer) waitAPIService(ctx context.Context) error {
	return in.WaitAPIService(ctx, SubresourcesAPIService)
}

// ProbeVM is a VirtualMachine KubeVirt's webhooks accept: halted, with
// guest memory, nothing else.
func ProbeVM(name, namespace string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1",
		"kind":       "VirtualMachine",
		"metadata":   map[string]any{"name": name, "namespace": namespace},
		"spec": map[string]any{
			"runStrategy": "Halted",
			"template": map[string]any{"spec": map[string]any{
				"domain": map[string]any{"devices": map[string]any{}, "memory": map[string]any{"guest": "64Mi"}},
			}},
		},
	}}
}

// waitWebhooks waits until a VirtualMachine dry run passes virt-api's
// webhooks (which refuse every create, failing closed, until the API
// server reaches virt-api through its Service) and one with both running
// and runStrategy, a rule only the webhook enforces, is refused by them.
func (in *installer) waitWebhooks(ctx context.Context) error {
	vms := in.Dynamic.Resource(virtualMachineGVR).Namespace(Namespace)
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	var last error
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, last = vms.Create(ctx, ProbeVM("install-probe", Namespace), dry)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("%w (last answer: %v); pods: %s", err, last, in.PodSummary(context.Background(), Namespace))
	}
	bad := ProbeVM("install-probe-invalid", Namespace)
	if err := unstructured.SetNestedField(bad.Object, false, "spec", "running"); err != nil {
		return fmt.Errorf("building the invalid probe: %w", err)
	}
	_, err = vms.Create(ctx, bad, dry)
	if err == nil || !strings.Contains(err.Error(), "denied the request") {
		return fmt.Errorf("a VirtualMachine with running and runStrategy was not refused by virt-api's webhook: %v", err)
	}
	in.o.Logf("kubevirt: a VirtualMachine with running and runStrategy refused: %v", err)
	return nil
}
