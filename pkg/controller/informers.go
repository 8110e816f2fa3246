package controller

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeinformers "k8s.io/client-go/informers"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	cdiinformers "platform.example/vm-migration/pkg/generated/cdi/informers/externalversions"
	kvinformers "platform.example/vm-migration/pkg/generated/kubevirt/informers/externalversions"
	miginformers "platform.example/vm-migration/pkg/generated/migration/informers/externalversions"
)

// Factories are the shared informer factories of the controller. The child
// factories only list and watch objects that carry the migration UID label,
// so the caches hold the controller's own objects and nothing else.
type Factories struct {
	Migration miginformers.SharedInformerFactory
	Kube      kubeinformers.SharedInformerFactory
	KubeVirt  kvinformers.SharedInformerFactory
	CDI       cdiinformers.SharedInformerFactory
}

// NewFactories builds the factories, scoped to one namespace when
// namespace is not empty.
func NewFactories(clients Clients, namespace string, resync time.Duration) *Factories {
	own := func(o *metav1.ListOptions) { o.LabelSelector = v1alpha1.LabelMigrationUID }
	return &Factories{
		Migration: miginformers.NewSharedInformerFactoryWithOptions(clients.Migration, resync, miginformers.WithNamespace(namespace)),
		Kube: kubeinformers.NewSharedInformerFactoryWithOptions(clients.Kube, resync,
			kubeinformers.WithNamespace(namespace), kubeinformers.WithTweakListOptions(own)),
		KubeVirt: kvinformers.NewSharedInformerFactoryWithOptions(clients.KubeVirt, resync,
			kvinformers.WithNamespace(namespace), kvinformers.WithTweakListOptions(own)),
		CDI: cdiinformers.NewSharedInformerFactoryWithOptions(clients.CDI, resync,
			cdiinformers.WithNamespace(namespace), cdiinformers.WithTweakListOptions(own)),
	}
}

// Informers returns the informers the controller reads.
func (f *Factories) Informers() Informers {
	return Informers{
		Migrations:  f.Migration.Migration().V1alpha1().VirtualMachineMigrations(),
		Jobs:        f.Kube.Batch().V1().Jobs(),
		Claims:      f.Kube.Core().V1().PersistentVolumeClaims(),
		ConfigMaps:  f.Kube.Core().V1().ConfigMaps(),
		DataVolumes: f.CDI.Cdi().V1beta1().DataVolumes(),
		VMs:         f.KubeVirt.Kubevirt().V1().VirtualMachines(),
		VMIs:        f.KubeVirt.Kubevirt().V1().VirtualMachineInstances(),
	}
}

// Start starts every informer the controller asked for.
func (f *Factories) Start(ctx context.Context) {
	f.Migration.Start(ctx.Done())
	f.Kube.Start(ctx.Done())
	f.KubeVirt.Start(ctx.Done())
	f.CDI.Start(ctx.Done())
}

// Shutdown waits for the informers to stop once ctx is done.
func (f *Factories) Shutdown() {
	f.Migration.Shutdown()
	f.Kube.Shutdown()
	f.KubeVirt.Shutdown()
	f.CDI.Shutdown()
}
