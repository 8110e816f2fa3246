//go:build integration

package node

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"platform.example/vm-migration/test/framework"
	"platform.example/vm-migration/test/integration/node/probereport"
	"platform.example/vm-migration/test/standins"
)

// TestStorageStandinVolumesMountOnTheNode: with LocalVolumeNode, the
// storage stand-in backs a claim with a local volume on the node, which
// the kubelet mounts into a restricted pod and gives to its fsGroup; the
// bytes the pod wrote are in the folder ClaimDir names.
func TestStorageStandinVolumesMountOnTheNode(t *testing.T) {
	env := framework.Env(t)
	cs := env.Kubernetes(t)
	importProbe(t, env)
	ns := restrictedNamespace(t, env, cs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := standins.Config{RestConfig: env.Config(), Root: t.TempDir(), Namespace: ns, LocalVolumeNode: env.NodeName()}
	storage, err := standins.NewStorage(cfg)
	require.NoError(t, err, "creating the storage stand-in")
	require.NoError(t, storage.EnsureStorageClass(ctx), "creating the stand-in's storage class")
	t.Cleanup(func() {
		_ = cs.StorageV1().StorageClasses().Delete(context.Background(), standins.DefaultStorageClass, metav1.DeleteOptions{})
	})
	done := make(chan error, 1)
	go func() { done <- storage.Run(ctx) }()
	defer func() { cancel(); <-done }()

	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "staging", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(standins.DefaultStorageClass),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")}},
		},
	}
	_, err = cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{})
	require.NoError(t, err, "creating the claim")
	var dir string
	require.Eventually(t, func() bool {
		dir, err = standins.ClaimDir(ctx, cfg, ns, "staging")
		return err == nil
	}, 30*time.Second, 50*time.Millisecond, "the claim bound to a stand-in volume: %v", err)
	c, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "staging", metav1.GetOptions{})
	require.NoError(t, err, "reading the claim")
	pv, err := cs.CoreV1().PersistentVolumes().Get(ctx, c.Spec.VolumeName, metav1.GetOptions{})
	require.NoError(t, err, "reading the volume")
	require.NotNil(t, pv.Spec.Local, "the stand-in's volume %s, want a local one", pv.Name)
	assert.Nil(t, pv.Spec.HostPath, "the stand-in's volume, want no hostPath")
	require.NotNil(t, pv.Spec.NodeAffinity, "the local volume's node affinity")

	pod := neverPullPod(ns, "writer", probeImage)
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "EMPTYDIR", Value: "/tmp"}, {Name: "VOLUME", Value: "/staging"}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "staging", MountPath: "/staging"}}
	pod.Spec.Volumes = []corev1.Volume{{Name: "staging", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "staging"}}}}
	_, err = cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err, "creating the writer pod")
	ended := waitPod(t, cs, ns, "writer", time.Minute, "ends", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	})
	require.Equal(t, corev1.PodSucceeded, ended.Status.Phase, "writer pod; status %+v", ended.Status)
	var r probereport.Report
	require.NoError(t, json.Unmarshal([]byte(ended.Status.ContainerStatuses[0].State.Terminated.Message), &r), "the writer's report")
	assert.Equal(t, "ok", r.VolumeWrite, "write to the stand-in's volume")
	assert.Equal(t, uint32(probeFSGroup), r.VolumeGID, "the volume's group, want the fsGroup")
	fi, err := os.Stat(filepath.Join(dir, "probe"))
	require.NoError(t, err, "the writer's file in ClaimDir %s", dir)
	assert.Equal(t, uint32(probeFSGroup), fi.Sys().(*syscall.Stat_t).Gid, "group of the writer's file")
}
