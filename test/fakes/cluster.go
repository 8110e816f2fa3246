// Package fakes is a fake cluster for unit tests: the fake clientsets of
// every API the controller talks to (Kubernetes, our migrations, KubeVirt,
// CDI), which give created objects a UID as the API server does and log
// every call in order, and a mirror that fills informer caches from them
// the way the controller's label-filtered watches would. Tests fill the
// caches instead of starting informers, as sample-controller's tests do,
// so every reconcile sees a known cache.
package fakes

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	cdifake "platform.example/vm-migration/pkg/generated/cdi/clientset/versioned/fake"
	kvfake "platform.example/vm-migration/pkg/generated/kubevirt/clientset/versioned/fake"
	migfake "platform.example/vm-migration/pkg/generated/migration/clientset/versioned/fake"
)

// Cluster holds the fake clientsets and the log of their calls.
type Cluster struct {
	Kube *k8sfake.Clientset
	Mig  *migfake.Clientset
	KV   *kvfake.Clientset
	CDI  *cdifake.Clientset
	// Meta is the metadata client the controller's name caches are built
	// on; MirrorNames fills those caches from the typed clientsets.
	Meta *metadatafake.FakeMetadataClient

	t   *testing.T
	mu  sync.Mutex
	log []k8stesting.Action
}

// NewCluster builds the fake clientsets holding objs, each in the
// clientset of its API.
func NewCluster(t *testing.T, objs ...runtime.Object) *Cluster {
	t.Helper()
	c := &Cluster{
		Kube: k8sfake.NewSimpleClientset(), Mig: migfake.NewSimpleClientset(),
		KV: kvfake.NewSimpleClientset(), CDI: cdifake.NewSimpleClientset(), t: t,
		Meta: metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme()),
	}
	for _, cs := range c.clientsets() {
		cs.PrependReactor("create", "*", assignUID)
		cs.PrependReactor("*", "*", c.record)
	}
	c.Mig.PrependReactor("update", "virtualmachinemigrations", bumpResourceVersion)
	for _, o := range objs {
		c.Add(o)
	}
	return c
}

func (c *Cluster) clientsets() []*k8stesting.Fake {
	return []*k8stesting.Fake{&c.Kube.Fake, &c.Mig.Fake, &c.KV.Fake, &c.CDI.Fake}
}

// Add puts an object into the fake API server of its type.
func (c *Cluster) Add(o runtime.Object) {
	c.t.Helper()
	tracker := c.Kube.Tracker()
	switch pkg := reflect.TypeOf(o).Elem().PkgPath(); {
	case strings.HasPrefix(pkg, "platform.example/"):
		tracker = c.Mig.Tracker()
	case strings.HasPrefix(pkg, "kubevirt.io/api/"):
		tracker = c.KV.Tracker()
	case strings.HasPrefix(pkg, "kubevirt.io/containerized-data-importer-api/"):
		tracker = c.CDI.Tracker()
	}
	require.NoError(c.t, tracker.Add(o))
}

var uidCounter atomic.Int64

// assignUID gives every created object a UID, as the API server does.
func assignUID(a k8stesting.Action) (bool, runtime.Object, error) {
	obj := a.(k8stesting.CreateAction).GetObject()
	if acc, err := meta.Accessor(obj); err == nil && acc.GetUID() == "" {
		acc.SetUID(types.UID(fmt.Sprintf("uid-%d", uidCounter.Add(1))))
	}
	return false, nil, nil
}

var resourceVersionCounter atomic.Int64

// bumpResourceVersion gives a migration a new resourceVersion at every
// update, as the API server does (the fake tracker keeps the caller's):
// the controller tells a cache that has not seen its own write by it.
func bumpResourceVersion(a k8stesting.Action) (bool, runtime.Object, error) {
	obj := a.(k8stesting.UpdateAction).GetObject()
	if acc, err := meta.Accessor(obj); err == nil {
		acc.SetResourceVersion(fmt.Sprint(resourceVersionCounter.Add(1)))
	}
	return false, nil, nil
}

// record logs every call, of every clientset, in order.
func (c *Cluster) record(a k8stesting.Action) (bool, runtime.Object, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = append(c.log, a.DeepCopy())
	return false, nil, nil
}

// Actions are the calls since the last Clear, in order.
func (c *Cluster) Actions() []k8stesting.Action {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.log)
}

// Clear forgets the calls made so far.
func (c *Cluster) Clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = nil
}

// Calls splits actions into reads and writes, as "verb resource[/subresource]".
func Calls(actions []k8stesting.Action) (reads, writes []string) {
	for _, a := range actions {
		what := a.GetVerb() + " " + a.GetResource().Resource
		if a.GetSubresource() != "" {
			what += "/" + a.GetSubresource()
		}
		switch a.GetVerb() {
		case "get", "list", "watch":
			reads = append(reads, what)
		default:
			writes = append(writes, what)
		}
	}
	return reads, writes
}

// Mirror makes each informer's cache hold what the fake API servers hold
// of its resource (keyed by resource name), filtered as the controller's
// factories filter: children need the migration UID label, Secrets the
// credentials label; migrations and StorageClasses are all kept. It clears
// the calls it made.
func (c *Cluster) Mirror(informers map[string]cache.SharedIndexInformer) {
	c.t.Helper()
	for resource, informer := range informers {
		list, ok := c.lists()[resource]
		require.True(c.t, ok, "the fake cluster cannot list %s", resource)
		l, err := list(context.Background())
		require.NoError(c.t, err)
		items, err := meta.ExtractList(l)
		require.NoError(c.t, err)
		objs := make([]any, 0, len(items))
		for _, it := range items {
			objs = append(objs, it)
		}
		require.NoError(c.t, informer.GetIndexer().Replace(objs, ""))
	}
	c.Clear()
}

// MirrorNames makes each metadata-only informer (keyed by resource name)
// hold the metadata of every object of its resource, whoever made it.
func (c *Cluster) MirrorNames(informers map[string]cache.SharedIndexInformer) {
	c.t.Helper()
	all := metav1.ListOptions{}
	lists := map[string]lister{
		"persistentvolumeclaims": func(ctx context.Context) (runtime.Object, error) {
			return c.Kube.CoreV1().PersistentVolumeClaims("").List(ctx, all)
		},
		"datavolumes": func(ctx context.Context) (runtime.Object, error) {
			return c.CDI.CdiV1beta1().DataVolumes("").List(ctx, all)
		},
		"virtualmachines": func(ctx context.Context) (runtime.Object, error) {
			return c.KV.KubevirtV1().VirtualMachines("").List(ctx, all)
		},
	}
	for resource, informer := range informers {
		list, ok := lists[resource]
		require.True(c.t, ok, "the fake cluster cannot list the metadata of %s", resource)
		l, err := list(context.Background())
		require.NoError(c.t, err)
		items, err := meta.ExtractList(l)
		require.NoError(c.t, err)
		objs := make([]any, 0, len(items))
		for _, it := range items {
			acc, err := meta.Accessor(it)
			require.NoError(c.t, err)
			objs = append(objs, &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
				Name: acc.GetName(), Namespace: acc.GetNamespace(), UID: acc.GetUID(), Labels: acc.GetLabels(), Annotations: acc.GetAnnotations()}})
		}
		require.NoError(c.t, informer.GetIndexer().Replace(objs, ""))
	}
	c.Clear()
}

type lister func(context.Context) (runtime.Object, error)

// lists are the list calls of every resource, with the watches' filters.
func (c *Cluster) lists() map[string]lister {
	own := metav1.ListOptions{LabelSelector: v1alpha1.LabelMigrationUID}
	creds := metav1.ListOptions{LabelSelector: v1alpha1.LabelVSphereCredentials + "=true"}
	all := metav1.ListOptions{}
	core, kv := c.Kube.CoreV1(), c.KV.KubevirtV1()
	return map[string]lister{
		"virtualmachinemigrations": func(ctx context.Context) (runtime.Object, error) {
			return c.Mig.MigrationV1alpha1().VirtualMachineMigrations("").List(ctx, all)
		},
		"storageclasses": func(ctx context.Context) (runtime.Object, error) {
			return c.Kube.StorageV1().StorageClasses().List(ctx, all)
		},
		"secrets": func(ctx context.Context) (runtime.Object, error) { return core.Secrets("").List(ctx, creds) },
		"jobs":    func(ctx context.Context) (runtime.Object, error) { return c.Kube.BatchV1().Jobs("").List(ctx, own) },
		"pods":    func(ctx context.Context) (runtime.Object, error) { return core.Pods("").List(ctx, own) },
		"persistentvolumeclaims": func(ctx context.Context) (runtime.Object, error) {
			return core.PersistentVolumeClaims("").List(ctx, own)
		},
		"configmaps":      func(ctx context.Context) (runtime.Object, error) { return core.ConfigMaps("").List(ctx, own) },
		"serviceaccounts": func(ctx context.Context) (runtime.Object, error) { return core.ServiceAccounts("").List(ctx, own) },
		"roles":           func(ctx context.Context) (runtime.Object, error) { return c.Kube.RbacV1().Roles("").List(ctx, own) },
		"rolebindings": func(ctx context.Context) (runtime.Object, error) {
			return c.Kube.RbacV1().RoleBindings("").List(ctx, own)
		},
		"datavolumes": func(ctx context.Context) (runtime.Object, error) {
			return c.CDI.CdiV1beta1().DataVolumes("").List(ctx, own)
		},
		"virtualmachines": func(ctx context.Context) (runtime.Object, error) { return kv.VirtualMachines("").List(ctx, own) },
		"virtualmachineinstances": func(ctx context.Context) (runtime.Object, error) {
			return kv.VirtualMachineInstances("").List(ctx, own)
		},
	}
}
