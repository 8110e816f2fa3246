package controller

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/steps/pipeline"
	"platform.example/vm-migration/test/builders"
	"platform.example/vm-migration/test/fakes"
)

// watchedController is the controller over a Watch of namespaces,
// its informers started on a fake cluster holding objs and synced.
func watchedController(t *testing.T, namespaces []string, objs ...runtime.Object) (*Controller, *fakes.Cluster) {
	t.Helper()
	cl := fakes.NewCluster(t, objs...)
	clients := Clients{Kube: cl.Kube, Migration: cl.Mig, KubeVirt: cl.KV, CDI: cl.CDI, Metadata: cl.Meta}
	w := NewWatch(clients, namespaces, 0)
	inf := w.Informers(w.Children(pipeline.ChildInformers))
	p := &pipeline.Step{Kube: cl.Kube, KubeVirt: cl.KV, CDI: cl.CDI, Config: pipelineConfig, Listers: pipeline.ListersOver(inf.Children)}
	c, err := New(clients, inf, Steps{Source: &fakeSource{}, Pipeline: p}, record.NewFakeRecorder(100), Config{
		Clock: clocktesting.NewFakeClock(builders.T0), DefaultConversionImage: pipelineConfig.ConversionImage,
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		w.Shutdown()
	})
	w.Start(ctx)
	syncCtx, syncCancel := context.WithTimeout(ctx, 10*time.Second)
	defer syncCancel()
	require.True(t, cache.WaitForCacheSync(syncCtx.Done(), c.synced...), "caches did not sync")
	return c, cl
}

// queued drains the keys the handlers queued.
func queued(c *Controller) []string {
	var keys []string
	for c.queue.Len() > 0 {
		k, _ := c.queue.Get()
		keys = append(keys, k.String())
		c.queue.Done(k)
		c.queue.Forget(k)
	}
	slices.Sort(keys)
	return keys
}

// TestWatchOfListedNamespaces runs the controller's informers for
// namespaces a and b against a fake cluster that also has namespace c:
// the handlers queue the migrations of a and b (a child's event queues
// its migration), the caches hold nothing of c, a reconcile of c's
// migration does nothing and one of a's proceeds.
func TestWatchOfListedNamespaces(t *testing.T) {
	var objs []runtime.Object
	for _, ns := range []string{"a", "b", "c"} {
		m := builders.Migration(builders.Named("web"), builders.InNamespace(ns), builders.WithUID(types.UID("uid-web-"+ns)))
		objs = append(objs, m, builders.CredentialsSecret(ns, "vcenter-credentials", map[string]string{"username": "u", "password": "p"}))
	}
	for _, ns := range []string{"b", "c"} {
		// A Job whose migration is gone queues that migration's key.
		gone := builders.Migration(builders.Named("gone"), builders.InNamespace(ns), builders.WithUID(types.UID("uid-gone-"+ns)))
		objs = append(objs, builders.Job(gone, "gone-transfer", v1alpha1.ComponentTransfer))
	}
	c, cl := watchedController(t, []string{"b", "a"}, objs...)

	assert.Equal(t, []string{"a/web", "b/gone", "b/web"}, queued(c), "the handlers queue the migrations of the listed namespaces only")
	all, err := c.migrations.List(labels.Everything())
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"a/web", "b/web"}, keysOf(all))

	cl.Clear()
	_, err = c.sync(context.Background(), cache.NewObjectName("c", "web"))
	require.NoError(t, err)
	_, writes := fakes.Calls(cl.Actions())
	assert.Empty(t, writes, "a migration of a namespace not listed is left alone")

	cl.Clear()
	_, err = c.sync(context.Background(), cache.NewObjectName("a", "web"))
	require.NoError(t, err)
	_, writes = fakes.Calls(cl.Actions())
	assert.Contains(t, writes, "update virtualmachinemigrations/status", "a migration of a listed namespace is reconciled")
	for _, a := range cl.Actions() {
		assert.Equal(t, "a", a.GetNamespace(), "%s %s", a.GetVerb(), a.GetResource().Resource)
	}
}
