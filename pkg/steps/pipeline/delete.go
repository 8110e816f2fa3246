package pipeline

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
)

// Delete deletes the observed objects in order. Each is deleted only when
// its ref says it carries this migration's UID label, and with its
// observed UID as a precondition, so that an object created since under
// the same name (by anyone) survives. An object already gone, or replaced,
// is skipped: the next observation shows what is left.
func (s *Step) Delete(ctx context.Context, m *v1alpha1.VirtualMachineMigration, objects []statemachine.ObjectRef) error {
	for _, ref := range objects {
		if m.UID == "" || ref.MigrationUID != m.UID || ref.UID == "" {
			return fmt.Errorf("refusing to delete %s %s/%s: it was not observed as an object of migration %s (uid %q)",
				ref.Kind, m.Namespace, ref.Name, m.Name, m.UID)
		}
		err := s.deleteOne(ctx, m.Namespace, ref, deleteOptions(ref))
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting %s %s/%s: %w", ref.Kind, m.Namespace, ref.Name, err)
		}
	}
	return nil
}

// deleteOptions deletes exactly the observed object. A Job's pods are
// deleted in the foreground: the Job stays (being deleted) until its pods
// are gone, so that while a pod of an attempt may still run its Job is
// seen, and no next attempt starts beside it (statemachine's
// earlierAttemptRuns). Other kinds' dependents go in the background.
func deleteOptions(ref statemachine.ObjectRef) metav1.DeleteOptions {
	propagation := metav1.DeletePropagationBackground
	if ref.Kind == statemachine.KindJob {
		propagation = metav1.DeletePropagationForeground
	}
	uid := ref.UID
	return metav1.DeleteOptions{PropagationPolicy: &propagation, Preconditions: &metav1.Preconditions{UID: &uid}}
}

// deleteOne sends the delete of one object through the client of its kind.
func (s *Step) deleteOne(ctx context.Context, ns string, ref statemachine.ObjectRef, opts metav1.DeleteOptions) error {
	switch ref.Kind {
	case statemachine.KindPersistentVolumeClaim:
		return s.Kube.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, ref.Name, opts)
	case statemachine.KindJob:
		return s.Kube.BatchV1().Jobs(ns).Delete(ctx, ref.Name, opts)
	case statemachine.KindConfigMap:
		return s.Kube.CoreV1().ConfigMaps(ns).Delete(ctx, ref.Name, opts)
	case statemachine.KindServiceAccount:
		return s.Kube.CoreV1().ServiceAccounts(ns).Delete(ctx, ref.Name, opts)
	case statemachine.KindRole:
		return s.Kube.RbacV1().Roles(ns).Delete(ctx, ref.Name, opts)
	case statemachine.KindRoleBinding:
		return s.Kube.RbacV1().RoleBindings(ns).Delete(ctx, ref.Name, opts)
	case statemachine.KindDataVolume:
		return s.CDI.CdiV1beta1().DataVolumes(ns).Delete(ctx, ref.Name, opts)
	case statemachine.KindVirtualMachine:
		return s.KubeVirt.KubevirtV1().VirtualMachines(ns).Delete(ctx, ref.Name, opts)
	}
	return fmt.Errorf("unknown kind %q", ref.Kind)
}
