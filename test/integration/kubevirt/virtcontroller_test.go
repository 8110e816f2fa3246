//go:build integration

package kubevirt

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	kubevirtv1 "kubevirt.io/api/core/v1"

	kvclient "platform.example/vm-migration/pkg/generated/kubevirt/clientset/versioned"
	"platform.example/vm-migration/pkg/steps/pipeline"
	"platform.example/vm-migration/test/builders"
	"platform.example/vm-migration/test/framework/kubevirt"
)

// TestVirtControllerTakesTheRenderedVM: the VirtualMachine the controller
// renders is created for real (halted, as the controller creates it),
// virt-api's mutating webhook leaves what the controller wrote as it was
// (each field it sets is logged), the run-strategy patch the start step
// sends (a strict merge patch clearing spec.running) is admitted, and
// virt-controller takes the VM up: it creates the VirtualMachineInstance,
// controlled by the VM, which waits for its claims (the VM's printable
// status ErrorPvcNotFound: no DataVolume exists here), and removes it once
// the VM is halted again, as the controller's rollback halts it.
func TestVirtControllerTakesTheRenderedVM(t *testing.T) {
	env := kubevirtEnv(t)
	ns := env.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kv, err := kvclient.NewForConfig(env.Config())
	require.NoError(t, err)
	vms := kv.KubevirtV1().VirtualMachines(ns)

	rendered, err := pipeline.RenderVirtualMachine(builders.AdmissionMigration(ns))
	require.NoError(t, err, "rendering the VirtualMachine")
	created, err := vms.Create(ctx, rendered, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
	require.NoError(t, err, "creating the rendered VM")
	want, got := rendered.Spec.Template.Spec, created.Spec.Template.Spec
	assert.True(t, equality.Semantic.DeepEqual(want.Domain.Firmware, got.Domain.Firmware), "firmware: rendered %+v, stored %+v", want.Domain.Firmware, got.Domain.Firmware)
	assert.True(t, equality.Semantic.DeepEqual(want.Domain.CPU, got.Domain.CPU), "CPU: rendered %+v, stored %+v", want.Domain.CPU, got.Domain.CPU)
	assert.True(t, equality.Semantic.DeepEqual(want.Domain.Devices.Interfaces, got.Domain.Devices.Interfaces), "interfaces changed")
	assert.True(t, equality.Semantic.DeepEqual(want.Domain.Devices.Disks, got.Domain.Devices.Disks), "disks changed")
	assert.True(t, equality.Semantic.DeepEqual(want.Volumes, got.Volumes), "volumes changed")
	assert.Equal(t, kubevirtv1.RunStrategyHalted, *created.Spec.RunStrategy)
	if !equality.Semantic.DeepEqual(rendered.Spec, created.Spec) {
		r, _ := json.Marshal(rendered.Spec)
		c, _ := json.Marshal(created.Spec)
		t.Logf("virt-api's mutation of the spec:\nrendered %s\nstored   %s", r, c)
	}

	// The start step patches at the resourceVersion its cache holds and
	// requeues on a conflict (virt-controller writes the VM too): here,
	// read again and patch again.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := vms.Get(ctx, created.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		patch, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": cur.ResourceVersion},
			"spec":     map[string]any{"runStrategy": kubevirtv1.RunStrategyAlways, "running": nil},
		})
		if err != nil {
			return err
		}
		_, err = vms.Patch(ctx, created.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldValidation: metav1.FieldValidationStrict})
		return err
	})
	require.NoError(t, err, "the start step's run-strategy patch")

	// The VM names its DataVolumes as volumes, not as templates: virt-
	// controller does not wait for them before it creates the instance.
	var vmi *kubevirtv1.VirtualMachineInstance
	err = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		vmi, err = kv.KubevirtV1().VirtualMachineInstances(ns).Get(ctx, created.Name, metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		dumpVirtController(t, env.Kubernetes(t), ns)
		vm, _ := vms.Get(context.Background(), created.Name, metav1.GetOptions{})
		require.FailNow(t, "virt-controller created no instance of the started VM", "VM status %+v", vm.Status)
	}
	require.NotNil(t, metav1.GetControllerOf(vmi), "the instance has no controller")
	assert.Equal(t, created.UID, metav1.GetControllerOf(vmi).UID, "the instance is controlled by the VM")
	t.Logf("virt-controller: instance %s phase %q, conditions %+v", vmi.Name, vmi.Status.Phase, vmi.Status.Conditions)
	// Its claims absent, the instance waits and the VM says why.
	var vm *kubevirtv1.VirtualMachine
	err = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		vm, err = vms.Get(ctx, created.Name, metav1.GetOptions{})
		return err == nil && vm.Status.PrintableStatus == kubevirtv1.VirtualMachineStatusPvcNotFound, nil
	})
	require.NoError(t, err, "the VM's printable status: %+v", vm)
	t.Logf("virt-controller: VM printableStatus %q, conditions %+v", vm.Status.PrintableStatus, vm.Status.Conditions)
	pods, err := env.Kubernetes(t).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, p := range pods.Items {
		t.Logf("pod %s: %s, image %s", p.Name, p.Status.Phase, p.Spec.Containers[0].Image)
	}

	// Halting it again, as the controller's rollback does, has
	// virt-controller remove the instance.
	halt, err := json.Marshal(map[string]any{"spec": map[string]any{"runStrategy": kubevirtv1.RunStrategyHalted, "running": nil}})
	require.NoError(t, err)
	_, err = vms.Patch(ctx, created.Name, types.MergePatchType, halt, metav1.PatchOptions{FieldValidation: metav1.FieldValidationStrict})
	require.NoError(t, err, "halting the VM")
	err = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := kv.KubevirtV1().VirtualMachineInstances(ns).Get(ctx, created.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	require.NoError(t, err, "virt-controller did not remove the halted VM's instance")
}

// dumpVirtController logs ns's events and the last lines of
// virt-controller's log.
func dumpVirtController(t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	ctx := context.Background()
	if evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, e := range evs.Items {
			t.Logf("event %s %s: %s %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
	pods, err := cs.CoreV1().Pods(kubevirt.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "kubevirt.io=" + kubevirt.ControllerName})
	if err != nil || len(pods.Items) == 0 {
		t.Logf("no virt-controller pod: %v", err)
		return
	}
	tail := int64(60)
	b, err := cs.CoreV1().Pods(kubevirt.Namespace).GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{TailLines: &tail}).DoRaw(ctx)
	t.Logf("virt-controller's log (%v):\n%s", err, b)
}
