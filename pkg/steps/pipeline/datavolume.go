package pipeline

import (
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// targetName is the target VM's name recorded in status.
func targetName(m *v1alpha1.VirtualMachineMigration) (string, error) {
	if m.Status.Target == nil || m.Status.Target.Name == "" {
		return "", errors.New("no target VM name recorded in status.target yet")
	}
	return m.Status.Target.Name, nil
}

// StorageTargetFor resolves where a disk lands: the per-disk entry, else
// the disk's datastore's entry, else the default, else the cluster default.
func StorageTargetFor(spec *v1alpha1.VirtualMachineMigrationSpec, disk *v1alpha1.SourceDisk) v1alpha1.StorageTarget {
	s := spec.Target.Storage
	for _, e := range s.Disks {
		if disk != nil && e.DiskKey == disk.Key {
			return e.Target
		}
	}
	for _, e := range s.Datastores {
		if disk != nil && e.Datastore == disk.Datastore {
			return e.Target
		}
	}
	if s.Default != nil {
		return *s.Default
	}
	return v1alpha1.StorageTarget{}
}

// diskStorageTarget is where a recorded disk lands (StorageTargetFor its
// inventoried disk, by key).
func diskStorageTarget(m *v1alpha1.VirtualMachineMigration, d v1alpha1.DiskStatus) v1alpha1.StorageTarget {
	src := &v1alpha1.SourceDisk{Key: d.Key}
	if m.Status.Source != nil {
		if found := sourceDisk(m.Status.Source, d.Key); found != nil {
			src = found
		}
	}
	return StorageTargetFor(m.SpecInForce(), src)
}

// RenderDataVolumes renders one DataVolume per disk, in source order,
// labelled for the migration and owned by nothing (the VM adopts them).
// A disk written in place gets a DataVolume that adopts its claim (one of
// claims, by name: the claim the transfer wrote and the conversion
// converted), with no copy. A disk of the clone path gets a clone of its
// staging volume into the mapped storage, through spec.storage without a
// size (CDI infers it from the image, the staging volume being KubeVirt
// content), bound at once.
func RenderDataVolumes(m *v1alpha1.VirtualMachineMigration, claims []*corev1.PersistentVolumeClaim) ([]*cdiv1.DataVolume, error) {
	if _, err := recordedDisks(m, true); err != nil {
		return nil, err
	}
	var out []*cdiv1.DataVolume
	for _, d := range m.Status.Disks {
		if d.WrittenInPlace() {
			i := slices.IndexFunc(claims, func(c *corev1.PersistentVolumeClaim) bool { return c.Name == d.StagingClaim })
			if i < 0 {
				return nil, fmt.Errorf("disk %d: its claim %s/%s is not there to adopt", d.Key, m.Namespace, d.StagingClaim)
			}
			out = append(out, adoptingDataVolume(m, d, claims[i]))
			continue
		}
		st := diskStorageTarget(m, d)
		storage := &cdiv1.StorageSpec{}
		if st.StorageClassName != "" {
			sc := st.StorageClassName
			storage.StorageClassName = &sc
		}
		if st.VolumeMode != nil {
			mode := *st.VolumeMode
			storage.VolumeMode = &mode
		}
		if len(st.AccessModes) > 0 {
			storage.AccessModes = append([]corev1.PersistentVolumeAccessMode(nil), st.AccessModes...)
		}
		dv := &cdiv1.DataVolume{
			TypeMeta:   metav1.TypeMeta{APIVersion: cdiv1.SchemeGroupVersion.String(), Kind: "DataVolume"},
			ObjectMeta: childMeta(m, d.DataVolume, v1alpha1.ComponentImport, false),
			Spec: cdiv1.DataVolumeSpec{
				Source: &cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{
					Namespace: m.Namespace, Name: d.StagingClaim}},
				Storage:     storage,
				ContentType: cdiv1.DataVolumeKubeVirt,
			},
		}
		dv.Annotations = map[string]string{AnnotationBindImmediate: "true"}
		out = append(out, dv)
	}
	return out, nil
}

// AnnotationAllowClaimAdoption lets a DataVolume take the claim of its
// name that exists before it (CDI's cdi.kubevirt.io/allowClaimAdoption,
// which wins over CDI's ClaimAdoption feature gate): CDI marks it
// Succeeded without a pod and makes itself the claim's controller.
const AnnotationAllowClaimAdoption = "cdi.kubevirt.io/allowClaimAdoption"

// adoptingDataVolume is the DataVolume that adopts a disk's claim: a
// blank source (nothing is imported: CDI adopts a claim it finds instead
// of making one) and the claim's own storage class, modes and size.
func adoptingDataVolume(m *v1alpha1.VirtualMachineMigration, d v1alpha1.DiskStatus, claim *corev1.PersistentVolumeClaim) *cdiv1.DataVolume {
	storage := &cdiv1.StorageSpec{
		AccessModes: slices.Clone(claim.Spec.AccessModes),
		Resources:   corev1.VolumeResourceRequirements{Requests: claim.Spec.Resources.Requests.DeepCopy()},
	}
	if sc := claim.Spec.StorageClassName; sc != nil {
		storage.StorageClassName = ptr.To(*sc)
	}
	if mode := claim.Spec.VolumeMode; mode != nil {
		storage.VolumeMode = ptr.To(*mode)
	}
	dv := &cdiv1.DataVolume{
		TypeMeta:   metav1.TypeMeta{APIVersion: cdiv1.SchemeGroupVersion.String(), Kind: "DataVolume"},
		ObjectMeta: childMeta(m, d.DataVolume, v1alpha1.ComponentImport, false),
		Spec: cdiv1.DataVolumeSpec{
			Source:      &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}},
			Storage:     storage,
			ContentType: cdiv1.DataVolumeKubeVirt,
		},
	}
	dv.Annotations = map[string]string{AnnotationAllowClaimAdoption: "true"}
	return dv
}
