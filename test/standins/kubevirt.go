package standins

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeinformers "k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	kvinformers "platform.example/vm-migration/pkg/generated/kubevirt/informers/externalversions"
	kvlisters "platform.example/vm-migration/pkg/generated/kubevirt/listers/core/v1"
)

// KubeVirt is the KubeVirt stand-in; see the package documentation.
type KubeVirt struct {
	cfg Config
	c   *clients

	vms  kvlisters.VirtualMachineLister
	vmis kvlisters.VirtualMachineInstanceLister
	// pods lists the launcher pods (with Config.LauncherImage).
	pods corelisters.PodLister
}

// launcherSelector selects launcher pods.
var launcherSelector = kubevirtv1.AppLabel + "=" + launcherAppLabelValue

func (k *KubeVirt) run(ctx context.Context) error {
	factory := kvinformers.NewSharedInformerFactoryWithOptions(k.c.kv, time.Minute, kvinformers.WithNamespace(k.cfg.Namespace))
	vms := factory.Kubevirt().V1().VirtualMachines()
	vmis := factory.Kubevirt().V1().VirtualMachineInstances()
	k.vms, k.vmis = vms.Lister(), vmis.Lister()
	sync := k.sync
	if k.cfg.RealKubeVirt {
		if err := k.prepareNode(ctx); err != nil {
			return err
		}
		sync = k.handle
	}
	l := newLoop("standin-kubevirt", sync)
	if _, err := vms.Informer().AddEventHandler(l.handler()); err != nil {
		return err
	}
	// A VMI's events wake its VM (same name).
	if _, err := vmis.Informer().AddEventHandler(l.handler()); err != nil {
		return err
	}
	synced := []cache.InformerSynced{vms.Informer().HasSynced, vmis.Informer().HasSynced}
	if k.cfg.LauncherImage != "" || k.cfg.RealKubeVirt {
		pods, err := k.watchLaunchers(ctx, l)
		if err != nil {
			return err
		}
		synced = append(synced, pods)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if cache.WaitForCacheSync(ctx.Done(), synced...) {
		l.run(ctx, k.cfg.workers(2))
	}
	return nil
}

// watchLaunchers wakes an instance's VM (same name) on its launcher pod's
// events, until ctx ends.
func (k *KubeVirt) watchLaunchers(ctx context.Context, l *loop) (cache.InformerSynced, error) {
	factory := kubeinformers.NewSharedInformerFactoryWithOptions(k.c.kube, time.Minute, kubeinformers.WithNamespace(k.cfg.Namespace),
		kubeinformers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = launcherSelector }))
	pods := factory.Core().V1().Pods().Informer()
	k.pods = factory.Core().V1().Pods().Lister()
	enqueue := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if pod, ok := obj.(*corev1.Pod); ok {
			if c := metav1.GetControllerOf(pod); c != nil && c.Kind == "VirtualMachineInstance" {
				l.queue.Add(pod.Namespace + "/" + c.Name)
			}
		}
	}
	_, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) }, DeleteFunc: enqueue})
	if err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	go func() {
		<-ctx.Done()
		factory.Shutdown()
	}()
	return pods.HasSynced, nil
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
	vmi, err := k.vmis.VirtualMachineInstances(ns).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return 0, err
	}
	if apierrors.IsNotFound(err) {
		vmi = nil
	}
	vm, err := k.vms.VirtualMachines(ns).Get(name)
	if apierrors.IsNotFound(err) {
		// Its VMI goes with it (owner reference, garbage collector),
		// once its grace period is over.
		return k.release(ctx, vmi)
	}
	if err != nil {
		return 0, err
	}
	switch {
	case vm.DeletionTimestamp != nil || !wantsRunning(vm):
		return k.stop(ctx, vm, vmi)
	case vmi == nil:
		return 0, k.start(ctx, vm)
	case vmi.DeletionTimestamp != nil:
		wait, err := k.release(ctx, vmi)
		return max(wait, time.Second), err
	case k.cfg.LauncherImage != "":
		return k.followLauncher(ctx, vm, vmi)
	case vmi.Status.Phase == kubevirtv1.Running:
		return 0, k.setVMStatus(ctx, vm, vmStatus{ready: true, printable: kubevirtv1.VirtualMachineStatusRunning})
	}
	return k.runInstance(ctx, vm, vmi)
}

// stop deletes the VM's instance, if any, and reports the VM Stopping
// until the instance is gone (VMIGracePeriod), then Stopped.
func (k *KubeVirt) stop(ctx context.Context, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) (time.Duration, error) {
	if vmi == nil {
		return 0, k.setVMStatus(ctx, vm, vmStatus{printable: kubevirtv1.VirtualMachineStatusStopped})
	}
	if vmi.DeletionTimestamp == nil {
		uid := vmi.UID
		api := k.c.kv.KubevirtV1().VirtualMachineInstances(vm.Namespace)
		if err := api.Delete(ctx, vmi.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil && !apierrors.IsNotFound(err) {
			return 0, fmt.Errorf("deleting instance %s/%s: %w", vm.Namespace, vmi.Name, err)
		}
		// The deletion's event brings the instance back here.
		return 0, k.setVMStatus(ctx, vm, vmStatus{created: true, printable: kubevirtv1.VirtualMachineStatusStopping})
	}
	wait, err := k.release(ctx, vmi)
	if err != nil {
		return 0, err
	}
	return wait, k.setVMStatus(ctx, vm, vmStatus{created: true, printable: kubevirtv1.VirtualMachineStatusStopping})
}

// instanceFinalizer is the finalizer virt-controller puts on every
// instance (kubevirt v1.9.0 pkg/virt-controller/watch/vmi/vmi.go): it
// keeps a deleted instance until its guest stopped.
const instanceFinalizer = "kubevirt.io/virtualMachineControllerFinalize"

// release lets a deleted instance go once its grace period is over and
// its launcher pod, asked to stop, is gone: its guest stopped (phase
// Succeeded, as virt-handler reports it), then the finalizer is removed
// and the API server deletes it. It returns how long the grace period
// still runs. Without the finalizer (no VMIGracePeriod), the instance is
// gone at once and the garbage collector deletes its pod.
func (k *KubeVirt) release(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) (time.Duration, error) {
	if vmi == nil || vmi.DeletionTimestamp == nil || !slices.Contains(vmi.Finalizers, instanceFinalizer) {
		return 0, nil
	}
	if k.cfg.LauncherImage != "" {
		gone, err := k.stopLauncher(ctx, vmi)
		if err != nil || !gone {
			// The pod's deletion brings the instance back here.
			return time.Second, err
		}
	}
	if wait := k.cfg.VMIGracePeriod - time.Since(vmi.DeletionTimestamp.Time); wait > 0 {
		return wait, nil
	}
	err := k.changeInstance(ctx, vmi, func(cur *kubevirtv1.VirtualMachineInstance) {
		cur.Status.Phase = kubevirtv1.Succeeded
		cur.Finalizers = slices.DeleteFunc(cur.Finalizers, func(f string) bool { return f == instanceFinalizer })
	})
	if err != nil {
		return 0, fmt.Errorf("releasing instance %s/%s after its grace period: %w", vmi.Namespace, vmi.Name, err)
	}
	return 0, nil
}

// start creates the VM's instance from its template. When the API server
// (KubeVirt's VMI webhook) refuses it, the VM gets what virt-controller
// gives it (kubevirt v1.9.0 pkg/virt-controller/watch/vm/vm.go, startVMI
// and processFailureCondition): a FailedCreate warning event and a Failure
// condition, and it stays Stopped.
func (k *KubeVirt) start(ctx context.Context, vm *kubevirtv1.VirtualMachine) error {
	if vm.Spec.Template == nil {
		return k.setVMStatus(ctx, vm, vmStatus{printable: "ErrorNoTemplate"})
	}
	yes := true
	vmi := &kubevirtv1.VirtualMachineInstance{
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
	if k.cfg.VMIGracePeriod > 0 {
		vmi.Finalizers = []string{instanceFinalizer}
	}
	_, err := k.c.kv.KubevirtV1().VirtualMachineInstances(vm.Namespace).Create(ctx, vmi, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		msg := fmt.Sprintf("Error creating virtual machine instance: %v", err)
		k.c.events.Event(vm, corev1.EventTypeWarning, reasonFailedCreate, msg)
		return k.setVMStatus(ctx, vm, vmStatus{printable: kubevirtv1.VirtualMachineStatusStopped, failure: msg})
	}
	return k.setVMStatus(ctx, vm, vmStatus{created: true, printable: kubevirtv1.VirtualMachineStatusStarting})
}

// readyToStart says whether an instance's guest may start: its volumes
// are there (else it reports why it waits) and the configured start delay
// passed; when not, how long to wait before asking again.
func (k *KubeVirt) readyToStart(ctx context.Context, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) (bool, time.Duration, error) {
	missing, provisioning, err := k.volumesReady(ctx, vm.Namespace, &vmi.Spec)
	if err != nil {
		return false, 0, err
	}
	if missing != "" {
		return false, time.Second, k.waitForClaim(ctx, vm, vmi, missing)
	}
	if provisioning {
		return false, time.Second, k.setVMStatus(ctx, vm, vmStatus{created: true, printable: kubevirtv1.VirtualMachineStatusProvisioning})
	}
	if wait := k.cfg.VMIStartDelay - time.Since(vmi.CreationTimestamp.Time); wait > 0 {
		return false, wait, nil
	}
	return true, 0, nil
}

// runInstance marks a started instance Running once it is ready to start
// (no guest runs: the mode without a launcher).
func (k *KubeVirt) runInstance(ctx context.Context, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) (time.Duration, error) {
	if ok, wait, err := k.readyToStart(ctx, vm, vmi); !ok || err != nil {
		return wait, err
	}
	err := k.updateInstance(ctx, vmi, func(st *kubevirtv1.VirtualMachineInstanceStatus) {
		now := metav1.Now()
		st.Phase = kubevirtv1.Running
		st.NodeName = k.cfg.NodeName
		st.PhaseTransitionTimestamps = append(st.PhaseTransitionTimestamps,
			kubevirtv1.VirtualMachineInstancePhaseTransitionTimestamp{Phase: kubevirtv1.Running, PhaseTransitionTimestamp: now})
		st.Conditions = []kubevirtv1.VirtualMachineInstanceCondition{{
			Type: kubevirtv1.VirtualMachineInstanceReady, Status: corev1.ConditionTrue, LastTransitionTime: now,
			Message: "simulated by test/standins: no guest runs",
		}}
	})
	if err != nil {
		return 0, fmt.Errorf("marking instance %s/%s running: %w", vmi.Namespace, vmi.Name, err)
	}
	return 0, k.setVMStatus(ctx, vm, vmStatus{ready: true, created: true, printable: kubevirtv1.VirtualMachineStatusRunning})
}

// Reasons of virt-controller's events and conditions (kubevirt v1.9.0
// pkg/virt-controller/watch/common/events.go and pkg/controller/controller.go).
const (
	reasonFailedCreate      = "FailedCreate"
	reasonFailedPvcNotFound = "FailedPvcNotFound"
)

// volumesReady is virt-controller's wait for an instance's volumes
// (kubevirt v1.9.0 pkg/virt-controller/watch/vmi/datavolumes.go,
// areDataVolumesReady): a DataVolume volume needs its DataVolume, or a
// claim of its name; a claim volume needs its claim. It returns the first
// claim missing, and whether a DataVolume is still being populated.
func (k *KubeVirt) volumesReady(ctx context.Context, ns string, spec *kubevirtv1.VirtualMachineInstanceSpec) (string, bool, error) {
	provisioning := false
	for _, v := range spec.Volumes {
		var claim string
		switch {
		case v.DataVolume != nil:
			dv, err := k.c.cdi.CdiV1beta1().DataVolumes(ns).Get(ctx, v.DataVolume.Name, metav1.GetOptions{})
			if err == nil {
				provisioning = provisioning || dv.Status.Phase != cdiv1.Succeeded
				continue
			}
			if !apierrors.IsNotFound(err) {
				return "", false, err
			}
			claim = v.DataVolume.Name
		case v.PersistentVolumeClaim != nil:
			claim = v.PersistentVolumeClaim.ClaimName
		default:
			continue
		}
		_, err := k.c.kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return claim, false, nil
		}
		if err != nil {
			return "", false, err
		}
	}
	return "", provisioning, nil
}

// waitForClaim leaves the instance Pending, as virt-controller does when a
// volume's claim does not exist: an event and a Synchronized=False
// condition with reason FailedPvcNotFound on the instance, and the VM's
// printable status ErrorPvcNotFound (vm.go, isVirtualMachineStatusPvcNotFound).
func (k *KubeVirt) waitForClaim(ctx context.Context, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance, claim string) error {
	msg := fmt.Sprintf("PVC %s/%s does not exist, waiting for it to appear", vmi.Namespace, claim)
	k.c.events.Event(vmi, corev1.EventTypeNormal, reasonFailedPvcNotFound, msg)
	err := k.updateInstance(ctx, vmi, func(st *kubevirtv1.VirtualMachineInstanceStatus) {
		st.Phase = kubevirtv1.Pending
		st.Conditions = []kubevirtv1.VirtualMachineInstanceCondition{{
			Type: kubevirtv1.VirtualMachineInstanceSynchronized, Status: corev1.ConditionFalse,
			Reason: reasonFailedPvcNotFound, Message: msg, LastTransitionTime: metav1.Now(),
		}}
	})
	if err != nil {
		return fmt.Errorf("reporting the missing claim of instance %s/%s: %w", vmi.Namespace, vmi.Name, err)
	}
	return k.setVMStatus(ctx, vm, vmStatus{created: true, printable: kubevirtv1.VirtualMachineStatusPvcNotFound})
}

// updateInstance applies change to the instance's current status and
// writes it with an ordinary update (a VMI has no status subresource).
func (k *KubeVirt) updateInstance(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, change func(*kubevirtv1.VirtualMachineInstanceStatus)) error {
	return k.changeInstance(ctx, vmi, func(cur *kubevirtv1.VirtualMachineInstance) { change(&cur.Status) })
}

// changeInstance applies change to the current instance (the same UID)
// and writes it; an instance gone meanwhile is no error.
func (k *KubeVirt) changeInstance(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, change func(*kubevirtv1.VirtualMachineInstance)) error {
	api := k.c.instanceWriter.KubevirtV1().VirtualMachineInstances(vmi.Namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := k.currentInstance(ctx, vmi)
		if err != nil {
			return err
		}
		if cur.UID != vmi.UID {
			return nil
		}
		change(cur)
		_, err = api.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// currentInstance reads the instance again: from the API server, or,
// as virt-handler (which may list and watch instances but not get one),
// from the informer's cache.
func (k *KubeVirt) currentInstance(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) (*kubevirtv1.VirtualMachineInstance, error) {
	if k.cfg.RealKubeVirt {
		cur, err := k.vmis.VirtualMachineInstances(vmi.Namespace).Get(vmi.Name)
		if err != nil {
			return nil, err
		}
		return cur.DeepCopy(), nil
	}
	return k.c.kv.KubevirtV1().VirtualMachineInstances(vmi.Namespace).Get(ctx, vmi.Name, metav1.GetOptions{})
}

// vmStatus is what the stand-in reports of a VM.
type vmStatus struct {
	ready, created bool
	printable      kubevirtv1.VirtualMachinePrintableStatus
	// failure, when set, is the message of a Failure condition (reason
	// FailedCreate); empty removes the condition.
	failure string
}

// setVMStatus writes the VM's flags, printable status and Failure condition.
func (k *KubeVirt) setVMStatus(ctx context.Context, vm *kubevirtv1.VirtualMachine, want vmStatus) error {
	if vm.Status.Ready == want.ready && vm.Status.Created == (want.created || want.ready) &&
		vm.Status.PrintableStatus == want.printable && failureMessage(&vm.Status) == want.failure {
		return nil
	}
	api := k.c.kv.KubevirtV1().VirtualMachines(vm.Namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := api.Get(ctx, vm.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Status.Ready = want.ready
		cur.Status.Created = want.created || want.ready
		cur.Status.PrintableStatus = want.printable
		setFailure(&cur.Status, want.failure)
		_, err = api.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// failureMessage is the message of the VM's Failure condition, if any.
func failureMessage(st *kubevirtv1.VirtualMachineStatus) string {
	for _, c := range st.Conditions {
		if c.Type == kubevirtv1.VirtualMachineFailure {
			return c.Message
		}
	}
	return ""
}

// setFailure sets or removes the VM's Failure condition (vm.go,
// processFailureCondition).
func setFailure(st *kubevirtv1.VirtualMachineStatus, msg string) {
	kept := st.Conditions[:0]
	for _, c := range st.Conditions {
		if c.Type != kubevirtv1.VirtualMachineFailure {
			kept = append(kept, c)
		}
	}
	st.Conditions = kept
	if msg != "" {
		st.Conditions = append(st.Conditions, kubevirtv1.VirtualMachineCondition{
			Type: kubevirtv1.VirtualMachineFailure, Status: corev1.ConditionTrue,
			Reason: reasonFailedCreate, Message: msg, LastTransitionTime: metav1.Now(),
		})
	}
}
