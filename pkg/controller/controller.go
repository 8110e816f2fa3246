package controller

import (
	"context"
	"fmt"
	"time"

	batchinformers "k8s.io/client-go/informers/batch/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	cdiclient "platform.example/vm-migration/pkg/generated/cdi/clientset/versioned"
	cdiinformers "platform.example/vm-migration/pkg/generated/cdi/informers/externalversions/core/v1beta1"
	cdilisters "platform.example/vm-migration/pkg/generated/cdi/listers/core/v1beta1"
	kvclient "platform.example/vm-migration/pkg/generated/kubevirt/clientset/versioned"
	kvinformers "platform.example/vm-migration/pkg/generated/kubevirt/informers/externalversions/core/v1"
	kvlisters "platform.example/vm-migration/pkg/generated/kubevirt/listers/core/v1"
	migclient "platform.example/vm-migration/pkg/generated/migration/clientset/versioned"
	miginformers "platform.example/vm-migration/pkg/generated/migration/informers/externalversions/migration/v1alpha1"
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
	// Decisions holds the state machine's tunables.
	Decisions statemachine.Config
	// Clock is the time source; nil means the real clock.
	Clock clock.PassiveClock
	// BaseRetryDelay and MaxRetryDelay bound the backoff after errors.
	BaseRetryDelay, MaxRetryDelay time.Duration
}

// Clients are the API clients the controller writes with.
type Clients struct {
	Kube      kubernetes.Interface
	Migration migclient.Interface
	KubeVirt  kvclient.Interface
	CDI       cdiclient.Interface
}

// Informers are the shared informers the controller reads from. The
// child informers should be restricted to objects carrying the
// migration UID label (see NewInformerFactories).
type Informers struct {
	Migrations  miginformers.VirtualMachineMigrationInformer
	Jobs        batchinformers.JobInformer
	Claims      coreinformers.PersistentVolumeClaimInformer
	ConfigMaps  coreinformers.ConfigMapInformer
	DataVolumes cdiinformers.DataVolumeInformer
	VMs         kvinformers.VirtualMachineInformer
	VMIs        kvinformers.VirtualMachineInstanceInformer
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

	migrations  miglisters.VirtualMachineMigrationLister
	jobs        batchlisters.JobLister
	claims      corelisters.PersistentVolumeClaimLister
	configMaps  corelisters.ConfigMapLister
	dataVolumes cdilisters.DataVolumeLister
	vms         kvlisters.VirtualMachineLister
	vmis        kvlisters.VirtualMachineInstanceLister
	synced      []cache.InformerSynced

	queue workqueue.TypedRateLimitingInterface[cache.ObjectName]
	slots *slotReservations
}

// New builds a controller and registers its event handlers on the informers.
func New(clients Clients, inf Informers, steps Steps, recorder record.EventRecorder, cfg Config) (*Controller, error) {
	if cfg.Workers <= 0 {
		cfg.Workers = 2
	}
	if cfg.BaseRetryDelay <= 0 {
		cfg.BaseRetryDelay = time.Second
	}
	if cfg.MaxRetryDelay <= 0 {
		cfg.MaxRetryDelay = 5 * time.Minute
	}
	clk := cfg.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	c := &Controller{
		clients:     clients,
		steps:       steps,
		recorder:    recorder,
		cfg:         cfg,
		clock:       clk,
		migrations:  inf.Migrations.Lister(),
		jobs:        inf.Jobs.Lister(),
		claims:      inf.Claims.Lister(),
		configMaps:  inf.ConfigMaps.Lister(),
		dataVolumes: inf.DataVolumes.Lister(),
		vms:         inf.VMs.Lister(),
		vmis:        inf.VMIs.Lister(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](cfg.BaseRetryDelay, cfg.MaxRetryDelay),
			workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: "virtualmachinemigrations"},
		),
		slots: newSlotReservations(),
	}
	if err := c.registerHandlers(inf); err != nil {
		return nil, err
	}
	return c, nil
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
func (c *Controller) processNextItem(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	defer observeReconcile(time.Now())
	requeueAfter, err := c.sync(ctx, key)
	switch {
	case err != nil:
		c.queue.AddRateLimited(key)
		klog.FromContext(ctx).Error(err, "reconcile failed, retrying with backoff", "migration", key.String(), "retries", c.queue.NumRequeues(key))
		reconcileTotal.WithLabelValues("error").Inc()
	default:
		c.queue.Forget(key)
		if requeueAfter > 0 {
			c.queue.AddAfter(key, requeueAfter)
		}
		reconcileTotal.WithLabelValues("success").Inc()
	}
	return true
}

// Enqueue adds a migration's key to the queue.
func (c *Controller) Enqueue(key cache.ObjectName) { c.queue.Add(key) }
