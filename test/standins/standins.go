package standins

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	cdiclient "platform.example/vm-migration/pkg/generated/cdi/clientset/versioned"
	kvclient "platform.example/vm-migration/pkg/generated/kubevirt/clientset/versioned"
)

// Defaults of Config.
const (
	// DefaultNodeName is the node the KubeVirt stand-in reports instances
	// on when no real node is given.
	DefaultNodeName = "standin-node"
	// DefaultStorageClass is the default StorageClass the storage stand-in creates.
	DefaultStorageClass = "standard"
	// Provisioner names the storage stand-in in the StorageClass.
	Provisioner = "standins.platform.example/hostpath"
	// LabelStandin marks the objects the stand-ins create themselves.
	LabelStandin = "standins.platform.example/simulated"
)

// Config configures the stand-ins.
type Config struct {
	// RestConfig reaches the API server as an administrator.
	RestConfig *rest.Config
	// Root is the directory under which volumes and pod directories live.
	Root string
	// Namespace limits the stand-ins to one namespace; empty means all.
	Namespace string
	// NodeName is the node the KubeVirt stand-in reports instances on;
	// empty means LocalVolumeNode, then DefaultNodeName.
	NodeName string
	// LocalVolumeNode, when set, is the real node (framework.WithNode) the
	// storage stand-in's volumes are on: they are then `local`
	// PersistentVolumes pinned to it, which its kubelet mounts into pods
	// and applies their fsGroup to; otherwise hostPath ones.
	LocalVolumeNode string
	// RealProvisioners are the provisioners of real storage installed
	// beside the storage stand-in: it leaves the claims of their
	// StorageClasses to them, as one provisioner leaves another's.
	RealProvisioners []string
	// CloneBytesPerSecond throttles the CDI stand-in's copy (0: as fast as
	// it goes), so that progress can be watched.
	CloneBytesPerSecond int64
	// VMIStartDelay is how long a VMI stays Scheduling before its
	// launcher pod is created (or, without a launcher, it is marked
	// Running).
	VMIStartDelay time.Duration
	// LauncherImage, when set, is the launcher image (test/images) the
	// KubeVirt stand-in runs each instance's guest with, in a launcher
	// pod on the real node; empty (no node: integration tests, control-
	// plane benchmarks), instances are marked Running and no guest runs.
	LauncherImage string
	// LauncherRuntimeClass, when set, is the node's RuntimeClass offering
	// /dev/kvm: launcher pods get it and run QEMU under KVM. Set it only
	// where a probe booted a real guest under KVM; empty means TCG.
	LauncherRuntimeClass string
	// RealKubeVirt says KubeVirt's own virt-api and virt-controller run
	// (test/framework/kubevirt): the KubeVirt stand-in then registers no
	// webhook, creates neither instance nor launcher pod and writes no VM
	// status; it plays virt-handler for the launcher pods virt-controller
	// renders (see kubevirt_handler.go). LauncherRuntimeClass is unused.
	RealKubeVirt bool
	// RealKubeVirtNode says KubeVirt's node side runs too (virt-handler's
	// DaemonSet and the real virt-launcher: test/framework/kubevirt with
	// Options.Node): there is no KubeVirt stand-in at all.
	RealKubeVirtNode bool
	// RealCDI says CDI's own controller, apiserver and uploadproxy run
	// (test/framework/cdi, with real storage: make test-e2e): the CDI
	// stand-in then registers no DataVolume webhook and imports nothing,
	// and CloneBytesPerSecond is unused. With RealKubeVirt as well the
	// stand-ins serve no webhook at all.
	RealCDI bool
	// VMIGracePeriod is how long a deleted VMI stays (in its phase, being
	// deleted, under KubeVirt's finalizer) before it is gone, as KubeVirt
	// keeps one while virt-handler stops its guest within the termination
	// grace period (30 s by default). Zero deletes it at once.
	VMIGracePeriod time.Duration
	// Ready, when set, is closed by Run once the webhooks are active and
	// the StorageClass exists, before the controllers start.
	Ready chan<- struct{}
	// Light is the mode of control-plane benchmarks (hack/benchscale, whose
	// own pod completer ends the pods): a clone completes at once, without
	// copying.
	Light bool
	// Workers is how many keys each stand-in's loop works on at once; 0
	// means each one's default (2 or 4).
	Workers int
}

// workers is the worker count of a loop whose default is def.
func (c *Config) workers(def int) int {
	if c.Workers > 0 {
		return c.Workers
	}
	return def
}

func (c *Config) defaults() error {
	if c.RestConfig == nil {
		return errors.New("standins: no rest config")
	}
	if c.Root == "" {
		return errors.New("standins: no root directory")
	}
	if c.NodeName == "" {
		c.NodeName = c.LocalVolumeNode
	}
	if c.NodeName == "" {
		c.NodeName = DefaultNodeName
	}
	root, err := filepath.Abs(c.Root)
	if err != nil {
		return fmt.Errorf("standins: %w", err)
	}
	c.Root = root
	return os.MkdirAll(c.Root, 0o755)
}

// clients are the clients the stand-ins use.
type clients struct {
	kube kubernetes.Interface
	kv   kvclient.Interface
	cdi  cdiclient.Interface
	// instanceWriter writes instances: kv, or, beside the real KubeVirt,
	// kv acting as virt-handler (HandlerUser), since virt-api undoes
	// status changes by anyone but KubeVirt's own ServiceAccounts.
	instanceWriter kvclient.Interface
	// events records the stand-ins' events; it drops them until Run
	// starts the broadcaster.
	events record.EventRecorder
}

// startEvents records events on the API server as component until the
// returned stop is called.
func (c *clients) startEvents(component string) (stop func(), err error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, kubevirtv1.AddToScheme, cdiv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("standins: event scheme: %w", err)
		}
	}
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.kube.CoreV1().Events("")})
	c.events = b.NewRecorder(scheme, corev1.EventSource{Component: component})
	return b.Shutdown, nil
}

// HandlerUser is virt-handler's ServiceAccount in KubeVirt's namespace
// (test/framework/kubevirt installs KubeVirt into "kubevirt", with this
// account's RBAC), as whom the stand-in writes instances beside the real
// KubeVirt.
const HandlerUser = "system:serviceaccount:kubevirt:kubevirt-handler"

func newClients(cfg *rest.Config, realKubeVirt bool) (*clients, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "vm-migration-standins"
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("standins: kubernetes client: %w", err)
	}
	kv, err := kvclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("standins: kubevirt client: %w", err)
	}
	cdi, err := cdiclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("standins: cdi client: %w", err)
	}
	c := &clients{kube: kube, kv: kv, cdi: cdi, instanceWriter: kv, events: &record.FakeRecorder{}}
	if realKubeVirt {
		as := rest.CopyConfig(cfg)
		as.Impersonate = rest.ImpersonationConfig{UserName: HandlerUser,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kubevirt", "system:authenticated"}}
		if c.instanceWriter, err = kvclient.NewForConfig(as); err != nil {
			return nil, fmt.Errorf("standins: kubevirt client as virt-handler: %w", err)
		}
	}
	return c, nil
}

// Run runs the storage, CDI and KubeVirt stand-ins and their admission
// webhooks until ctx ends, and unregisters the webhooks before it returns.
// The webhooks are active before anything else starts.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.defaults(); err != nil {
		return err
	}
	c, err := newClients(cfg.RestConfig, cfg.RealKubeVirt)
	if err != nil {
		return err
	}
	stopEvents, err := c.startEvents("standins")
	if err != nil {
		return err
	}
	defer stopEvents()
	runners := []func(context.Context) error{}
	if !cfg.RealCDI || !cfg.RealKubeVirt {
		admission, err := startAdmission(ctx, cfg, c)
		if err != nil {
			return err
		}
		defer admission.Close()
		if !cfg.RealCDI {
			runners = append(runners, (&CDI{cfg: cfg, c: c, tokens: admission.tokens}).run)
		}
	}
	storage := &Storage{cfg: cfg, c: c}
	if err := storage.EnsureStorageClass(ctx); err != nil {
		return err
	}
	if cfg.Ready != nil {
		close(cfg.Ready)
	}
	runners = append(runners, storage.run)
	if !cfg.RealKubeVirtNode {
		runners = append(runners, (&KubeVirt{cfg: cfg, c: c}).run)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(runners))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for i, r := range runners {
		wg.Go(func() {
			errs[i] = r(ctx)
			if errs[i] != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// loop is a work queue of object keys with a sync function, retried with
// backoff on error.
type loop struct {
	name  string
	queue workqueue.TypedRateLimitingInterface[string]
	sync  func(ctx context.Context, key string) (time.Duration, error)
}

func newLoop(name string, sync func(ctx context.Context, key string) (time.Duration, error)) *loop {
	return &loop{
		name: name,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 5*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: name}),
		sync: sync,
	}
}

// handler enqueues the key of every added, updated or deleted object.
func (l *loop) handler() cache.ResourceEventHandler {
	add := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			l.queue.Add(key)
		}
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: add, UpdateFunc: func(_, obj any) { add(obj) }, DeleteFunc: add}
}

// run processes keys with workers until ctx ends.
func (l *loop) run(ctx context.Context, workers int) {
	logger := klog.FromContext(ctx).WithName(l.name)
	go func() {
		<-ctx.Done()
		l.queue.ShutDown()
	}()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				key, quit := l.queue.Get()
				if quit {
					return
				}
				after, err := l.sync(ctx, key)
				switch {
				case err != nil && ctx.Err() == nil:
					logger.V(1).Info("retrying", "key", key, "err", err.Error())
					l.queue.AddRateLimited(key)
				case after > 0:
					l.queue.Forget(key)
					l.queue.AddAfter(key, after)
				default:
					l.queue.Forget(key)
				}
				l.queue.Done(key)
			}
		})
	}
	wg.Wait()
}

// orDefault is s, or def when s is empty.
func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
