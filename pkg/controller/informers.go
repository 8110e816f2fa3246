package controller

import (
	"context"
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
//     VirtualMachines and their instances).
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

// NewFactories builds the factories, scoped to one namespace when
// namespace is not empty.
func NewFactories(clients Clients, namespace string, resync time.Duration) *Factories {
	own := func(o *metav1.ListOptions) { o.LabelSelector = v1alpha1.LabelMigrationUID }
	credentials := func(o *metav1.ListOptions) { o.LabelSelector = v1alpha1.LabelVSphereCredentials + "=true" }
	return &Factories{
		Migration: miginformers.NewSharedInformerFactoryWithOptions(clients.Migration, resync, miginformers.WithNamespace(namespace)),
		Kube: kubeinformers.NewSharedInformerFactoryWithOptions(clients.Kube, resync,
			kubeinformers.WithNamespace(namespace), kubeinformers.WithTweakListOptions(own)),
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
	names := map[string]cache.SharedIndexInformer{}
	for _, gvr := range nameResources {
		informer := f.Names.ForResource(gvr).Informer()
		// Only once, before the informer runs: later calls fail and are harmless.
		_ = informer.SetTransform(stripManagedFields)
		names[gvr.Resource] = informer
	}
	return Informers{
		Migrations:     f.Migration.Migration().V1alpha1().VirtualMachineMigrations().Informer(),
		StorageClasses: f.Cluster.Storage().V1().StorageClasses().Informer(),
		Secrets:        f.Secrets.Core().V1().Secrets().Informer(),
		Children:       children,
		Names:          names,
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
