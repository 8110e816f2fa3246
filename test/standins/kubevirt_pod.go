package standins

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"platform.example/vm-migration/test/images/launcher"
)

// agentPollInterval is how often a running instance's launcher is asked
// what the guest agent says.
const agentPollInterval = 2 * time.Second

// followLauncher makes an instance's life follow its launcher pod: the pod
// is created once the instance's volumes are there and its start delay
// passed; the instance is Scheduling while the pod waits, Scheduled once
// its container runs, Running once QEMU runs the guest (the pod is
// Ready), and Succeeded or Failed as the pod ends.
func (k *KubeVirt) followLauncher(ctx context.Context, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) (time.Duration, error) {
	if vmi.Status.Phase == kubevirtv1.Succeeded || vmi.Status.Phase == kubevirtv1.Failed {
		return 0, k.setVMStatus(ctx, vm, vmStatus{created: true, printable: kubevirtv1.VirtualMachineStatusStopped})
	}
	pod, err := k.launcherPodOf(vmi)
	if err != nil {
		return 0, err
	}
	if pod != nil {
		return k.followPod(ctx, vm, vmi, pod)
	}
	if vmi.Status.Phase == kubevirtv1.Scheduled || vmi.Status.Phase == kubevirtv1.Running {
		return 0, k.endInstance(ctx, vm, vmi, kubevirtv1.Failed, "the launcher pod "+launcherPodName(vmi)+" is gone")
	}
	return k.startLauncher(ctx, vm, vmi)
}

// launcherPodOf reads the instance's launcher pod from the cache; nil
// when there is none of this instance (a previous instance's, being
// deleted, does not count).
func (k *KubeVirt) launcherPodOf(vmi *kubevirtv1.VirtualMachineInstance) (*corev1.Pod, error) {
	pod, err := k.pods.Pods(vmi.Namespace).Get(launcherPodName(vmi))
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if c := metav1.GetControllerOf(pod); c == nil || c.UID != vmi.UID {
		return nil, nil
	}
	return pod, nil
}

// startLauncher creates the launcher pod once the volumes are ready and
// the start delay passed.
func (k *KubeVirt) startLauncher(ctx context.Context, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) (time.Duration, error) {
	if ok, wait, err := k.readyToStart(ctx, vm, vmi); !ok || err != nil {
		return wait, err
	}
	pod, err := k.launcherPod(vmi)
	if err != nil {
		return 0, err
	}
	_, err = k.c.kube.CoreV1().Pods(vmi.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// A previous instance's pod still terminates: wait for it.
		return time.Second, nil
	}
	if err != nil {
		return 0, fmt.Errorf("creating the launcher pod of instance %s/%s: %w", vmi.Namespace, vmi.Name, err)
	}
	err = k.setInstanceStatus(ctx, vmi, func(st *kubevirtv1.VirtualMachineInstanceStatus) {
		setPhase(st, kubevirtv1.Scheduling)
		st.Conditions = nil
	})
	if err != nil {
		return 0, err
	}
	return 0, k.setVMStatus(ctx, vm, vmStatus{created: true, printable: kubevirtv1.VirtualMachineStatusStarting})
}

// followPod reports the instance as its launcher pod is.
func (k *KubeVirt) followPod(ctx context.Context, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance, pod *corev1.Pod) (time.Duration, error) {
	switch {
	case pod.Status.Phase == corev1.PodSucceeded:
		return 0, k.endInstance(ctx, vm, vmi, kubevirtv1.Succeeded, "the guest stopped")
	case pod.Status.Phase == corev1.PodFailed:
		return 0, k.endInstance(ctx, vm, vmi, kubevirtv1.Failed, "the launcher failed: "+terminationMessage(pod))
	case podReady(pod):
		return k.reportRunning(ctx, vm, vmi, pod)
	}
	phase := kubevirtv1.Scheduling
	if pod.Status.Phase == corev1.PodRunning {
		phase = kubevirtv1.Scheduled
	}
	err := k.setInstanceStatus(ctx, vmi, func(st *kubevirtv1.VirtualMachineInstanceStatus) {
		setPhase(st, phase)
		if phase == kubevirtv1.Scheduled {
			st.NodeName = pod.Spec.NodeName
		}
	})
	if err != nil {
		return 0, err
	}
	return 0, k.setVMStatus(ctx, vm, vmStatus{created: true, printable: startingStatus(pod)})
}

// reportRunning reports a running guest: what the launcher says of QEMU
// and of the guest agent, asked again every agentPollInterval.
func (k *KubeVirt) reportRunning(ctx context.Context, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance, pod *corev1.Pod) (time.Duration, error) {
	ls, err := k.launcherStatus(ctx, pod)
	if err != nil {
		// The launcher may be stopping; its pod's events come anyway.
		return agentPollInterval, nil
	}
	err = k.setInstanceStatus(ctx, vmi, func(st *kubevirtv1.VirtualMachineInstanceStatus) {
		setPhase(st, kubevirtv1.Running)
		st.NodeName = pod.Spec.NodeName
		st.ActivePods = map[types.UID]string{pod.UID: pod.Spec.NodeName}
		st.LauncherContainerImageVersion = pod.Spec.Containers[0].Image
		st.QOSClass = ptrIfSet(pod.Status.QOSClass)
		setCondition(st, kubevirtv1.VirtualMachineInstanceReady, true, "", "")
		setGuestStatus(st, &vmi.Spec, pod, ls)
	})
	if err != nil {
		return 0, err
	}
	return agentPollInterval, k.setVMStatus(ctx, vm, vmStatus{ready: true, created: true, printable: kubevirtv1.VirtualMachineStatusRunning})
}

// launcherStatus asks the launcher through the API server's pod proxy.
func (k *KubeVirt) launcherStatus(ctx context.Context, pod *corev1.Pod) (*launcher.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	raw, err := k.c.kube.CoreV1().Pods(pod.Namespace).ProxyGet("http", pod.Name, strconv.Itoa(launcher.Port), launcher.StatusPath, nil).DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("asking launcher %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	var st launcher.Status
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, fmt.Errorf("the status of launcher %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return &st, nil
}

// endInstance reports the instance Succeeded or Failed: its guest ended.
func (k *KubeVirt) endInstance(ctx context.Context, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance, phase kubevirtv1.VirtualMachineInstancePhase, why string) error {
	err := k.setInstanceStatus(ctx, vmi, func(st *kubevirtv1.VirtualMachineInstanceStatus) {
		setPhase(st, phase)
		setCondition(st, kubevirtv1.VirtualMachineInstanceReady, false, "PodCompleted", why)
		removeCondition(st, kubevirtv1.VirtualMachineInstanceAgentConnected)
	})
	if err != nil {
		return err
	}
	return k.setVMStatus(ctx, vm, vmStatus{created: true, printable: kubevirtv1.VirtualMachineStatusStopped})
}

// stopLauncher deletes the instance's launcher pod (the kubelet gives it
// its grace period; the launcher shuts the guest down) and says whether
// it is gone.
func (k *KubeVirt) stopLauncher(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) (bool, error) {
	pod, err := k.launcherPodOf(vmi)
	if err != nil || pod == nil {
		return pod == nil, err
	}
	if pod.DeletionTimestamp == nil {
		uid := pod.UID
		err := k.c.kube.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("deleting launcher pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
	}
	return false, nil
}

// setInstanceStatus applies change to a copy of the instance's status and
// writes it when it changed.
func (k *KubeVirt) setInstanceStatus(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, change func(*kubevirtv1.VirtualMachineInstanceStatus)) error {
	want := vmi.Status.DeepCopy()
	change(want)
	if equality.Semantic.DeepEqual(want, &vmi.Status) {
		return nil
	}
	return k.updateInstance(ctx, vmi, change)
}
