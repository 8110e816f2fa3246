package controller

import (
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
)

// The kinds of objects whose names a migration must find free before it
// stops its source: metadata-only caches of every one of them in the
// watched namespaces, not only the migrations' own, so that a collision
// with a foreign object is seen.
var (
	claimsResource      = schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}
	dataVolumesResource = schema.GroupVersionResource{Group: "cdi.kubevirt.io", Version: "v1beta1", Resource: "datavolumes"}
	vmsResource         = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachines"}
	nameResources       = []schema.GroupVersionResource{claimsResource, dataVolumesResource, vmsResource}
)

// stripManagedFields is the transform of the controller's own informers:
// it drops an object's managedFields and kubectl's last applied
// configuration (a second copy of the spec, or of a Secret's data, that
// nothing here reads), and keeps every other annotation (see
// trimCaches). Status is written through the status subresource,
// which keeps the stored metadata whatever the cached copy holds.
func stripManagedFields(obj any) (any, error) {
	if acc, err := meta.Accessor(obj); err == nil {
		acc.SetManagedFields(nil)
		if _, ok := acc.GetAnnotations()[corev1.LastAppliedConfigAnnotation]; ok {
			annotations := maps.Clone(acc.GetAnnotations())
			delete(annotations, corev1.LastAppliedConfigAnnotation)
			acc.SetAnnotations(annotations)
		}
	}
	return obj, nil
}

// stripNameMetadata is the transform of the name caches, which hold the
// metadata of every claim, DataVolume and VM of the watched namespaces
// (those every migration that ever ran there left included) and are read
// for names and the migration UID label (foreign), and, of what a
// migration made, for that migration and the source it copied (copies.go):
// it keeps those alone, as a nameEntry, or a madeEntry for an object that
// carries more of a migration than its UID label.
func stripNameMetadata(obj any) (any, error) {
	o, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	e := nameEntry{namespace: o.Namespace, name: o.Name, migrationUID: string(v1alpha1.MigrationUIDOf(o))}
	if mark, ok := madeMarkOf(o); ok {
		return &madeEntry{nameEntry: e, mark: mark}, nil
	}
	return &e, nil
}

// nameEntry is what a name cache holds of an object: its namespace, its
// name, and the value of its migration UID label ("" when no migration
// made it): 48 bytes and three strings, where the object's metadata would
// take a few hundred. It gives what reads it (the informer's keys and
// namespace index, foreign) that metadata through meta.Accessor.
type nameEntry struct{ namespace, name, migrationUID string }

// GetObjectMeta implements metav1.ObjectMetaAccessor.
func (e *nameEntry) GetObjectMeta() metav1.Object {
	m := &metav1.ObjectMeta{Namespace: e.namespace, Name: e.name}
	if e.migrationUID != "" {
		m.Labels = map[string]string{v1alpha1.LabelMigrationUID: e.migrationUID}
	}
	return m
}

// madeEntry is what a name cache holds of an object that carries more of
// the migration that made it than its UID label (a migrated VM, or what a
// deleted migration handed over): a nameEntry and its madeMark (96 bytes
// in all), read through markOf.
type madeEntry struct {
	nameEntry
	mark madeMark
}

// foreign reports whether an object of that resource and name exists in
// ns and is not m's.
func (c *Controller) foreign(m *v1alpha1.VirtualMachineMigration, gvr schema.GroupVersionResource, name string) (bool, error) {
	informer, ok := c.names[gvr.Resource]
	if !ok {
		return false, fmt.Errorf("no name cache of %s", gvr.Resource)
	}
	obj, exists, err := informer.GetIndexer().GetByKey(m.Namespace + "/" + name)
	if err != nil || !exists {
		return false, err
	}
	acc, err := meta.Accessor(obj)
	if err != nil {
		return false, fmt.Errorf("reading %s %s from the cache: %w", gvr.Resource, name, err)
	}
	return v1alpha1.MigrationUIDOf(acc) != m.UID, nil
}

// takenNames checks every name the migration will create: its target VM,
// its staging claims, its DataVolumes (and the claims CDI gives them the
// same names). It returns whether the VM's name is taken, and the others
// taken as "Kind/name".
func (c *Controller) takenNames(m *v1alpha1.VirtualMachineMigration, inv *v1alpha1.SourceInventory, target string) (bool, []string, error) {
	vmTaken, err := c.foreign(m, vmsResource, target)
	if err != nil {
		return false, nil, err
	}
	var taken []string
	check := func(gvr schema.GroupVersionResource, kind, name string) error {
		t, err := c.foreign(m, gvr, name)
		if t {
			taken = append(taken, kind+"/"+name)
		}
		return err
	}
	for i, d := range inv.Disks {
		dv := naming.DataVolume(target, i)
		for _, err := range []error{
			check(claimsResource, "PersistentVolumeClaim", naming.StagingClaim(m.Name, d.Key)),
			check(dataVolumesResource, "DataVolume", dv),
			check(claimsResource, "PersistentVolumeClaim", dv),
		} {
			if err != nil && !apierrors.IsNotFound(err) {
				return false, nil, err
			}
		}
	}
	return vmTaken, taken, nil
}
