//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/transfer/wire"
	"platform.example/vm-migration/test/standins"
)

// TestHappyPath migrates an EFI (secure boot) VM with three disks and two
// NICs, and checks the result against the source: bytes, shape, state.
func TestHappyPath(t *testing.T) {
	start := time.Now()
	s := newStack(t, stackOptions{})
	src := s.addVM("web-01", 11)
	// The transfer pod reports into its progress ConfigMap as its own
	// ServiceAccount, through the per-attempt Role: watch that it does.
	reported := s.watchProgressResult(t)
	m := s.create(s.newMigration("web-01", "web-01"))
	m = s.waitPhase(m.Name, v1alpha1.PhaseSucceeded, 3*time.Minute)
	t.Logf("migration succeeded in %s", time.Since(start).Round(time.Millisecond))

	s.verifyTargetDisks(m, src)

	// The source stays off: the VM now lives in KubeVirt.
	if st := s.powerState("web-01"); st != "poweredOff" {
		t.Errorf("source power state %s, want poweredOff", st)
	}

	vm, err := s.kv.KubevirtV1().VirtualMachines(s.ns).Get(s.ctx, "web-01", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if vm.Spec.RunStrategy == nil || *vm.Spec.RunStrategy != kubevirtv1.RunStrategyAlways {
		t.Errorf("run strategy %v, want Always", vm.Spec.RunStrategy)
	}
	if len(vm.OwnerReferences) != 0 {
		t.Errorf("the VM has owner references %v: deleting the migration would delete it", vm.OwnerReferences)
	}
	dom := vm.Spec.Template.Spec.Domain
	if dom.CPU == nil || dom.CPU.Sockets != 2 || dom.CPU.Cores != 2 {
		t.Errorf("CPU %+v, want 2 sockets of 2 cores", dom.CPU)
	}
	if dom.Memory == nil || dom.Memory.Guest == nil || dom.Memory.Guest.Cmp(resource.MustParse("2Gi")) != 0 {
		t.Errorf("memory %+v, want 2Gi", dom.Memory)
	}
	fw := dom.Firmware
	if fw == nil || fw.Bootloader == nil || fw.Bootloader.EFI == nil || fw.Bootloader.EFI.SecureBoot == nil || !*fw.Bootloader.EFI.SecureBoot {
		t.Errorf("firmware %+v, want EFI with secure boot", fw)
	}
	if dom.Features == nil || dom.Features.SMM == nil || dom.Features.SMM.Enabled == nil || !*dom.Features.SMM.Enabled {
		t.Errorf("features %+v, want SMM on for secure boot", dom.Features)
	}
	if got := len(dom.Devices.Disks); got != len(src.Disks) {
		t.Errorf("%d disks, want %d", got, len(src.Disks))
	}
	ifaces := dom.Devices.Interfaces
	if len(ifaces) != len(src.MACs) {
		t.Fatalf("%d interfaces, want %d", len(ifaces), len(src.MACs))
	}
	for i, mac := range src.MACs {
		if ifaces[i].MacAddress != mac {
			t.Errorf("interface %d: MAC %s, want %s", i, ifaces[i].MacAddress, mac)
		}
	}
	nets := vm.Spec.Template.Spec.Networks
	if len(nets) != 2 || nets[0].Pod == nil || nets[1].Multus == nil || nets[1].Multus.NetworkName != "default/backend" {
		t.Errorf("networks %+v, want the pod network then Multus default/backend", nets)
	}

	// The DataVolumes belong to the VM now, and the instance runs.
	for _, d := range m.Status.Disks {
		dv, err := s.cdi.CdiV1beta1().DataVolumes(s.ns).Get(s.ctx, d.DataVolume, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c := metav1.GetControllerOf(dv); c == nil || c.Kind != "VirtualMachine" || c.UID != vm.UID {
			t.Errorf("data volume %s is controlled by %+v, want the VM", dv.Name, c)
		}
		// CDI's clone authorization admitted it (same namespace: the
		// controller needs no datavolumes/source permission).
		if dv.Annotations[standins.AnnotationCloneToken] == "" {
			t.Errorf("data volume %s has no clone token: it did not pass CDI's mutating webhook", dv.Name)
		}
	}
	vmi, err := s.kv.KubevirtV1().VirtualMachineInstances(s.ns).Get(s.ctx, "web-01", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if vmi.Status.Phase != kubevirtv1.Running {
		t.Errorf("VMI phase %s, want Running", vmi.Status.Phase)
	}

	// Evidence in status: transfer and conversion job names, completion.
	if m.Status.Transfer == nil || m.Status.Transfer.CompletedAt == nil || m.Status.Transfer.Attempt != 1 {
		t.Errorf("transfer status %+v, want one completed attempt", m.Status.Transfer)
	}
	if m.Status.Conversion == nil || m.Status.Conversion.CompletedAt == nil || m.Status.Conversion.OperatingSystem == "" {
		t.Errorf("conversion status %+v, want completed with an OS", m.Status.Conversion)
	}

	select {
	case <-reported:
	case <-time.After(10 * time.Second):
		t.Error("the transfer's result never reached its progress ConfigMap (the pod's Role does not let it patch?)")
	}

	// Staging objects go: claims, Jobs (and their pods), ConfigMaps,
	// the transfer's ServiceAccount, Role and RoleBinding.
	s.waitNoLeftovers(m, time.Minute)

	// Deleting the finished migration leaves the migrated VM.
	if err := s.mig.MigrationV1alpha1().VirtualMachineMigrations(s.ns).Delete(s.ctx, m.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.waitGone(m.Name, 30*time.Second)
	if _, err := s.kv.KubevirtV1().VirtualMachines(s.ns).Get(s.ctx, "web-01", metav1.GetOptions{}); err != nil {
		t.Errorf("the migrated VM is gone with its migration: %v", err)
	}
}

// watchProgressResult is closed once a transfer progress ConfigMap of the
// namespace holds a result, written there by the transfer pod's identity.
func (s *stack) watchProgressResult(t *testing.T) <-chan struct{} {
	t.Helper()
	w, err := s.kube.CoreV1().ConfigMaps(s.ns).Watch(s.ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelComponent + "=transfer"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	done := make(chan struct{})
	go func() {
		for ev := range w.ResultChan() {
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if ok && strings.HasSuffix(cm.Name, "-progress") && cm.Data[wire.ConfigMapKeyResult] != "" {
				for _, f := range cm.ManagedFields {
					if f.Manager == "vm-transfer" {
						close(done)
						return
					}
				}
			}
		}
	}()
	return done
}
