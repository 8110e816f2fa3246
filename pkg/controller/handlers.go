package controller

import (
	"fmt"
	"maps"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// registerHandlers wires the informers to the queue: a migration enqueues
// itself; a child enqueues the migration named in its labels.
func (c *Controller) registerHandlers(inf Informers) error {
	migReg, err := inf.Migrations.AddEventHandler(onEvery(c.enqueueMigration))
	if err != nil {
		return fmt.Errorf("registering migration handler: %w", err)
	}
	secretReg, err := inf.Secrets.AddEventHandler(onEvery(c.enqueueCredentialUsers))
	if err != nil {
		return fmt.Errorf("registering secret handler: %w", err)
	}
	c.synced = append(c.synced, migReg.HasSynced, secretReg.HasSynced, inf.StorageClasses.HasSynced)
	for _, informer := range inf.Names {
		c.synced = append(c.synced, informer.HasSynced)
	}
	for _, name := range slices.Sorted(maps.Keys(inf.Children)) {
		reg, err := inf.Children[name].AddEventHandler(onEvery(c.enqueueLabelledOwner))
		if err != nil {
			return fmt.Errorf("registering %s handler: %w", name, err)
		}
		c.synced = append(c.synced, reg.HasSynced)
	}
	return nil
}

// onEvery calls enqueue with the object of every add, update and delete.
func onEvery(enqueue func(obj any)) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}
}

func (c *Controller) enqueueMigration(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	m, ok := obj.(*v1alpha1.VirtualMachineMigration)
	if !ok {
		return
	}
	c.queue.Add(cache.MetaObjectToName(m))
}

// enqueueLabelledOwner maps a child's event to its migration through the
// migration-name label every child carries (DataVolumes and VMs are not
// owned by the migration, so owner references cannot serve).
func (c *Controller) enqueueLabelledOwner(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	o, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	name := o.GetLabels()[v1alpha1.LabelMigrationName]
	if name == "" {
		return
	}
	c.queue.Add(cache.NewObjectName(o.GetNamespace(), name))
}

// enqueueCredentialUsers maps a credentials Secret's event to the
// migrations of its namespace that name it, so that a migration waiting
// for its Secret moves on as soon as it appears (or is labelled).
func (c *Controller) enqueueCredentialUsers(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	o, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	all, err := c.migrations.VirtualMachineMigrations(o.GetNamespace()).List(labels.Everything())
	if err != nil {
		return
	}
	for _, m := range all {
		if m.SpecInForce().Source.CredentialsSecretRef.Name == o.GetName() {
			c.queue.Add(cache.MetaObjectToName(m))
		}
	}
}
