//go:build integration

package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
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
	runCtx, stop := context.WithCancel(ctx)
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- standins.Run(runCtx, standins.Config{RestConfig: env.Config(), Root: t.TempDir(), Namespace: ns, NodeName: "node-" + ns, Ready: ready})
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("stand-ins: %v", err)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		done <- err
		t.Fatalf("stand-ins: %v", err)
	}
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
		if _, err := kv.KubevirtV1().VirtualMachines(ns).Create(ctx, v, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}); err != nil {
			t.Fatalf("creating VM %s: %v", v.Name, err)
		}
	}
	waitVM := func(name string, ok func(*kubevirtv1.VirtualMachine) bool) *kubevirtv1.VirtualMachine {
		var last *kubevirtv1.VirtualMachine
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
			got, err := kv.KubevirtV1().VirtualMachines(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			last = got
			return ok(got), nil
		})
		if err != nil {
			t.Fatalf("VM %s: status %+v", name, last.Status)
		}
		return last
	}
	waitVM("no-disk", func(v *kubevirtv1.VirtualMachine) bool {
		return v.Status.PrintableStatus == kubevirtv1.VirtualMachineStatusPvcNotFound
	})
	vmi, err := kv.KubevirtV1().VirtualMachineInstances(ns).Get(ctx, "no-disk", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if vmi.Status.Phase != kubevirtv1.Pending || len(vmi.Status.Conditions) != 1 || vmi.Status.Conditions[0].Reason != "FailedPvcNotFound" {
		t.Errorf("instance of a VM without its DataVolume: phase %s, conditions %+v", vmi.Status.Phase, vmi.Status.Conditions)
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
		if c.Type == kubevirtv1.VirtualMachineFailure && (c.Reason != "FailedCreate" || !strings.HasPrefix(c.Message, want)) {
			t.Errorf("Failure condition %s: %s, want FailedCreate: %s...", c.Reason, c.Message, want)
		}
	}
	if failed.Status.PrintableStatus != kubevirtv1.VirtualMachineStatusStopped {
		t.Errorf("a VM whose instance was refused shows %s", failed.Status.PrintableStatus)
	}
}
