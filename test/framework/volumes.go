package framework

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LocalPersistentVolume is a `local` PersistentVolume on dir of node, of
// class storageClass: the kubelet bind-mounts dir into pods and applies
// their fsGroup to it (a hostPath volume ignores fsGroup), as it would for
// a CSI volume.
func LocalPersistentVolume(name, dir, node, capacity, storageClass string) (*corev1.PersistentVolume, error) {
	size, err := resource.ParseQuantity(capacity)
	if err != nil {
		return nil, fmt.Errorf("capacity %q: %w", capacity, err)
	}
	fs := corev1.PersistentVolumeFilesystem
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			VolumeMode:                    &fs,
			StorageClassName:              storageClass,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: dir}},
			NodeAffinity:                  NodeAffinity(node),
		},
	}, nil
}

// NodeAffinity is the volume node affinity that pins a volume to node.
func NodeAffinity(node string) *corev1.VolumeNodeAffinity {
	return &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
	}}}}
}
