package pipeline

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// AnnotationDefaultStorageClass marks the cluster's default storage class.
const AnnotationDefaultStorageClass = "storageclass.kubernetes.io/is-default-class"

// claimDefaults reads what the cluster gives the target claims of m's
// disks written in place whose storage mapping leaves their modes open:
// CDI's StorageProfiles (cached a minute for all migrations) and, where a
// disk's mapping names no class either, the default storage class.
func (s *Step) claimDefaults(ctx context.Context, m *v1alpha1.VirtualMachineMigration) (ClaimDefaults, error) {
	var out ClaimDefaults
	if !modesOpen(m) {
		return out, nil
	}
	profiles, err := s.StorageProfiles(ctx)
	if err != nil {
		return out, err
	}
	out.Profiles = profiles
	if profiles == nil || !classOpen(m) {
		return out, nil
	}
	classes, err := s.storageClasses(ctx)
	if err != nil {
		return out, err
	}
	for _, sc := range classes {
		if sc.Annotations[AnnotationDefaultStorageClass] == "true" {
			out.DefaultClass = sc.Name
		}
	}
	return out, nil
}

// storageClasses lists the cluster's storage classes from the cache, else
// from the API server (none when that is forbidden).
func (s *Step) storageClasses(ctx context.Context) ([]*storagev1.StorageClass, error) {
	if s.StorageClasses != nil {
		classes, err := s.StorageClasses.List(labels.Everything())
		if err != nil {
			return nil, fmt.Errorf("listing storage classes for the default one: %w", err)
		}
		return classes, nil
	}
	list, err := s.Kube.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsForbidden(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("listing storage classes for the default one: %w", err)
	}
	classes := make([]*storagev1.StorageClass, 0, len(list.Items))
	for i := range list.Items {
		classes = append(classes, &list.Items[i])
	}
	return classes, nil
}

// modesOpen reports whether a disk written in place has a mapping that
// names no access modes or no volume mode.
func modesOpen(m *v1alpha1.VirtualMachineMigration) bool {
	return anyInPlaceTarget(m, func(st v1alpha1.StorageTarget) bool { return len(st.AccessModes) == 0 || st.VolumeMode == nil })
}

// classOpen reports whether a disk written in place has a mapping that
// names no storage class.
func classOpen(m *v1alpha1.VirtualMachineMigration) bool {
	return anyInPlaceTarget(m, func(st v1alpha1.StorageTarget) bool { return st.StorageClassName == "" })
}

// anyInPlaceTarget reports whether the storage target of a disk written
// in place matches.
func anyInPlaceTarget(m *v1alpha1.VirtualMachineMigration, match func(v1alpha1.StorageTarget) bool) bool {
	for _, d := range m.Status.Disks {
		if d.WrittenInPlace() && match(diskStorageTarget(m, d)) {
			return true
		}
	}
	return false
}

// targetClaims are the claims of m's disks written in place, as the cache
// has them: only m's own (its UID label), never one being deleted.
func (s *Step) targetClaims(m *v1alpha1.VirtualMachineMigration) []*corev1.PersistentVolumeClaim {
	var out []*corev1.PersistentVolumeClaim
	for _, d := range m.Status.Disks {
		if !d.WrittenInPlace() {
			continue
		}
		pvc, err := s.Listers.Claims.PersistentVolumeClaims(m.Namespace).Get(d.StagingClaim)
		if err == nil && ours(pvc, m.UID) && pvc.DeletionTimestamp == nil {
			out = append(out, pvc)
		}
	}
	return out
}
