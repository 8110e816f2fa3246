package standins

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

func TestLauncherPod(t *testing.T) {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	vmi.Name, vmi.Namespace, vmi.UID = "web-01", "ns", "uid-1"
	vmi.Labels = map[string]string{"migration.platform.example/uid": "m-1"}
	vmi.Spec.TerminationGracePeriodSeconds = ptr.To(int64(20))
	vmi.Spec.Volumes = []kubevirtv1.Volume{
		{Name: "disk-0", VolumeSource: kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: "web-01-disk-0"}}},
		{Name: "data", VolumeSource: kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
			PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "extra"}}}},
	}
	k := &KubeVirt{cfg: Config{LauncherImage: "launcher:local"}}
	pod, err := k.launcherPod(vmi)
	require.NoError(t, err, "rendering the launcher pod")
	assert.Equal(t, "virt-launcher-web-01", pod.Name, "the pod's name")
	assert.Equal(t, map[string]string{"migration.platform.example/uid": "m-1", "kubevirt.io": "virt-launcher",
		"kubevirt.io/created-by": "uid-1", "vm.kubevirt.io/name": "web-01"}, pod.Labels, "the instance's labels and virt-launcher's")
	if c := pod.OwnerReferences; assert.Len(t, c, 1, "owners") {
		assert.Equal(t, "VirtualMachineInstance", c[0].Kind, "the controller's kind")
		assert.Equal(t, vmi.UID, c[0].UID, "the controller's UID")
		assert.True(t, *c[0].Controller, "a controller reference")
	}
	assert.Equal(t, ptr.To(int64(35)), pod.Spec.TerminationGracePeriodSeconds, "the instance's grace and KubeVirt's margin")
	assert.Nil(t, pod.Spec.RuntimeClassName, "no RuntimeClass: TCG")
	sc := pod.Spec.SecurityContext
	assert.Equal(t, ptr.To(int64(107)), sc.RunAsUser, "the pod's user")
	assert.Equal(t, ptr.To(int64(107)), sc.FSGroup, "the pod's fsGroup (the claims' disks go to QEMU's group)")
	assert.Equal(t, ptr.To(true), sc.RunAsNonRoot, "non-root")
	c := pod.Spec.Containers[0]
	assert.Equal(t, "compute", c.Name, "the container's name")
	assert.Equal(t, []string{"--accel=tcg", "--shutdown-timeout=20s"}, c.Args, "the launcher's arguments")
	assert.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop, "no capability")
	assert.Equal(t, ptr.To(false), c.SecurityContext.AllowPrivilegeEscalation, "no privilege escalation")
	var mounts []string
	for _, m := range c.VolumeMounts {
		mounts = append(mounts, m.MountPath)
	}
	assert.Equal(t, []string{"/var/run/kubevirt", "/var/run/kubevirt-private/vmi-disks/disk-0", "/var/run/kubevirt-private/vmi-disks/data"}, mounts, "mounts")
	assert.Equal(t, "web-01-disk-0", pod.Spec.Volumes[1].PersistentVolumeClaim.ClaimName, "the DataVolume's claim")
	assert.Equal(t, "extra", pod.Spec.Volumes[2].PersistentVolumeClaim.ClaimName, "the claim")
	var got kubevirtv1.VirtualMachineInstance
	require.NoError(t, json.Unmarshal([]byte(c.Env[0].Value), &got), "the instance the launcher gets")
	assert.Equal(t, vmi.UID, got.UID, "its UID")
	assert.Equal(t, vmi.Spec, got.Spec, "its spec")

	vmi.Annotations = map[string]string{AnnotationLauncherRuntimeClass: "kvm"}
	pod, err = k.launcherPod(vmi)
	require.NoError(t, err, "rendering the launcher pod")
	assert.Equal(t, ptr.To("kvm"), pod.Spec.RuntimeClassName, "the annotation's RuntimeClass")
	assert.Equal(t, "--accel=kvm", pod.Spec.Containers[0].Args[0], "KVM")
}
