package pipeline

import (
	"errors"
	"fmt"
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
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

// recordedDisks returns status.disks once every disk carries the names of
// its children (its staging claim, and with dataVolumes its DataVolume):
// the state machine records each name in status before the action that
// creates it, and rendering reads it from there.
func recordedDisks(m *v1alpha1.VirtualMachineMigration, dataVolumes bool) ([]v1alpha1.DiskStatus, error) {
	if len(m.Status.Disks) == 0 {
		return nil, errors.New("no disks recorded in status.disks yet")
	}
	for _, d := range m.Status.Disks {
		if d.StagingClaim == "" || (dataVolumes && d.DataVolume == "") {
			return nil, fmt.Errorf("disk %d: its child names are not recorded in status.disks yet", d.Key)
		}
	}
	return m.Status.Disks, nil
}

// RenderStagingClaims renders one staging volume per status.disks entry:
// Filesystem mode, ReadWriteOnce, sized from the disk's capacity plus the
// staging overhead, on the staging storage class, annotated as KubeVirt
// content, controlled by the migration.
func RenderStagingClaims(m *v1alpha1.VirtualMachineMigration) ([]*corev1.PersistentVolumeClaim, error) {
	if _, err := recordedDisks(m, false); err != nil {
		return nil, err
	}
	spec := m.SpecInForce()
	fs := corev1.PersistentVolumeFilesystem
	var out []*corev1.PersistentVolumeClaim
	for _, d := range m.Status.Disks {
		size, err := StagingSize(d.CapacityBytes, spec.Staging.OverheadPercent())
		if err != nil {
			return nil, fmt.Errorf("sizing the staging volume of disk %d: %w", d.Key, err)
		}
		pvc := &corev1.PersistentVolumeClaim{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
			ObjectMeta: childMeta(m, d.StagingClaim, v1alpha1.ComponentStaging, true),
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
