package controller

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	cdifake "platform.example/vm-migration/pkg/generated/cdi/clientset/versioned/fake"
	kvfake "platform.example/vm-migration/pkg/generated/kubevirt/clientset/versioned/fake"
	migfake "platform.example/vm-migration/pkg/generated/migration/clientset/versioned/fake"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/steps"
	"platform.example/vm-migration/pkg/steps/pipeline"
	"platform.example/vm-migration/test/builders"
	"platform.example/vm-migration/test/fakes"
)

// fixture is the controller over a fake cluster, with its real informer
// factories (never started: the fake cluster mirrors what it holds into
// the caches before and after every sync, as the watches would) and the
// real pipeline step. Every client call of a sync is recorded, so a test
// can require that a reconcile read nothing from the API server.
type fixture struct {
	t       *testing.T
	ctx     context.Context
	cluster *fakes.Cluster
	kube    *k8sfake.Clientset
	mig     *migfake.Clientset
	kv      *kvfake.Clientset
	cdi     *cdifake.Clientset
	clock   *clocktesting.FakeClock
	rec     *record.FakeRecorder
	c       *Controller

	factories *Factories
	informers Informers
	// events holds every event recorded so far.
	events []string
	// reads and writes are the client calls of the last sync, as
	// "verb resource[/subresource]"; lastActions the calls themselves.
	reads, writes []string
	lastActions   []k8stesting.Action
}

// pipelineConfig is the pipeline configuration of the fixtures.
var pipelineConfig = pipeline.Config{
	TransferImage: "registry.example/vm-migration:1", ConversionImage: "registry.example/virt-v2v:1",
	TransferProgress: true,
}

// newFixture builds the controller with source as its source step and
// objs in the fake cluster.
func newFixture(t *testing.T, source steps.SourceStep, objs ...runtime.Object) *fixture {
	t.Helper()
	return newFixtureWith(t, nil, source, objs...)
}

// newFixtureWith is newFixture with the controller's configuration
// changed by tune (nil: as it is) before the controller is built.
func newFixtureWith(t *testing.T, tune func(*Config), source steps.SourceStep, objs ...runtime.Object) *fixture {
	t.Helper()
	cl := fakes.NewCluster(t, objs...)
	f := &fixture{
		t: t, ctx: context.Background(), cluster: cl, kube: cl.Kube, mig: cl.Mig, kv: cl.KV, cdi: cl.CDI,
		clock: clocktesting.NewFakeClock(builders.T0), rec: record.NewFakeRecorder(1000),
	}
	clients := Clients{Kube: f.kube, Migration: f.mig, KubeVirt: f.kv, CDI: f.cdi, Metadata: cl.Meta}
	f.factories = NewFactories(clients, "", 0)
	fk := f.factories
	p := &pipeline.Step{Kube: f.kube, KubeVirt: f.kv, CDI: f.cdi, Config: pipelineConfig,
		Listers: pipeline.ListersFrom(fk.Kube, fk.KubeVirt, fk.CDI)}
	f.informers = fk.Informers(pipeline.ChildInformers(fk.Kube, fk.KubeVirt, fk.CDI))
	p.StorageClasses = storagelisters.NewStorageClassLister(f.informers.StorageClasses.GetIndexer())
	cfg := Config{
		Clock: f.clock, BaseRetryDelay: 50 * time.Millisecond, MaxRetryDelay: time.Second,
		DefaultConversionImage: pipelineConfig.ConversionImage,
	}
	if tune != nil {
		tune(&cfg)
	}
	c, err := New(clients, f.informers, Steps{Source: source, Pipeline: p}, f.rec, cfg)
	require.NoError(t, err)
	f.c = c
	f.resync()
	return f
}

// add puts an object into the fake cluster.
func (f *fixture) add(o runtime.Object) { f.cluster.Add(o) }

// resync mirrors the fake cluster into every cache the controller reads.
func (f *fixture) resync() {
	f.t.Helper()
	all := maps.Clone(f.informers.Children)
	all["virtualmachinemigrations"] = f.informers.Migrations
	all["storageclasses"] = f.informers.StorageClasses
	all["secrets"] = f.informers.Secrets
	f.cluster.Mirror(all)
	f.cluster.MirrorNames(f.informers.Names)
}

// key is a migration's queue key.
func key(m *v1alpha1.VirtualMachineMigration) cache.ObjectName { return cache.MetaObjectToName(m) }

// sync runs one reconcile of m's key between two cache refreshes and
// records its client calls and events.
func (f *fixture) sync(m *v1alpha1.VirtualMachineMigration) time.Duration {
	f.t.Helper()
	f.resync()
	after, err := f.c.sync(f.ctx, key(m))
	require.NoError(f.t, err)
	f.lastActions = f.cluster.Actions()
	f.reads, f.writes = fakes.Calls(f.lastActions)
	f.drainEvents()
	f.resync()
	return after
}

// get reads a migration from the fake API server; nil once deleted.
func (f *fixture) get(m *v1alpha1.VirtualMachineMigration) *v1alpha1.VirtualMachineMigration {
	cur, err := f.mig.MigrationV1alpha1().VirtualMachineMigrations(m.Namespace).Get(f.ctx, m.Name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return cur
}

func (f *fixture) drainEvents() {
	for {
		select {
		case e := <-f.rec.Events:
			f.events = append(f.events, e)
		default:
			return
		}
	}
}

// condition finds a condition of m.
func condition(m *v1alpha1.VirtualMachineMigration, t string) *metav1.Condition {
	return meta.FindStatusCondition(m.Status.Conditions, t)
}

// fakeSource is a SourceStep that returns what the test sets and records calls.
type fakeSource struct {
	obs   statemachine.SourceObservation
	calls []string
}

func (s *fakeSource) Observe(context.Context, *v1alpha1.VirtualMachineMigration, statemachine.SourceNeed) statemachine.SourceObservation {
	s.calls = append(s.calls, "observe")
	return s.obs
}

func (s *fakeSource) ShutdownGuest(context.Context, *v1alpha1.VirtualMachineMigration) error {
	s.calls = append(s.calls, "shutdown")
	return nil
}

func (s *fakeSource) PowerOff(context.Context, *v1alpha1.VirtualMachineMigration) error {
	s.calls = append(s.calls, "poweroff")
	return nil
}

func (s *fakeSource) PowerOn(context.Context, *v1alpha1.VirtualMachineMigration) error {
	s.calls = append(s.calls, "poweron")
	return nil
}

func (s *fakeSource) RemoveSnapshot(context.Context, *v1alpha1.VirtualMachineMigration, string) error {
	s.calls = append(s.calls, "removesnapshot")
	return nil
}
