//go:build integration

package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	kubevirtclient "platform.example/vm-migration/pkg/generated/kubevirt/clientset/versioned"
	"platform.example/vm-migration/test/framework"
	"platform.example/vm-migration/test/standins"
)

// TestKubeVirtStandinSaysNo runs the stand-ins and starts VMs a real
// KubeVirt would not run: one whose DataVolume does not exist stays
// Pending with ErrorPvcNotFound; one without memory is admitted (the VM
// webhook does not ask for memory) but its instance is refused by the VMI
// webhook, and the VM reports the failure as virt-controller does.
func TestKubeVirtStandinSaysNo(t *testing.T) {
	env := framework.Env(t)
	ns := env.Namespace(t)
	ctx := testContext(t)
	runStandins(t, standins.Config{RestConfig: env.Config(), Root: t.TempDir(), Namespace: ns, NodeName: "node-" + ns})
	kv := kubevirtclient.NewForConfigOrDie(env.Config())
	vm := func(name string, memory bool) *kubevirtv1.VirtualMachine {
		v := &kubevirtv1.VirtualMachine{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: kubevirtv1.VirtualMachineSpec{
				RunStrategy: ptr(kubevirtv1.RunStrategyAlways),
				Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: kubevirtv1.VirtualMachineInstanceSpec{
					Domain: kubevirtv1.DomainSpec{Devices: kubevirtv1.Devices{
						Disks: []kubevirtv1.Disk{{Name: "disk-0", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}}},
					}},
					Volumes: []kubevirtv1.Volume{{Name: "disk-0", VolumeSource: kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: name + "-disk-0"}}}},
				}},
			},
		}
		if memory {
			v.Spec.Template.Spec.Domain.Memory = &kubevirtv1.Memory{Guest: ptr(resource.MustParse("1Gi"))}
		}
		return v
	}
	for _, v := range []*kubevirtv1.VirtualMachine{vm("no-disk", true), vm("no-memory", false)} {
		_, err := kv.KubevirtV1().VirtualMachines(ns).Create(ctx, v, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
		require.NoError(t, err, "creating VM %s", v.Name)
	}
	// waitVM polls a VM until ok holds; the polls run one at a time and
	// last is read once one succeeded.
	waitVM := func(name string, ok func(*kubevirtv1.VirtualMachine) bool) *kubevirtv1.VirtualMachine {
		t.Helper()
		var last *kubevirtv1.VirtualMachine
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			got, err := kv.KubevirtV1().VirtualMachines(ns).Get(ctx, name, metav1.GetOptions{})
			require.NoError(c, err, "getting VM %s", name)
			last = got
			assert.True(c, ok(got), "VM %s: status %+v", name, got.Status)
		}, 20*time.Second, 200*time.Millisecond, "VM %s did not get there within 20s", name)
		return last
	}
	waitVM("no-disk", func(v *kubevirtv1.VirtualMachine) bool {
		return v.Status.PrintableStatus == kubevirtv1.VirtualMachineStatusPvcNotFound
	})
	vmi, err := kv.KubevirtV1().VirtualMachineInstances(ns).Get(ctx, "no-disk", metav1.GetOptions{})
	require.NoError(t, err, "getting the instance of no-disk")
	const noDV = "instance of a VM without its DataVolume: phase %s, conditions %+v"
	assert.Equal(t, kubevirtv1.Pending, vmi.Status.Phase, noDV, vmi.Status.Phase, vmi.Status.Conditions)
	if assert.Len(t, vmi.Status.Conditions, 1, noDV, vmi.Status.Phase, vmi.Status.Conditions) {
		assert.Equal(t, "FailedPvcNotFound", vmi.Status.Conditions[0].Reason, noDV, vmi.Status.Phase, vmi.Status.Conditions)
	}

	failed := waitVM("no-memory", func(v *kubevirtv1.VirtualMachine) bool {
		for _, c := range v.Status.Conditions {
			if c.Type == kubevirtv1.VirtualMachineFailure {
				return true
			}
		}
		return false
	})
	want := `Error creating virtual machine instance: admission webhook "virtualmachineinstances-create-validator.kubevirt.io" denied the request: no memory requested`
	for _, c := range failed.Status.Conditions {
		if c.Type == kubevirtv1.VirtualMachineFailure {
			assert.Equal(t, "FailedCreate", c.Reason, "Failure condition %s: %s, want FailedCreate: %s...", c.Reason, c.Message, want)
			assert.True(t, strings.HasPrefix(c.Message, want), "Failure condition %s: %s, want FailedCreate: %s...", c.Reason, c.Message, want)
		}
	}
	assert.Equal(t, kubevirtv1.VirtualMachineStatusStopped, failed.Status.PrintableStatus, "what a VM whose instance was refused shows")
}
