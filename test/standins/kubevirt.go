package standins

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	kubevirtv1 "kubevirt.io/api/core/v1"

	kvinformers "platform.example/vm-migration/pkg/generated/kubevirt/informers/externalversions"
	kvlisters "platform.example/vm-migration/pkg/generated/kubevirt/listers/core/v1"
)

// KubeVirt is the KubeVirt stand-in; see the package documentation.
type KubeVirt struct {
	cfg Config
	c   *clients

	vms  kvlisters.VirtualMachineLister
	vmis kvlisters.VirtualMachineInstanceLister
}

func (k *KubeVirt) run(ctx context.Context) error {
	factory := kvinformers.NewSharedInformerFactoryWithOptions(k.c.kv, time.Minute, kvinformers.WithNamespace(k.cfg.Namespace))
	vms := factory.Kubevirt().V1().VirtualMachines()
	vmis := factory.Kubevirt().V1().VirtualMachineInstances()
	k.vms, k.vmis = vms.Lister(), vmis.Lister()
	l := newLoop("standin-kubevirt", k.sync)
	if _, err := vms.Informer().AddEventHandler(l.handler()); err != nil {
		return err
	}
	// A VMI's events wake its VM (same name).
	if _, err := vmis.Informer().AddEventHandler(l.handler()); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if cache.WaitForCacheSync(ctx.Done(), vms.Informer().HasSynced, vmis.Informer().HasSynced) {
		l.run(ctx, 2)
	}
	return nil
}

// wantsRunning says whether a VM's run strategy asks for an instance.
func wantsRunning(vm *kubevirtv1.VirtualMachine) bool {
	if vm.Spec.RunStrategy != nil {
		switch *vm.Spec.RunStrategy {
		case kubevirtv1.RunStrategyAlways, kubevirtv1.RunStrategyRerunOnFailure, kubevirtv1.RunStrategyOnce:
			return true
		}
		return false
	}
	return vm.Spec.Running != nil && *vm.Spec.Running
}

// sync makes a VM's instance exist and run, or go, as its run strategy says.
func (k *KubeVirt) sync(ctx context.Context, key string) (time.Duration, error) {
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	vm, err := k.vms.VirtualMachines(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return 0, nil // its VMI goes with it (owner reference, garbage collector)
	}
	if err != nil {
		return 0, err
	}
	vmi, err := k.vmis.VirtualMachineInstances(ns).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return 0, err
	}
	if apierrors.IsNotFound(err) {
		vmi = nil
	}
	api := k.c.kv.KubevirtV1().VirtualMachineInstances(ns)
	if vm.DeletionTimestamp != nil || !wantsRunning(vm) {
		if vmi != nil && vmi.DeletionTimestamp == nil {
			uid := vmi.UID
			if err := api.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil && !apierrors.IsNotFound(err) {
				return 0, fmt.Errorf("deleting instance %s: %w", key, err)
			}
		}
		return 0, k.setVMStatus(ctx, vm, false, "Stopped")
	}
	if vmi == nil {
		if vm.Spec.Template == nil {
			return 0, k.setVMStatus(ctx, vm, false, "ErrorNoTemplate")
		}
		yes := true
		vmi = &kubevirtv1.VirtualMachineInstance{
			ObjectMeta: metav1.ObjectMeta{
				Name: vm.Name, Namespace: vm.Namespace,
				Labels: vm.Spec.Template.ObjectMeta.Labels, Annotations: vm.Spec.Template.ObjectMeta.Annotations,
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: kubevirtv1.SchemeGroupVersion.String(), Kind: "VirtualMachine", Name: vm.Name, UID: vm.UID,
					Controller: &yes, BlockOwnerDeletion: &yes,
				}},
			},
			Spec: *vm.Spec.Template.Spec.DeepCopy(),
		}
		vmi.Status.Phase = kubevirtv1.Scheduling
		if _, err := api.Create(ctx, vmi, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return 0, fmt.Errorf("creating instance %s: %w", key, err)
		}
		return 0, k.setVMStatus(ctx, vm, false, "Starting")
	}
	if vmi.DeletionTimestamp != nil {
		return time.Second, nil
	}
	if vmi.Status.Phase != kubevirtv1.Running {
		if wait := k.cfg.VMIStartDelay - time.Since(vmi.CreationTimestamp.Time); wait > 0 {
			return wait, nil
		}
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := api.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			now := metav1.Now()
			cur.Status.Phase = kubevirtv1.Running
			cur.Status.NodeName = k.cfg.NodeName
			cur.Status.PhaseTransitionTimestamps = append(cur.Status.PhaseTransitionTimestamps,
				kubevirtv1.VirtualMachineInstancePhaseTransitionTimestamp{Phase: kubevirtv1.Running, PhaseTransitionTimestamp: now})
			cur.Status.Conditions = []kubevirtv1.VirtualMachineInstanceCondition{{
				Type: kubevirtv1.VirtualMachineInstanceReady, Status: "True", LastTransitionTime: now,
				Message: "simulated by test/standins: no guest runs",
			}}
			_, err = api.Update(ctx, cur, metav1.UpdateOptions{})
			return err
		})
		if err != nil && !apierrors.IsNotFound(err) {
			return 0, fmt.Errorf("marking instance %s running: %w", key, err)
		}
	}
	return 0, k.setVMStatus(ctx, vm, true, "Running")
}

// setVMStatus writes the VM's created/ready flags and printable status.
func (k *KubeVirt) setVMStatus(ctx context.Context, vm *kubevirtv1.VirtualMachine, running bool, printable string) error {
	st := kubevirtv1.VirtualMachinePrintableStatus(printable)
	if vm.Status.Ready == running && vm.Status.Created == (running || printable == "Starting") && vm.Status.PrintableStatus == st {
		return nil
	}
	api := k.c.kv.KubevirtV1().VirtualMachines(vm.Namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := api.Get(ctx, vm.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Status.Ready = running
		cur.Status.Created = running || printable == "Starting"
		cur.Status.PrintableStatus = st
		_, err = api.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
