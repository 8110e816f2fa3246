package cdi

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"platform.example/vm-migration/test/framework/apply"
)

// fieldManager owns what Install applies.
const fieldManager = "vm-migration-cdi-install"

// defaultTimeout bounds Install when Options.Timeout is zero.
const defaultTimeout = 5 * time.Minute

var (
	cdiConfigGVR  = schema.GroupVersionResource{Group: "cdi.kubevirt.io", Version: "v1beta1", Resource: "cdiconfigs"}
	dataVolumeGVR = schema.GroupVersionResource{Group: "cdi.kubevirt.io", Version: "v1beta1", Resource: "datavolumes"}
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

// installer holds the applier of one Install.
type installer struct {
	*apply.Applier
	o Options
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
	return in.Install(ctx, "CDI", []apply.Step{
		{What: "namespace and CRDs", Do: in.namespaceAndCRDs},
		{What: "RBAC of CDI's generators", Do: in.rbac},
		{What: "certificates, CA bundles and the token key", Do: in.certificates},
		{What: "CDI CR and CDIConfig", Do: in.customResources},
		{What: "Services and Deployments", Do: in.workloads},
		{What: "Deployments Available", Do: in.waitDeployments},
		{What: "APIService and webhook configurations", Do: in.registrations},
		{What: "CDIConfig read by the controller", Do: in.waitConfig},
		{What: "DataVolume webhooks answering", Do: in.waitWebhooks},
		{What: "upload APIService Available", Do: in.waitAPIService},
	})
}

func newInstaller(cfg *rest.Config, o Options) (*installer, error) {
	a, err := apply.New(cfg, fieldManager, Namespace, func(format string, args ...any) { o.Logf("cdi: "+format, args...) })
	if err != nil {
		return nil, err
	}
	return &installer{Applier: a, o: o}, nil
}

func (in *installer) namespaceAndCRDs(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace, Labels: commonLabels()}}
	if _, err := in.Apply(ctx, ns); err != nil {
		return err
	}
	_, err := in.ApplyCRDs(ctx, in.o.CRDDir)
	return err
}

func (in *installer) rbac(ctx context.Context) error {
	for _, f := range []string{"cluster-rbac.yaml", "namespaced-rbac.yaml"} {
		n, err := in.ApplyFile(ctx, filepath.Join(in.o.ResourcesDir, f), nil)
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
	cm, err := in.Kube.CoreV1().ConfigMaps(Namespace).Get(ctx, "cdi-apiserver-signer-bundle", metav1.GetOptions{})
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
		if _, err := in.Apply(ctx, s); err != nil {
			return err
		}
	}
	for _, cm := range p.configMaps {
		if _, err := in.Apply(ctx, cm); err != nil {
			return err
		}
	}
	in.o.Logf("cdi: %d Secrets and %d CA bundles", len(p.secrets), len(p.configMaps))
	return nil
}

func (in *installer) customResources(ctx context.Context) error {
	cr, err := in.Apply(ctx, cdiCR())
	if err != nil {
		return err
	}
	_, err = in.Apply(ctx, cdiConfig(cr))
	return err
}

func (in *installer) workloads(ctx context.Context) error {
	for _, s := range services() {
		if _, err := in.Apply(ctx, s); err != nil {
			return err
		}
	}
	for _, d := range []*appsv1.Deployment{controllerDeployment(in.o.Images), apiServerDeployment(in.o.Images), uploadProxyDeployment(in.o.Images)} {
		if _, err := in.Apply(ctx, d); err != nil {
			return err
		}
	}
	return nil
}

func (in *installer) waitDeployments(ctx context.Context) error {
	return in.WaitDeployments(ctx, Namespace, ControllerName, APIServerName, UploadProxyName)
}

// registrations applies the APIService and the webhook configurations of
// CDI's generators with the API server's CA bundle.
func (in *installer) registrations(ctx context.Context) error {
	ca, err := in.apiCA(ctx)
	if err != nil {
		return err
	}
	n, err := in.ApplyFile(ctx, filepath.Join(in.o.ResourcesDir, "registrations.yaml"), func(u *unstructured.Unstructured) error {
		return apply.SetCABundle(u, ca)
	})
	if err != nil {
		return err
	}
	in.o.Logf("cdi: registrations.yaml: %d objects", n)
	return nil
}

// waitConfig waits for the controller to fill the CDIConfig's status,
// which it does once it has read the CDI CR and the CDIConfig.
func (in *installer) waitConfig(ctx context.Context) error {
	return wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		c, err := in.Dynamic.Resource(cdiConfigGVR).Get(ctx, ConfigName, metav1.GetOptions{})
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
		_, last = in.Dynamic.Resource(dataVolumeGVR).Namespace(Namespace).Create(ctx, dv, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
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
	return in.WaitAPIService(ctx, "v1beta1.upload.cdi.kubevirt.io")
}
