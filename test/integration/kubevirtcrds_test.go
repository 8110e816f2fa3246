//go:build integration

package integration

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	cdiclient "platform.example/vm-migration/pkg/generated/cdi/clientset/versioned"
	kubevirtclient "platform.example/vm-migration/pkg/generated/kubevirt/clientset/versioned"
	"platform.example/vm-migration/test/framework"
)

// TestKubeVirtAndCDITestCRDs round-trips typed KubeVirt and CDI objects,
// as the controller builds them, through the test CRDs in test/crds and the
// project's generated clients, including their status subresources and
// kubectl short names, and shows the schemas are KubeVirt's real ones.
// (The VirtualMachineInstance, like KubeVirt's, has no status subresource.)
func TestKubeVirtAndCDITestCRDs(t *testing.T) {
	env := framework.Env(t)
	ns := env.Namespace(t)
	ctx := testContext(t)
	kv, err := kubevirtclient.NewForConfig(env.Config())
	require.NoError(t, err, "creating the KubeVirt clientset")
	cdi, err := cdiclient.NewForConfig(env.Config())
	require.NoError(t, err, "creating the CDI clientset")

	dv := &cdiv1beta1.DataVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "web-01-disk-0", Namespace: ns},
		Spec: cdiv1beta1.DataVolumeSpec{
			Source: &cdiv1beta1.DataVolumeSource{PVC: &cdiv1beta1.DataVolumeSourcePVC{Namespace: ns, Name: "web-01-staging-2000"}},
			Storage: &cdiv1beta1.StorageSpec{
				StorageClassName: ptr("ceph-rbd"),
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("20Gi")}},
			},
			ContentType: cdiv1beta1.DataVolumeKubeVirt,
		},
	}
	createdDV, err := cdi.CdiV1beta1().DataVolumes(ns).Create(ctx, dv, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
	require.NoError(t, err, "creating DataVolume")
	if src := createdDV.Spec.Source; assert.NotNil(t, src, "DataVolume source lost") && assert.NotNil(t, src.PVC, "DataVolume source lost: %+v", src) {
		assert.Equal(t, "web-01-staging-2000", src.PVC.Name, "DataVolume source lost: %+v", src)
	}
	createdDV.Status.Phase = cdiv1beta1.ImportInProgress
	createdDV.Status.Progress = "45.20%"
	createdDV.Spec.ContentType = cdiv1beta1.DataVolumeArchive
	afterStatus, err := cdi.CdiV1beta1().DataVolumes(ns).UpdateStatus(ctx, createdDV, metav1.UpdateOptions{})
	require.NoError(t, err, "updating DataVolume status")
	assert.Equal(t, cdiv1beta1.ImportInProgress, afterStatus.Status.Phase, "DataVolume status subresource: phase, want the status written")
	assert.Equal(t, cdiv1beta1.DataVolumeKubeVirt, afterStatus.Spec.ContentType, "DataVolume status subresource: contentType, want the spec left alone")

	runStrategy := kubevirtv1.RunStrategyAlways
	vm := &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "web-01", Namespace: ns},
		Spec: kubevirtv1.VirtualMachineSpec{
			RunStrategy: &runStrategy,
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
				Spec: kubevirtv1.VirtualMachineInstanceSpec{
					Domain: kubevirtv1.DomainSpec{
						CPU:    &kubevirtv1.CPU{Sockets: 2, Cores: 2},
						Memory: &kubevirtv1.Memory{Guest: ptr(resource.MustParse("8Gi"))},
						Devices: kubevirtv1.Devices{
							Disks:      []kubevirtv1.Disk{{Name: "disk-0", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}}},
							Interfaces: []kubevirtv1.Interface{{Name: "nic-0", MacAddress: "00:50:56:aa:bb:cc", InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Masquerade: &kubevirtv1.InterfaceMasquerade{}}}},
						},
					},
					Networks: []kubevirtv1.Network{{Name: "nic-0", NetworkSource: kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}}}},
					Volumes:  []kubevirtv1.Volume{{Name: "disk-0", VolumeSource: kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: "web-01-disk-0"}}}},
				},
			},
		},
	}
	createdVM, err := kv.KubevirtV1().VirtualMachines(ns).Create(ctx, vm, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
	require.NoError(t, err, "creating VirtualMachine")
	if got := createdVM.Spec.Template.Spec.Domain.Devices.Interfaces; assert.Len(t, got, 1, "VirtualMachine interfaces lost: %+v", got) {
		assert.Equal(t, "00:50:56:aa:bb:cc", got[0].MacAddress, "VirtualMachine interfaces lost: %+v", got)
	}
	createdVM.Status.PrintableStatus = kubevirtv1.VirtualMachineStatusRunning
	createdVM.Status.Ready = true
	_, err = kv.KubevirtV1().VirtualMachines(ns).UpdateStatus(ctx, createdVM, metav1.UpdateOptions{})
	require.NoError(t, err, "updating VirtualMachine status")

	// The schema is KubeVirt's own (generated from its Go types): it knows
	// every field, so a misspelt one fails strict validation and is pruned
	// otherwise. Run strategies are checked by KubeVirt's webhook, not the
	// schema (see TestAdmissionRejectsWhatKubeVirtRejects).
	misspelt := map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": map[string]any{"name": "misspelt"},
		"spec": map[string]any{"runStrategy": "Halted", "template": map[string]any{"spec": map[string]any{
			"domain": map[string]any{"devices": map[string]any{}, "cpu": map[string]any{"sockts": int64(2)}}}}},
	}
	vms := env.Dynamic(t).Resource(vmGVR).Namespace(ns)
	_, err = vms.Create(ctx, &unstructured.Unstructured{Object: misspelt}, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
	assert.ErrorContains(t, err, `unknown field "spec.template.spec.domain.cpu.sockts"`, "VirtualMachine with a misspelt field under strict validation")
	pruned, err := vms.Create(ctx, &unstructured.Unstructured{Object: misspelt}, metav1.CreateOptions{})
	require.NoError(t, err, "VirtualMachine with a misspelt field, default validation")
	cpu, _, _ := unstructured.NestedMap(pruned.Object, "spec", "template", "spec", "domain", "cpu")
	assert.Empty(t, cpu, "the misspelt field was kept")

	vmi := &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: "web-01", Namespace: ns},
		Spec:       vm.Spec.Template.Spec,
	}
	createdVMI, err := kv.KubevirtV1().VirtualMachineInstances(ns).Create(ctx, vmi, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
	require.NoError(t, err, "creating VirtualMachineInstance")
	// KubeVirt's VMI has no status subresource: its status is written
	// with the object.
	createdVMI.Status.Phase = kubevirtv1.Running
	updatedVMI, err := kv.KubevirtV1().VirtualMachineInstances(ns).Update(ctx, createdVMI, metav1.UpdateOptions{})
	require.NoError(t, err, "updating VirtualMachineInstance")
	assert.Equal(t, kubevirtv1.Running, updatedVMI.Status.Phase, "VirtualMachineInstance status phase after update")

	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		return
	}
	for short, want := range map[string]string{"vm": "Running", "vmi": "Running", "dv": "ImportInProgress"} {
		out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", env.KubeconfigPath(), "-n", ns, "get", short).CombinedOutput()
		if !assert.NoError(t, err, "kubectl get %s:\n%s", short, out) {
			continue
		}
		assert.Contains(t, string(out), want, "kubectl get %s does not show %s", short, want)
	}
}

func ptr[T any](v T) *T { return &v }
