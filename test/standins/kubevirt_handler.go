package standins

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"platform.example/vm-migration/test/images/launcher"
)

// With Config.RealKubeVirt, KubeVirt's own virt-api and virt-controller
// run (test/framework/kubevirt): they admit the VMs, create the instances
// and render the virt-launcher pods. The stand-in then plays only
// virt-handler, the node's part, for the launcher image of test/images
// (which KubeVirt's install names localhost/kubevirt/virt-launcher):
//
//   - the node as virt-handler's node labeller and device plugins leave
//     it (prepareNode);
//   - each instance virt-controller scheduled on the node (phase Scheduled,
//     its launcher pod ready) is handed to its launcher, as virt-handler
//     gives virt-launcher the domain, once VMIStartDelay passed since the
//     instance was created (until then it stays Scheduled);
//   - the instance is reported Running once QEMU runs the guest, with what
//     the guest agent says (AgentConnected, guestOSInfo, interfaces), and
//     Succeeded or Failed as its launcher pod ends;
//   - with VMIGracePeriod, each instance carries a finalizer of the
//     stand-in (graceFinalizer) that keeps it, once deleted, that long:
//     the time KubeVirt keeps an instance while virt-handler waits, within
//     the termination grace period, for a guest that does not answer the
//     ACPI shutdown (the launcher itself stops a guest without agent at
//     once).
//
// It writes no VM status and no Ready condition: virt-controller does.

// kvmDeviceResources are the resources virt-handler's device plugins
// offer (pkg/virt-handler/device-manager), each with its default count.
var kvmDeviceResources = []corev1.ResourceName{"devices.kubevirt.io/kvm", "devices.kubevirt.io/tun", "devices.kubevirt.io/vhost-net"}

// deviceCount is how many of each device the node offers (virt-handler's
// permanent device plugins announce 1000).
const deviceCount = 1000

// nodeLabels are the labels virt-handler puts on its node that the
// launcher pods virt-controller renders select: schedulable, and the
// machine type the launcher runs (q35 only).
var nodeLabels = map[string]string{
	kubevirtv1.NodeSchedulable:                   "true",
	kubevirtv1.SupportedMachineTypeLabel + "q35": "true",
}

// prepareNode labels the node and announces the device resources, as
// virt-handler does on start.
func (k *KubeVirt) prepareNode(ctx context.Context) error {
	labels, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": nodeLabels}})
	if err != nil {
		return err
	}
	nodes := k.c.kube.CoreV1().Nodes()
	if _, err := nodes.Patch(ctx, k.cfg.NodeName, types.StrategicMergePatchType, labels, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("labelling node %s as virt-handler does: %w", k.cfg.NodeName, err)
	}
	capacity := corev1.ResourceList{}
	for _, r := range kvmDeviceResources {
		capacity[r] = *resource.NewQuantity(deviceCount, resource.DecimalSI)
	}
	status, err := json.Marshal(map[string]any{"status": map[string]any{"capacity": capacity}})
	if err != nil {
		return err
	}
	if _, err := nodes.Patch(ctx, k.cfg.NodeName, types.StrategicMergePatchType, status, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("announcing KubeVirt's devices on node %s: %w", k.cfg.NodeName, err)
	}
	return nil
}

// handle is virt-handler's sync of one instance.
func (k *KubeVirt) handle(ctx context.Context, key string) (time.Duration, error) {
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	vmi, err := k.vmis.VirtualMachineInstances(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if wait, err := k.holdForGrace(ctx, vmi); err != nil || wait > 0 {
		return wait, err
	}
	if vmi.Status.NodeName != k.cfg.NodeName || (vmi.Status.Phase != kubevirtv1.Scheduled && vmi.Status.Phase != kubevirtv1.Running) {
		return 0, nil
	}
	pod, err := k.renderedLauncherOf(vmi)
	if err != nil || pod == nil {
		// Without its pod, virt-controller fails the instance.
		return 0, err
	}
	switch pod.Status.Phase {
	case corev1.PodSucceeded:
		return 0, k.reportEnded(ctx, vmi, kubevirtv1.Succeeded, "")
	case corev1.PodFailed:
		return 0, k.reportEnded(ctx, vmi, kubevirtv1.Failed, terminationMessage(pod))
	case corev1.PodRunning:
	default:
		return time.Second, nil
	}
	ls, err := k.launcherStatus(ctx, pod)
	if err != nil {
		// Starting or stopping; the pod's events come anyway.
		return agentPollInterval, nil
	}
	switch ls.QEMU.State {
	case launcher.StateWaiting:
		if pod.DeletionTimestamp != nil {
			return time.Second, nil
		}
		return k.giveInstance(ctx, vmi, pod)
	case launcher.StateRunning:
		return agentPollInterval, k.reportGuest(ctx, vmi, pod, ls)
	}
	return time.Second, nil
}

// renderedLauncherOf is the instance's launcher pod on the node (the one
// virt-controller made, controlled by the instance): the live one if
// any, else the last to end; nil when there is none.
func (k *KubeVirt) renderedLauncherOf(vmi *kubevirtv1.VirtualMachineInstance) (*corev1.Pod, error) {
	sel := labels.SelectorFromSet(labels.Set{kubevirtv1.AppLabel: launcherAppLabelValue, kubevirtv1.CreatedByLabel: string(vmi.UID)})
	pods, err := k.pods.Pods(vmi.Namespace).List(sel)
	if err != nil {
		return nil, err
	}
	var found *corev1.Pod
	for _, p := range pods {
		if c := metav1.GetControllerOf(p); c == nil || c.UID != vmi.UID || p.Spec.NodeName != k.cfg.NodeName {
			continue
		}
		if found == nil || podEnded(found) && !podEnded(p) {
			found = p
		}
	}
	return found, nil
}

// podEnded says whether the pod's containers all ended.
func podEnded(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// graceFinalizer keeps a deleted instance for Config.VMIGracePeriod.
const graceFinalizer = "standins.platform.example/guest-shutdown-grace"

// holdForGrace puts graceFinalizer on a live instance and, once it is
// deleted, removes it when the grace period is over; it returns how long
// the deleted instance is still held.
func (k *KubeVirt) holdForGrace(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) (time.Duration, error) {
	held := slices.Contains(vmi.Finalizers, graceFinalizer)
	switch {
	case k.cfg.VMIGracePeriod <= 0:
		return 0, nil
	case vmi.DeletionTimestamp == nil && !held:
		return 0, k.changeInstance(ctx, vmi, func(cur *kubevirtv1.VirtualMachineInstance) {
			if cur.DeletionTimestamp == nil && !slices.Contains(cur.Finalizers, graceFinalizer) {
				cur.Finalizers = append(cur.Finalizers, graceFinalizer)
			}
		})
	case vmi.DeletionTimestamp == nil || !held:
		return 0, nil
	}
	if wait := k.cfg.VMIGracePeriod - time.Since(vmi.DeletionTimestamp.Time); wait > 0 {
		return wait, nil
	}
	return 0, k.changeInstance(ctx, vmi, func(cur *kubevirtv1.VirtualMachineInstance) {
		cur.Finalizers = slices.DeleteFunc(cur.Finalizers, func(f string) bool { return f == graceFinalizer })
	})
}

// giveInstance hands the launcher its instance once the start delay
// passed.
func (k *KubeVirt) giveInstance(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, pod *corev1.Pod) (time.Duration, error) {
	if wait := k.cfg.VMIStartDelay - time.Since(vmi.CreationTimestamp.Time); wait > 0 {
		return wait, nil
	}
	env, err := instanceEnv(vmi)
	if err != nil {
		return 0, err
	}
	if err := k.putLauncher(ctx, pod, launcher.InstancePath, []byte(env[0].Value)); err != nil {
		return 0, err
	}
	return time.Second, nil
}

// putLauncher puts body to the launcher's path through the API server's
// pod proxy.
func (k *KubeVirt) putLauncher(ctx context.Context, pod *corev1.Pod, path string, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := k.c.kube.CoreV1().RESTClient().Put().Namespace(pod.Namespace).Resource("pods").
		Name(pod.Name + ":" + strconv.Itoa(launcher.Port)).SubResource("proxy").Suffix(strings.TrimPrefix(path, "/")).
		Body(body).Do(ctx).Error()
	if err != nil {
		return fmt.Errorf("putting %s to launcher %s/%s: %w", path, pod.Namespace, pod.Name, err)
	}
	return nil
}

// reportGuest reports the instance Running with what the launcher says
// of the machine and the guest agent, keeping the pod interface names
// virt-controller gave each interface.
func (k *KubeVirt) reportGuest(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, pod *corev1.Pod, ls *launcher.Status) error {
	return k.setInstanceStatus(ctx, vmi, func(st *kubevirtv1.VirtualMachineInstanceStatus) {
		setPhase(st, kubevirtv1.Running)
		setGuestStatus(st, &vmi.Spec, pod, ls)
	})
}

// setGuestStatus writes what virt-handler reports of a running guest: its
// agent's connection and OS, and the interfaces (the pod interface names
// already there kept).
func setGuestStatus(st *kubevirtv1.VirtualMachineInstanceStatus, spec *kubevirtv1.VirtualMachineInstanceSpec, pod *corev1.Pod, ls *launcher.Status) {
	var podIPs []string
	for _, ip := range pod.Status.PodIPs {
		podIPs = append(podIPs, ip.IP)
	}
	setCondition(st, kubevirtv1.VirtualMachineInstanceAgentConnected, ls.Agent.Connected, "", "")
	st.GuestOSInfo = guestOSInfo(ls.Agent)
	ifaces := networkStatus(spec, ls.QEMU.Interfaces, podIPs, ls.Agent)
	for i := range ifaces {
		if j := slices.IndexFunc(st.Interfaces, func(c kubevirtv1.VirtualMachineInstanceNetworkInterface) bool {
			return c.Name == ifaces[i].Name
		}); j >= 0 && ifaces[i].PodInterfaceName == "" {
			ifaces[i].PodInterfaceName = st.Interfaces[j].PodInterfaceName
		}
	}
	st.Interfaces = ifaces
}

// reportEnded reports the guest ended with its launcher pod, as
// virt-handler does once the domain is gone.
func (k *KubeVirt) reportEnded(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, phase kubevirtv1.VirtualMachineInstancePhase, why string) error {
	return k.setInstanceStatus(ctx, vmi, func(st *kubevirtv1.VirtualMachineInstanceStatus) {
		setPhase(st, phase)
		if why != "" {
			st.Reason = why
		}
		removeCondition(st, kubevirtv1.VirtualMachineInstanceAgentConnected)
	})
}
