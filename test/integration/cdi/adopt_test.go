//go:build integration

package cdi

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"platform.example/vm-migration/test/framework/localpath"
	"platform.example/vm-migration/test/vcsimlocal"
)

// annAllowClaimAdoption is CDI's DataVolume annotation that lets a
// DataVolume take a claim of its name that exists before it
// (cdi.kubevirt.io/allowClaimAdoption; CDI's common.AllowClaimAdoption:
// it wins over the ClaimAdoption feature gate).
const annAllowClaimAdoption = "cdi.kubevirt.io/allowClaimAdoption"

// TestRealCDIAdoptsAClaimWrittenBeforeIt is the mechanism of the one-pass
// data path (issue "Downtime: the outage costs one pass"): a claim of the
// local-path class that a pod wrote before any DataVolume existed (as the
// transfer would write the VM's disk into it), then a DataVolume of the
// claim's name with CDI's claim-adoption annotation and a blank source.
// CDI's webhook admits it although its claim exists, CDI's controller
// marks it Succeeded without running a pod, makes itself the claim's
// controlling owner and leaves the bytes alone; the claim is the one the
// pod wrote (same UID). Deleting the DataVolume then deletes the claim
// (the garbage collector follows CDI's owner reference), which is what a
// rollback before the VM exists relies on.
func TestRealCDIAdoptsAClaimWrittenBeforeIt(t *testing.T) {
	env := localPathEnv(t)
	cs := env.Kubernetes(t)
	dc := env.Dynamic(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	const name = "adopted-disk"

	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			VolumeMode:       ptr.To(corev1.PersistentVolumeFilesystem),
			StorageClassName: ptr.To(localpath.StorageClass),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("16Mi")}},
		},
	}
	created, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim, metav1.CreateOptions{})
	require.NoError(t, err, "creating the claim")
	writer := writerPod(ns, "writer", name, "head -c 8388608 /dev/urandom > /data/disk.img")
	_, err = cs.CoreV1().Pods(ns).Create(ctx, writer, metav1.CreateOptions{})
	require.NoError(t, err, "creating the writer pod")
	waitPodSucceeded(t, cs, ns, "writer", 2*time.Minute)
	require.NoError(t, cs.CoreV1().Pods(ns).Delete(ctx, "writer", metav1.DeleteOptions{}))
	c, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, corev1.ClaimBound, c.Status.Phase, "the claim once its writer ran")
	pv, err := cs.CoreV1().PersistentVolumes().Get(ctx, c.Spec.VolumeName, metav1.GetOptions{})
	require.NoError(t, err, "the claim's volume")
	require.NotNil(t, pv.Spec.Local, "a local-path volume")
	image := filepath.Join(pv.Spec.Local.Path, "disk.img")
	before, err := vcsimlocal.FileSHA256(image)
	require.NoError(t, err)

	seen := watchPods(t, cs, ns)
	dv := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume",
		"metadata": map[string]any{"name": name, "namespace": ns, "annotations": map[string]any{annAllowClaimAdoption: "true"}},
		"spec": map[string]any{
			"source": map[string]any{"blank": map[string]any{}},
			"storage": map[string]any{
				"accessModes": []any{"ReadWriteOnce"}, "volumeMode": "Filesystem", "storageClassName": localpath.StorageClass,
				"resources": map[string]any{"requests": map[string]any{"storage": "16Mi"}},
			},
		},
	}}
	start := time.Now()
	_, err = dc.Resource(dataVolumes).Namespace(ns).Create(ctx, dv, metav1.CreateOptions{})
	require.NoError(t, err, "CDI's webhooks admit a DataVolume whose claim exists, with the adoption annotation")
	got := waitDataVolume(t, dc, cs, ns, name, 2*time.Minute)
	t.Logf("DataVolume Succeeded %s after its creation; CDI's pods in the namespace: %v", time.Since(start).Round(time.Millisecond), seen())
	assert.Empty(t, seen(), "CDI ran no pod for an adopted claim")

	c, err = cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err, "the adopted claim")
	assert.Equal(t, created.UID, c.UID, "the claim the writer wrote, not a new one")
	owner := metav1.GetControllerOf(c)
	if assert.NotNil(t, owner, "CDI made the DataVolume the claim's controller: %v", c.OwnerReferences) {
		assert.Equal(t, "DataVolume", owner.Kind)
		assert.Equal(t, got.GetUID(), owner.UID, "the owner is the DataVolume")
	}
	t.Logf("the adopted claim's annotations: %v", c.Annotations)
	after, err := vcsimlocal.FileSHA256(image)
	require.NoError(t, err)
	assert.Equal(t, before, after, "the bytes the writer left")

	// The DataVolume owns the claim now: deleting it deletes the claim.
	require.NoError(t, dc.Resource(dataVolumes).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{}))
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	require.NoError(t, err, "the adopted claim deleted with its DataVolume\n%s", describeNamespace(cs, ns))
}
