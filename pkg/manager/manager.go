package manager

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/controller"
	cdiclient "platform.example/vm-migration/pkg/generated/cdi/clientset/versioned"
	kvclient "platform.example/vm-migration/pkg/generated/kubevirt/clientset/versioned"
	migclient "platform.example/vm-migration/pkg/generated/migration/clientset/versioned"
	migscheme "platform.example/vm-migration/pkg/generated/migration/clientset/versioned/scheme"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/steps/pipeline"
	"platform.example/vm-migration/pkg/steps/source"
	"platform.example/vm-migration/pkg/vsphere"
)

// Options configure a controller run.
type Options struct {
	// Namespaces limit the controller to those namespaces; none means
	// all namespaces (a cluster-wide install).
	Namespaces []string
	// Namespace is one more namespace to watch, for callers that watch
	// one: the same as Namespaces: []string{Namespace}.
	Namespace string
	// Workers is how many migrations are reconciled in parallel.
	Workers int
	// MaxTransfersPerHost and MaxTransfersPerDatastore bound concurrent
	// transfers from one ESXi host or datastore; 0 means no bound.
	MaxTransfersPerHost, MaxTransfersPerDatastore int
	// Conversions paces the stops by conversion capacity (the zero value
	// does not); an automatic budget without PodRequests counts the
	// conversion pods the Pipeline configuration renders.
	Conversions controller.ConversionLimit
	// VSphereCallTimeout bounds each vSphere operation.
	VSphereCallTimeout time.Duration
	// VSphereOperationsPerEndpoint bounds the vSphere operations (each
	// holds a worker) running against one endpoint at once; 0 means the
	// workers minus one, at least one, so that one endpoint that stalls
	// never holds every worker (and one that answers loses little).
	VSphereOperationsPerEndpoint int
	// Decisions tunes the state machine.
	Decisions statemachine.Config
	// DefaultTTLAfterFinished deletes finished migrations without
	// spec.ttlSecondsAfterFinished that long after they finished; 0 keeps
	// them.
	DefaultTTLAfterFinished time.Duration
	// AllowedConversionImages are the patterns a migration's own
	// spec.conversion.image must match (the default image always may).
	AllowedConversionImages []string
	// Pipeline configures the Kubernetes-side objects of the data path
	// (images, progress channel, conversion pod needs).
	Pipeline pipeline.Config
	// Registerer receives the controller's metrics; nil registers none.
	Registerer prometheus.Registerer
	// Ready, when set, is closed once the caches synced and workers run.
	Ready chan<- struct{}
}

// Run runs the controller until ctx ends. It fails at once, with one line
// that says what is missing, when the API server lacks a needed API.
func Run(ctx context.Context, cfg *rest.Config, opts Options) error {
	clients, err := controllerClients(cfg)
	if err != nil {
		return err
	}
	broadcaster := NewEventBroadcaster(ctx)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: clients.Kube.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	if err := migscheme.AddToScheme(scheme.Scheme); err != nil {
		return fmt.Errorf("registering the migration API in the event scheme: %w", err)
	}
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "vm-migration-controller"})

	sessions := vsphere.NewSessionCache(vsphere.WithRoundTripper(controller.TimeVSphereCalls)).WithEndpointLimit(opts.operationsPerEndpoint())
	go wait.UntilWithContext(ctx, sessions.Sweep, time.Minute)
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := sessions.Close(closeCtx); err != nil {
			klog.FromContext(ctx).Error(err, "logging out of vSphere")
		}
	}()
	watch := controller.NewWatch(clients, opts.watched(), 10*time.Hour)
	conversions := opts.conversions()
	if err := CheckAccess(ctx, clients.Kube, watch.Namespaces, conversions.readsNodes()...); err != nil {
		return err
	}
	klog.FromContext(ctx).Info("watching", "namespaces", describeNamespaces(watch.Namespaces))
	informers := watch.Informers(watch.Children(pipeline.ChildInformers))
	if conversions.Auto {
		informers.Nodes = watch.Nodes()
	}
	klog.FromContext(ctx).Info("pacing the stops", "maxConversions", conversions.String(), "maxTransfersPerHost", opts.MaxTransfersPerHost)
	c, err := controller.New(clients, informers, Steps(clients, informers, sessions, opts), recorder, controller.Config{
		Workers:                  opts.Workers,
		MaxTransfersPerHost:      opts.MaxTransfersPerHost,
		MaxTransfersPerDatastore: opts.MaxTransfersPerDatastore,
		Conversions:              conversions.ConversionLimit,
		DefaultConversionImage:   opts.Pipeline.ConversionImage,
		AllowedConversionImages:  opts.AllowedConversionImages,
		Decisions:                opts.Decisions,
		DefaultTTLAfterFinished:  opts.DefaultTTLAfterFinished,
	})
	if err != nil {
		return err
	}
	if opts.Registerer != nil {
		if err := c.RegisterMetrics(opts.Registerer); err != nil {
			return fmt.Errorf("registering metrics: %w", err)
		}
	}
	watch.Start(ctx)
	defer watch.Shutdown()
	return c.Run(ctx, opts.Ready)
}

// controllerClients are the controller's API clients, once the API server
// is seen to serve every API the controller needs. Every API call a
// reconcile makes counts against its own time
// (vm_migration_reconcile_own_duration_seconds), as every vSphere call
// does (the session cache); the dry run reads the API server's warnings
// of each of its requests (PodSecurity's on a Job's pods), the others are
// logged.
func controllerClients(cfg *rest.Config) (controller.Clients, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(controller.TimeAPICalls)
	cfg.WarningHandler = nil
	cfg.WarningHandlerWithContext = pipeline.WarningCollector{Next: rest.WarningLogger{}}
	clients, err := NewClients(cfg)
	if err != nil {
		return clients, err
	}
	return clients, CheckAPIs(clients.Kube)
}

// Steps builds the source and pipeline steps over the controller's caches.
func Steps(clients controller.Clients, inf controller.Informers, sessions *vsphere.SessionCache, opts Options) controller.Steps {
	return controller.Steps{
		Source: &source.Step{Secrets: corelisters.NewSecretLister(inf.Secrets.GetIndexer()), Sessions: sessions, CallTimeout: opts.VSphereCallTimeout},
		Pipeline: &pipeline.Step{
			Kube: clients.Kube, KubeVirt: clients.KubeVirt, CDI: clients.CDI, Config: opts.Pipeline,
			Listers:        pipeline.ListersOver(inf.Children),
			StorageClasses: storagelisters.NewStorageClassLister(inf.StorageClasses.GetIndexer()),
		},
	}
}

// NewEventBroadcaster returns the controller's event broadcaster. Events
// are aggregated only when their messages match too: client-go's default
// key leaves the message out and, from the tenth event of one reason about
// one object within ten minutes, rewrites them as "(combined from similar
// events)", which hid the phase changes of every migration (all of reason
// PhaseChanged). Repeats of one message are still counted, not repeated.
func NewEventBroadcaster(ctx context.Context) record.EventBroadcaster {
	return record.NewBroadcaster(record.WithContext(ctx), record.WithCorrelatorOptions(record.CorrelatorOptions{
		KeyFunc: func(e *corev1.Event) (string, string) {
			key, message := record.EventAggregatorByReasonFunc(e)
			return key + "\x00" + message, message
		},
		SpamKeyFunc: spamKeyByReason,
	}))
}

// spamKeyByReason gives each event reason of one object its own budget
// in client-go's spam filter (25 events, then one per five minutes): its
// default key leaves the reason out, so a failed action retried until its
// deadline (an ActionFailed Warning per retry) spent the migration's
// budget and the failure, RollingBack and Failed Warnings that followed
// were dropped.
func spamKeyByReason(e *corev1.Event) string {
	o := e.InvolvedObject
	return strings.Join([]string{e.Source.Component, e.Source.Host, o.Kind, o.Namespace, o.Name, string(o.UID), o.APIVersion, e.Type, e.Reason}, "\x00")
}

// operationsPerEndpoint is VSphereOperationsPerEndpoint, or the workers
// minus one (at least one) when unset.
func (o Options) operationsPerEndpoint() int {
	if o.VSphereOperationsPerEndpoint > 0 {
		return o.VSphereOperationsPerEndpoint
	}
	return max(1, o.Workers-1)
}

// watched returns the namespaces to watch: Namespaces and Namespace; none
// means all.
func (o Options) watched() []string {
	if o.Namespace == "" {
		return o.Namespaces
	}
	return append(slices.Clone(o.Namespaces), o.Namespace)
}

// describeNamespaces names the watched namespaces for the log.
func describeNamespaces(namespaces []string) string {
	if len(namespaces) == 1 && namespaces[0] == "" {
		return "all"
	}
	return strings.Join(namespaces, ",")
}

// NewClients builds every client the controller uses over one client-side
// rate limit of cfg.QPS and cfg.Burst that they all share, whose waits count
// as API time in a reconcile's own time (controller.TimeThrottling): the
// flags --kube-api-qps and --kube-api-burst bound the controller as a whole,
// not each of its five clients (which would let it send five times as much).
// A config with a rate limiter of its own, or a negative QPS (no limit), is
// kept as it is.
func NewClients(cfg *rest.Config) (controller.Clients, error) {
	cfg = shareLimit(cfg)
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return controller.Clients{}, fmt.Errorf("building kubernetes client: %w", err)
	}
	mig, err := migclient.NewForConfig(cfg)
	if err != nil {
		return controller.Clients{}, fmt.Errorf("building migration client: %w", err)
	}
	kv, err := kvclient.NewForConfig(cfg)
	if err != nil {
		return controller.Clients{}, fmt.Errorf("building kubevirt client: %w", err)
	}
	cdi, err := cdiclient.NewForConfig(cfg)
	if err != nil {
		return controller.Clients{}, fmt.Errorf("building cdi client: %w", err)
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return controller.Clients{}, fmt.Errorf("building metadata client: %w", err)
	}
	return controller.Clients{Kube: kube, Migration: mig, KubeVirt: kv, CDI: cdi, Metadata: md}, nil
}

// shareLimit is a copy of cfg with one token bucket of cfg.QPS and
// cfg.Burst (client-go's defaults when unset), timed by
// controller.TimeThrottling: every client built from the copy draws from
// that one bucket, where each clientset built from cfg itself would make a
// bucket of its own. A config with a rate limiter of its own, or a
// negative QPS (no limit), is kept as it is.
func shareLimit(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	if c.RateLimiter != nil || c.QPS < 0 {
		return c
	}
	qps, burst := c.QPS, c.Burst
	if qps == 0 {
		qps, burst = rest.DefaultQPS, rest.DefaultBurst
	}
	c.RateLimiter = controller.TimeThrottling(flowcontrol.NewTokenBucketRateLimiter(qps, burst))
	return c
}

// requiredAPIs are the resources the controller watches.
var requiredAPIs = []struct{ groupVersion, resource, install string }{
	{v1alpha1.SchemeGroupVersion.String(), "virtualmachinemigrations", "kubectl apply -k manifests/"},
	{"kubevirt.io/v1", "virtualmachines", "install KubeVirt"},
	{"kubevirt.io/v1", "virtualmachineinstances", "install KubeVirt"},
	{"cdi.kubevirt.io/v1beta1", "datavolumes", "install CDI (Containerized Data Importer)"},
}

// CheckAPIs fails with a readable error when an API the controller needs
// is not served.
func CheckAPIs(kube kubernetes.Interface) error {
	for _, api := range requiredAPIs {
		list, err := kube.Discovery().ServerResourcesForGroupVersion(api.groupVersion)
		found := false
		if err == nil {
			for _, r := range list.APIResources {
				found = found || r.Name == api.resource
			}
		}
		if !found {
			return fmt.Errorf("the API server does not serve %s in %s: %s first", api.resource, api.groupVersion, api.install)
		}
	}
	return nil
}

// conversionLimit is the conversion pacing in force.
type conversionLimit struct{ controller.ConversionLimit }

// conversions is Conversions, with an automatic budget's pod requests
// from the conversion pods the pipeline renders.
func (o Options) conversions() conversionLimit {
	lim := o.Conversions
	if lim.Auto && lim.PodRequests == nil {
		lim.PodRequests = controller.PodRequests(pipeline.ConversionResources(o.Pipeline))
	}
	return conversionLimit{lim}
}

// readsNodes names the nodes when the budget is sized from them.
func (l conversionLimit) readsNodes() []schema.GroupResource {
	if l.Auto {
		return []schema.GroupResource{nodes}
	}
	return nil
}
