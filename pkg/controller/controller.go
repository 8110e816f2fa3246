package controller

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"k8s.io/client-go/kubernetes"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	cdiclient "platform.example/vm-migration/pkg/generated/cdi/clientset/versioned"
	kvclient "platform.example/vm-migration/pkg/generated/kubevirt/clientset/versioned"
	migclient "platform.example/vm-migration/pkg/generated/migration/clientset/versioned"
	miglisters "platform.example/vm-migration/pkg/generated/migration/listers/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/steps"
)

// Config holds the controller's tunables.
type Config struct {
	// Workers is how many keys are reconciled in parallel.
	Workers int
	// MaxTransfersPerHost bounds the migrations stopping or transferring
	// from one ESXi host at once; 0 means no bound.
	MaxTransfersPerHost int
	// MaxTransfersPerDatastore bounds them per source datastore; 0 means no bound.
	MaxTransfersPerDatastore int
	// Conversions paces the stops by conversion capacity (conversions.go);
	// the zero value does not.
	Conversions ConversionLimit
	// DefaultConversionImage is the controller's default virt-v2v image,
	// for the preflight rule that a conversion has an image.
	DefaultConversionImage string
	// AllowedConversionImages are the patterns (path.Match) a migration's
	// own conversion image must match; the default image is always allowed.
	AllowedConversionImages []string
	// Decisions holds the state machine's tunables.
	Decisions statemachine.Config
	// Clock is the time source of the decisions and of the queue's delays;
	// nil means the real clock.
	Clock clock.WithTicker
	// BaseRetryDelay and MaxRetryDelay bound the backoff after errors.
	BaseRetryDelay, MaxRetryDelay time.Duration
	// DefaultTTLAfterFinished is the time to live of a finished migration
	// without spec.ttlSecondsAfterFinished; 0 keeps them until deleted.
	DefaultTTLAfterFinished time.Duration
}

// Clients are the API clients the controller and its steps write with.
type Clients struct {
	Kube      kubernetes.Interface
	Migration migclient.Interface
	KubeVirt  kvclient.Interface
	CDI       cdiclient.Interface
	// Metadata lists and watches the metadata of objects of any kind.
	Metadata metadata.Interface
}

// Informers are what the controller reads: the migrations, the cluster's
// storage classes (for preflight), the credentials Secrets (whose events
// enqueue the migrations that name them), and every child informer the
// steps observe through (whose events enqueue the migration named in the
// child's labels).
type Informers struct {
	Migrations     cache.SharedIndexInformer
	StorageClasses cache.SharedIndexInformer
	Secrets        cache.SharedIndexInformer
	// Children maps a resource name to its (label-filtered) informer.
	Children map[string]cache.SharedIndexInformer
	// Names maps a resource name to its metadata-only informer of every
	// object of the watched namespaces (see Factories.Names).
	Names map[string]cache.SharedIndexInformer
	// Nodes is the (trimmed) node informer a conversion budget derived
	// from the nodes reads (Watch.Nodes); nil otherwise. The controller
	// does not wait for it: stops wait until it synced.
	Nodes cache.SharedIndexInformer
}

// Steps are the side effects the controller delegates.
type Steps struct {
	Source   steps.SourceStep
	Pipeline steps.PipelineStep
}

// Controller reconciles VirtualMachineMigrations.
type Controller struct {
	clients  Clients
	steps    Steps
	recorder record.EventRecorder
	cfg      Config
	clock    clock.PassiveClock

	migrations     miglisters.VirtualMachineMigrationLister
	migrationIndex cache.Indexer
	storageClasses storagelisters.StorageClassLister
	names          map[string]cache.SharedIndexInformer
	synced         []cache.InformerSynced

	queue       workqueue.TypedRateLimitingInterface[cache.ObjectName]
	slots       *slotReservations
	conversions *conversionSlots
	// nodes sizes an automatic conversion budget; podIndex reads the
	// conversion pods waiting for room.
	nodes     *nodeCapacity
	podIndex  cache.Indexer
	claims    *claimRegistry
	abandoned *abandonedSources
	decided   *decidedVersions
}

// New builds a controller and registers its event handlers on the informers.
func New(clients Clients, inf Informers, s Steps, recorder record.EventRecorder, cfg Config) (*Controller, error) {
	if s.Source == nil || s.Pipeline == nil {
		return nil, fmt.Errorf("the controller needs a source step and a pipeline step")
	}
	cfg = cfg.withDefaults()
	if err := inf.Migrations.AddIndexers(migrationIndexers()); err != nil {
		return nil, fmt.Errorf("indexing the migration cache: %w", err)
	}
	c := &Controller{
		clients:        clients,
		steps:          s,
		recorder:       recorder,
		cfg:            cfg,
		clock:          cfg.Clock,
		migrations:     miglisters.NewVirtualMachineMigrationLister(inf.Migrations.GetIndexer()),
		migrationIndex: inf.Migrations.GetIndexer(),
		storageClasses: storagelisters.NewStorageClassLister(inf.StorageClasses.GetIndexer()),
		names:          inf.Names,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](cfg.BaseRetryDelay, cfg.MaxRetryDelay),
			workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: "virtualmachinemigrations", Clock: cfg.Clock},
		),
		slots:       newSlotReservations(cachedFrom(inf.Migrations.GetIndexer())),
		conversions: newConversionSlots(cachedFrom(inf.Migrations.GetIndexer())),
		claims:      newClaimRegistry(cachedFrom(inf.Migrations.GetIndexer())),
		abandoned:   newAbandonedSources(cfg.Clock.Now),
		decided:     newDecidedVersions(),
	}
	if err := c.pace(inf); err != nil {
		return nil, err
	}
	if err := c.registerHandlers(inf); err != nil {
		return nil, err
	}
	return c, nil
}

func (cfg Config) withDefaults() Config {
	if cfg.Workers <= 0 {
		cfg.Workers = 2
	}
	if cfg.BaseRetryDelay <= 0 {
		cfg.BaseRetryDelay = time.Second
	}
	if cfg.MaxRetryDelay <= 0 {
		cfg.MaxRetryDelay = 5 * time.Minute
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return cfg
}

// Run waits for the caches, then runs the workers until ctx ends. ready,
// when not nil, is closed once the workers run.
func (c *Controller) Run(ctx context.Context, ready chan<- struct{}) error {
	defer c.queue.ShutDown()
	logger := klog.FromContext(ctx)
	logger.Info("starting migration controller", "workers", c.cfg.Workers)
	if !cache.WaitForNamedCacheSync("migration", ctx.Done(), c.synced...) {
		return fmt.Errorf("waiting for informer caches to sync: %w", ctx.Err())
	}
	done := make(chan struct{})
	for range c.cfg.Workers {
		go func() {
			defer func() { done <- struct{}{} }()
			for c.processNextItem(ctx) {
			}
		}()
	}
	logger.Info("migration controller started")
	if ready != nil {
		close(ready)
	}
	<-ctx.Done()
	logger.Info("shutting down migration controller")
	c.queue.ShutDown()
	for range c.cfg.Workers {
		<-done
	}
	return nil
}

// processNextItem reconciles one key. The queue never hands a key to a
// second worker while the first one holds it.
func (c *Controller) processNextItem(ctx context.Context) (more bool) {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	// A panic outside a reconcile's work (reconcile recovers its own)
	// fails this key's turn the same way.
	defer func() {
		if v := recover(); v != nil {
			c.failed(ctx, key, &panicError{value: v, stack: debug.Stack()})
			more = true
		}
	}()
	if c.handleFinished(ctx, key) {
		// Not reconciled: a requeue asked for before the migration
		// ended, or its time to live.
		return true
	}
	c.reconcile(ctx, key, c.sync)
	return true
}

// reconcile runs work on key (a sync, or the expiry of a finished
// migration), timed (its duration and its own time), and queues the key
// again as its outcome asks: with backoff after an error, else after the
// delay it returned, if any.
func (c *Controller) reconcile(ctx context.Context, key cache.ObjectName, work func(context.Context, cache.ObjectName) (time.Duration, error)) {
	ctx, clock := withCallClock(ctx)
	defer observeReconcile(ctx, key, time.Now(), clock)
	requeueAfter, err := recovering(ctx, key, work)
	if err != nil {
		c.failed(ctx, key, err)
		return
	}
	c.queue.Forget(key)
	if requeueAfter > 0 {
		c.queue.AddAfter(key, requeueAfter)
	}
	reconcileTotal.WithLabelValues("success").Inc()
}

// failed queues key again with backoff after its reconcile failed or
// panicked, and records that.
func (c *Controller) failed(ctx context.Context, key cache.ObjectName, err error) {
	c.queue.AddRateLimited(key)
	if c.notePanic(ctx, key, err) {
		reconcileTotal.WithLabelValues("panic").Inc()
		return
	}
	klog.FromContext(ctx).Error(err, "reconcile failed, retrying with backoff", "migration", key.String(), "retries", c.queue.NumRequeues(key))
	reconcileTotal.WithLabelValues("error").Inc()
}

// Enqueue adds a migration's key to the queue.
func (c *Controller) Enqueue(key cache.ObjectName) { c.queue.Add(key) }
