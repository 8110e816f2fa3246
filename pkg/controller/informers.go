package controller

import (
	"context"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	cdiinformers "platform.example/vm-migration/pkg/generated/cdi/informers/externalversions"
	kvinformers "platform.example/vm-migration/pkg/generated/kubevirt/informers/externalversions"
	miginformers "platform.example/vm-migration/pkg/generated/migration/informers/externalversions"
)

// Factories are the shared informer factories of the controller. What a
// reconcile reads of Kubernetes comes from their caches only:
//   - Migration: the VirtualMachineMigrations.
//   - Kube, KubeVirt, CDI: the children, restricted to objects that carry
//     the migration UID label, so the caches hold the controller's own
//     objects and nothing else (pods, Jobs, claims, ConfigMaps, the
//     per-attempt ServiceAccounts, Roles and RoleBindings, DataVolumes,
//     VirtualMachines and their instances). Of the claims, not those of
//     the DataVolumes (component import: CDI copies a DataVolume's labels
//     to its claim): the step reads the staging claims only, and a
//     migrated VM's disks would otherwise stay cached for as long as
//     their migration exists.
//   - Secrets: the Secrets that opt in as vSphere credentials
//     (v1alpha1.LabelVSphereCredentials=true), and no other.
//   - Cluster: cluster-scoped facts (StorageClasses).
type Factories struct {
	Migration miginformers.SharedInformerFactory
	Kube      kubeinformers.SharedInformerFactory
	KubeVirt  kvinformers.SharedInformerFactory
	CDI       cdiinformers.SharedInformerFactory
	Secrets   kubeinformers.SharedInformerFactory
	Cluster   kubeinformers.SharedInformerFactory
	// Names caches the metadata of every claim, DataVolume and
	// VirtualMachine in the watched namespaces (not only the migrations'),
	// to find the names a migration would create taken before it starts.
	Names metadatainformer.SharedInformerFactory
}

// childSelector selects the Kubernetes objects the children's caches
// hold: every object with a migration's UID label but the claims CDI
// makes for the target DataVolumes (which get the DataVolumes' labels,
// component import, and are the VM's); the claims the transfer writes
// the disks into (component disk) are the migration's children.
const childSelector = v1alpha1.LabelMigrationUID + "," + v1alpha1.LabelComponent + "!=" + v1alpha1.ComponentImport

// NewFactories builds the factories of one namespace, or of all of them
// when namespace is empty. A controller of several namespaces has one per
// namespace (see Watch).
func NewFactories(clients Clients, namespace string, resync time.Duration) *Factories {
	own := func(o *metav1.ListOptions) { o.LabelSelector = v1alpha1.LabelMigrationUID }
	ownButDisks := func(o *metav1.ListOptions) { o.LabelSelector = childSelector }
	credentials := func(o *metav1.ListOptions) { o.LabelSelector = v1alpha1.LabelVSphereCredentials + "=true" }
	return &Factories{
		Migration: miginformers.NewSharedInformerFactoryWithOptions(clients.Migration, resync, miginformers.WithNamespace(namespace)),
		Kube: kubeinformers.NewSharedInformerFactoryWithOptions(clients.Kube, resync,
			kubeinformers.WithNamespace(namespace), kubeinformers.WithTweakListOptions(ownButDisks)),
		KubeVirt: kvinformers.NewSharedInformerFactoryWithOptions(clients.KubeVirt, resync,
			kvinformers.WithNamespace(namespace), kvinformers.WithTweakListOptions(own)),
		CDI: cdiinformers.NewSharedInformerFactoryWithOptions(clients.CDI, resync,
			cdiinformers.WithNamespace(namespace), cdiinformers.WithTweakListOptions(own)),
		Secrets: kubeinformers.NewSharedInformerFactoryWithOptions(clients.Kube, resync,
			kubeinformers.WithNamespace(namespace), kubeinformers.WithTweakListOptions(credentials)),
		Cluster: kubeinformers.NewSharedInformerFactory(clients.Kube, resync),
		Names:   metadatainformer.NewFilteredSharedInformerFactory(clients.Metadata, resync, namespace, nil),
	}
}

// Informers returns the informers the controller reads and waits for:
// the migrations, the storage classes, the credentials Secrets and the
// steps' child informers (built from f.Kube, f.KubeVirt and f.CDI).
func (f *Factories) Informers(children map[string]cache.SharedIndexInformer) Informers {
	inf := f.namespaced(children)
	inf.StorageClasses = f.Cluster.Storage().V1().StorageClasses().Informer()
	inf.trimCaches()
	return inf
}

// trimCaches makes the controller's own informers drop what nothing reads
// of what they cache: managedFields, most of a migration's size once the
// controller wrote its status a few times (bench-scale: 24 KB of a
// migration's 30 in memory), and kubectl's last applied configuration
// (stripManagedFields); a finished migration is held as its summary
// (cacheMigration). The children's caches are the steps'
// (pipeline.ChildInformers trims them); the name caches keep names and
// the migration UID label only (stripNameMetadata). Only before the
// informers run: later calls fail and are harmless.
func (inf Informers) trimCaches() {
	if inf.Migrations != nil {
		_ = inf.Migrations.SetTransform(cacheMigration)
	}
	for _, informer := range []cache.SharedIndexInformer{inf.StorageClasses, inf.Secrets} {
		if informer != nil {
			_ = informer.SetTransform(stripManagedFields)
		}
	}
	for _, informer := range inf.Names {
		_ = informer.SetTransform(stripNameMetadata)
	}
}

// namespaced returns the informers of f's namespace: Informers without
// the cluster-scoped StorageClasses.
func (f *Factories) namespaced(children map[string]cache.SharedIndexInformer) Informers {
	names := map[string]cache.SharedIndexInformer{}
	for _, gvr := range nameResources {
		names[gvr.Resource] = f.Names.ForResource(gvr).Informer()
	}
	return Informers{
		Migrations: f.Migration.Migration().V1alpha1().VirtualMachineMigrations().Informer(),
		Secrets:    f.Secrets.Core().V1().Secrets().Informer(),
		Children:   children,
		Names:      names,
	}
}

// Start starts every informer the controller asked for.
func (f *Factories) Start(ctx context.Context) {
	f.Migration.Start(ctx.Done())
	f.Kube.Start(ctx.Done())
	f.KubeVirt.Start(ctx.Done())
	f.CDI.Start(ctx.Done())
	f.Secrets.Start(ctx.Done())
	f.Cluster.Start(ctx.Done())
	f.Names.Start(ctx.Done())
}

// Shutdown waits for the informers to stop once ctx is done.
func (f *Factories) Shutdown() {
	f.Migration.Shutdown()
	f.Kube.Shutdown()
	f.KubeVirt.Shutdown()
	f.CDI.Shutdown()
	f.Secrets.Shutdown()
	f.Cluster.Shutdown()
	f.Names.Shutdown()
}

// ChildInformersFunc builds the child informers a step observes through
// from one namespace's factories, by resource name
// (pipeline.ChildInformers).
type ChildInformersFunc func(kube kubeinformers.SharedInformerFactory, kv kvinformers.SharedInformerFactory, cdi cdiinformers.SharedInformerFactory) map[string]cache.SharedIndexInformer

// Watch is what the controller watches: one Factories per watched
// namespace (the API server watches one namespace or all of them), whose
// informers of each resource are joined into one (fanOut), so that the
// controller and the steps read one cache per resource whatever the
// namespaces; and the cluster-scoped StorageClasses, watched once.
type Watch struct {
	// Namespaces are the watched namespaces, sorted; [""] means all.
	Namespaces []string
	sets       map[string]*Factories
	cluster    kubeinformers.SharedInformerFactory
}

// NewWatch builds the factories of the namespaces (see WatchedNamespaces).
func NewWatch(clients Clients, namespaces []string, resync time.Duration) *Watch {
	w := &Watch{Namespaces: WatchedNamespaces(namespaces), sets: map[string]*Factories{}}
	for _, ns := range w.Namespaces {
		w.sets[ns] = NewFactories(clients, ns, resync)
	}
	w.cluster = w.sets[w.Namespaces[0]].Cluster
	return w
}

// WatchedNamespaces returns the namespaces sorted, each once; none, or
// "" (all namespaces) among them, is [""].
func WatchedNamespaces(namespaces []string) []string {
	if len(namespaces) == 0 || slices.Contains(namespaces, metav1.NamespaceAll) {
		return []string{metav1.NamespaceAll}
	}
	return slices.Compact(slices.Sorted(slices.Values(namespaces)))
}

// Children builds the child informers of every watched namespace with
// build and joins them per resource.
func (w *Watch) Children(build ChildInformersFunc) map[string]cache.SharedIndexInformer {
	byResource := map[string]map[string]cache.SharedIndexInformer{}
	for ns, f := range w.sets {
		for resource, informer := range build(f.Kube, f.KubeVirt, f.CDI) {
			addMember(byResource, resource, ns, informer)
		}
	}
	return fanOutEach(byResource)
}

// Informers returns the informers the controller reads and waits for,
// each joined over the watched namespaces (see Factories.Informers), with
// children from w.Children.
func (w *Watch) Informers(children map[string]cache.SharedIndexInformer) Informers {
	migrations := map[string]cache.SharedIndexInformer{}
	secrets := map[string]cache.SharedIndexInformer{}
	names := map[string]map[string]cache.SharedIndexInformer{}
	for ns, f := range w.sets {
		inf := f.namespaced(nil)
		migrations[ns], secrets[ns] = inf.Migrations, inf.Secrets
		for resource, informer := range inf.Names {
			addMember(names, resource, ns, informer)
		}
	}
	inf := Informers{
		Migrations:     fanOut(migrations),
		StorageClasses: w.cluster.Storage().V1().StorageClasses().Informer(),
		Secrets:        fanOut(secrets),
		Children:       children,
		Names:          fanOutEach(names),
	}
	inf.trimCaches()
	return inf
}

// Nodes is the cache of the cluster's nodes, trimmed to what sizes the
// conversion slots (trimNode), for a budget derived from the nodes
// (ConversionLimit.Auto); watched once, whatever the namespaces.
func (w *Watch) Nodes() cache.SharedIndexInformer {
	informer := w.cluster.Core().V1().Nodes().Informer()
	_ = informer.SetTransform(trimNode)
	return informer
}

// Start starts every informer the controller asked for.
func (w *Watch) Start(ctx context.Context) {
	for _, f := range w.sets {
		f.Start(ctx)
	}
}

// Shutdown waits for the informers to stop once ctx is done.
func (w *Watch) Shutdown() {
	for _, f := range w.sets {
		f.Shutdown()
	}
}

// addMember files informer under resource and namespace.
func addMember(byResource map[string]map[string]cache.SharedIndexInformer, resource, ns string, informer cache.SharedIndexInformer) {
	if byResource[resource] == nil {
		byResource[resource] = map[string]cache.SharedIndexInformer{}
	}
	byResource[resource][ns] = informer
}

// fanOutEach joins the informers of each resource.
func fanOutEach(byResource map[string]map[string]cache.SharedIndexInformer) map[string]cache.SharedIndexInformer {
	out := make(map[string]cache.SharedIndexInformer, len(byResource))
	for resource, byNamespace := range byResource {
		out[resource] = fanOut(byNamespace)
	}
	return out
}
