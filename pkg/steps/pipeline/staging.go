package pipeline

import (
	"errors"
	"fmt"
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/preflight"
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

// ClaimDefaults is what the cluster gives a claim whose storage mapping
// names no access modes or volume mode: CDI's StorageProfile of its class
// (the class the cluster defaults to when the mapping names none).
type ClaimDefaults struct {
	// DefaultClass is the cluster's default storage class, "" when it has
	// none or it was not read.
	DefaultClass string
	// Profiles are CDI's StorageProfiles by class; nil when unknown.
	Profiles map[string]preflight.StorageProfileFact
}

// RenderStagingClaims renders, per status.disks entry, the claim the
// transfer writes the disk into. A disk written in place gets the claim
// that becomes the VM's disk (renderTargetClaim); one of the clone path
// its staging volume: Filesystem mode, ReadWriteOnce, sized from the
// disk's capacity plus the staging overhead, on the staging storage
// class, annotated as KubeVirt content, controlled by the migration.
func RenderStagingClaims(m *v1alpha1.VirtualMachineMigration, defaults ClaimDefaults) ([]*corev1.PersistentVolumeClaim, error) {
	if _, err := recordedDisks(m, false); err != nil {
		return nil, err
	}
	spec := m.SpecInForce()
	fs := corev1.PersistentVolumeFilesystem
	var out []*corev1.PersistentVolumeClaim
	for _, d := range m.Status.Disks {
		if d.WrittenInPlace() {
			pvc, err := renderTargetClaim(m, d, defaults)
			if err != nil {
				return nil, err
			}
			out = append(out, pvc)
			continue
		}
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

// renderTargetClaim renders the claim a disk is written in place into,
// named as its DataVolume, which adopts it: in the storage class, volume
// mode and access modes the storage mapping names, else those of the
// class's StorageProfile (its first claim property set), else Filesystem
// and ReadWriteOnce. A Filesystem claim holds the image as disk.img, and
// is sized from the disk's capacity plus the staging overhead; a Block
// claim is the disk, its capacity rounded up to a whole MiB. It has no
// owner: CDI makes the DataVolume its controller when it adopts it, and
// the migration is none of its owners, so that a claim that outlives its
// DataVolume (one deleted with --cascade=orphan to keep the disk) never
// goes with the migration's deletion or its TTL; the migration's labels
// tie it to the migration for the deletes of a rollback before the VM
// exists (a migration whose finalizer is removed by force leaves it: a
// disk kept, never one lost).
func renderTargetClaim(m *v1alpha1.VirtualMachineMigration, d v1alpha1.DiskStatus, defaults ClaimDefaults) (*corev1.PersistentVolumeClaim, error) {
	spec := m.SpecInForce()
	st := diskStorageTarget(m, d)
	mode, access := claimProperties(st, defaults)
	size, err := StagingSize(d.CapacityBytes, spec.Staging.OverheadPercent())
	if mode == corev1.PersistentVolumeBlock {
		size, err = StagingSize(d.CapacityBytes, 0)
	}
	if err != nil {
		return nil, fmt.Errorf("sizing the claim of disk %d: %w", d.Key, err)
	}
	meta := childMeta(m, d.StagingClaim, v1alpha1.ComponentDisk, false)
	meta.OwnerReferences = nil
	pvc := &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: meta,
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: access,
			VolumeMode:  &mode,
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(size, resource.BinarySI)},
			},
		},
	}
	if mode == corev1.PersistentVolumeFilesystem {
		pvc.Annotations = map[string]string{AnnotationContentType: ContentTypeKubeVirt}
	}
	if sc := st.StorageClassName; sc != "" {
		pvc.Spec.StorageClassName = &sc
	}
	return pvc, nil
}

// claimProperties resolves a target claim's volume mode and access
// modes: the mapping's, else the StorageProfile's first claim property
// set (its access modes only where its volume mode is the one chosen),
// else Filesystem and ReadWriteOnce.
func claimProperties(st v1alpha1.StorageTarget, defaults ClaimDefaults) (corev1.PersistentVolumeMode, []corev1.PersistentVolumeAccessMode) {
	class := st.StorageClassName
	if class == "" {
		class = defaults.DefaultClass
	}
	profile := defaults.Profiles[class]
	mode := corev1.PersistentVolumeFilesystem
	switch {
	case st.VolumeMode != nil:
		mode = *st.VolumeMode
	case profile.VolumeMode != nil:
		mode = *profile.VolumeMode
	}
	switch {
	case len(st.AccessModes) > 0:
		return mode, slices.Clone(st.AccessModes)
	case len(profile.AccessModes) > 0 && (profile.VolumeMode == nil || *profile.VolumeMode == mode):
		return mode, slices.Clone(profile.AccessModes)
	}
	return mode, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
}
