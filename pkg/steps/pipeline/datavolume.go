package pipeline

import (
	"errors"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// RenderDataVolumes renders one DataVolume per disk, in source order: a
// clone of the disk's staging volume into the mapped storage, through
// spec.storage without a size (CDI infers it from the image, the staging
// volume being KubeVirt content), bound at once, labelled for the
// migration and owned by nothing (the VM adopts them).
func RenderDataVolumes(m *v1alpha1.VirtualMachineMigration) ([]*cdiv1.DataVolume, error) {
	if _, err := recordedDisks(m, true); err != nil {
		return nil, err
	}
	spec := m.SpecInForce()
	var out []*cdiv1.DataVolume
	for _, d := range m.Status.Disks {
		var src *v1alpha1.SourceDisk
		if m.Status.Source != nil {
			src = sourceDisk(m.Status.Source, d.Key)
		}
		if src == nil {
			src = &v1alpha1.SourceDisk{Key: d.Key}
		}
		st := StorageTargetFor(spec, src)
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
