package pipeline

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/steps"
)

// CDI annotations.
const (
	// AnnotationContentType marks a staging volume as holding a KubeVirt
	// disk image (disk.img at its root): CDI then sizes clones from the image.
	AnnotationContentType = "cdi.kubevirt.io/storage.contentType"
	// ContentTypeKubeVirt is the value of AnnotationContentType.
	ContentTypeKubeVirt = "kubevirt"
	// AnnotationBindImmediate asks CDI to bind a DataVolume's claim at once
	// instead of waiting for a first consumer (the VM is created halted).
	AnnotationBindImmediate = "cdi.kubevirt.io/storage.bind.immediate.requested"
)

// strictCreate and strictPatch ask the API server for strict field
// validation: a field the schema does not know (misspelt, misplaced, or not
// in the installed version of the API) fails the request instead of being
// dropped with a warning.
var (
	strictCreate = metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}
	strictPatch  = metav1.PatchOptions{FieldValidation: metav1.FieldValidationStrict}
)

// StagingUID is the user and group the transfer and conversion pods run as,
// and the fsGroup of their volumes. virt-v2v images run as 107 (qemu), and
// the conversion rewrites in place the image the transfer wrote: both must
// see the same owner.
const StagingUID int64 = 107

// childLabels are the labels every child of m carries.
func childLabels(m *v1alpha1.VirtualMachineMigration, component string) map[string]string {
	return map[string]string{
		v1alpha1.LabelMigrationUID:  string(m.UID),
		v1alpha1.LabelMigrationName: m.Name,
		v1alpha1.LabelComponent:     component,
	}
}

// childMeta is the metadata of a child of m; controlled children carry a
// controller owner reference to the migration.
func childMeta(m *v1alpha1.VirtualMachineMigration, name, component string, controlled bool) metav1.ObjectMeta {
	meta := metav1.ObjectMeta{Name: name, Namespace: m.Namespace, Labels: childLabels(m, component)}
	if controlled {
		meta.OwnerReferences = []metav1.OwnerReference{migrationOwner(m)}
	}
	return meta
}

// migrationOwner is the controller owner reference to the migration.
func migrationOwner(m *v1alpha1.VirtualMachineMigration) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{
		APIVersion:         v1alpha1.SchemeGroupVersion.String(),
		Kind:               "VirtualMachineMigration",
		Name:               m.Name,
		UID:                m.UID,
		Controller:         &yes,
		BlockOwnerDeletion: &yes,
	}
}

// ours reports whether an object carries the migration's UID label.
func ours(obj metav1.Object, uid types.UID) bool {
	return uid != "" && obj.GetLabels()[v1alpha1.LabelMigrationUID] == string(uid)
}

// creator is a typed client of one kind, as client-go generates them.
type creator[T metav1.Object] interface {
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
}

// createIfAbsent creates obj; AlreadyExists is success when the existing
// object carries the migration's UID label, and an error naming the
// foreign object otherwise.
func createIfAbsent[T metav1.Object](ctx context.Context, m *v1alpha1.VirtualMachineMigration, kind string, api creator[T], obj T) error {
	name := obj.GetName()
	_, err := api.Create(ctx, obj, strictCreate)
	if err == nil {
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating %s %s/%s: %w", kind, m.Namespace, name, err)
	}
	existing, gerr := api.Get(ctx, name, metav1.GetOptions{})
	if gerr != nil {
		return fmt.Errorf("creating %s %s/%s: it exists but reading it failed: %w", kind, m.Namespace, name, gerr)
	}
	if !ours(existing, m.UID) {
		return &statemachine.ObservedError{Class: statemachine.ErrorPermanent, Reason: steps.ReasonNameTaken,
			Message: fmt.Sprintf("%s %s/%s exists and does not belong to migration %s (label %s=%q): delete or rename it",
				kind, m.Namespace, name, m.Name, v1alpha1.LabelMigrationUID, existing.GetLabels()[v1alpha1.LabelMigrationUID])}
	}
	return nil
}
