package pipeline

import (
	"errors"
	"fmt"
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
)

const mib = int64(1) << 20

// StagingSize is the capacity of a disk's staging volume: the disk's
// capacity plus overheadPercent, rounded up to a whole MiB.
func StagingSize(capacityBytes int64, overheadPercent int32) (int64, error) {
	if capacityBytes <= 0 {
		return 0, fmt.Errorf("disk capacity %d is not positive", capacityBytes)
	}
	if overheadPercent < 0 {
		overheadPercent = 0
	}
	pct := int64(100 + overheadPercent)
	if capacityBytes > (math.MaxInt64-99)/pct-mib {
		return 0, fmt.Errorf("disk capacity %d is too large", capacityBytes)
	}
	size := (capacityBytes*pct + 99) / 100
	return (size + mib - 1) / mib * mib, nil
}

// stagingClaimName is the staging volume of a disk: the name recorded in
// status, or the deterministic one.
func stagingClaimName(m *v1alpha1.VirtualMachineMigration, d v1alpha1.DiskStatus) string {
	if d.StagingClaim != "" {
		return d.StagingClaim
	}
	return naming.StagingClaim(m.Name, d.Key)
}

// RenderStagingClaims renders one staging volume per status.disks entry:
// Filesystem mode, ReadWriteOnce, sized from the disk's capacity plus the
// staging overhead, on the staging storage class, annotated as KubeVirt
// content, controlled by the migration.
func RenderStagingClaims(m *v1alpha1.VirtualMachineMigration) ([]*corev1.PersistentVolumeClaim, error) {
	if len(m.Status.Disks) == 0 {
		return nil, errors.New("no disks recorded in status.disks yet")
	}
	spec := specInForce(m)
	fs := corev1.PersistentVolumeFilesystem
	var out []*corev1.PersistentVolumeClaim
	for _, d := range m.Status.Disks {
		size, err := StagingSize(d.CapacityBytes, spec.Staging.OverheadPercent())
		if err != nil {
			return nil, fmt.Errorf("sizing the staging volume of disk %d: %w", d.Key, err)
		}
		pvc := &corev1.PersistentVolumeClaim{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
			ObjectMeta: childMeta(m, stagingClaimName(m, d), v1alpha1.ComponentStaging, true),
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				VolumeMode:  &fs,
				Resources: corev1.VolumeResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(size, resource.BinarySI)},
				},
			},
		}
		pvc.Annotations = map[string]string{AnnotationContentType: ContentTypeKubeVirt}
		if sc := spec.Staging.StorageClassName; sc != "" {
			pvc.Spec.StorageClassName = &sc
		}
		out = append(out, pvc)
	}
	return out, nil
}
