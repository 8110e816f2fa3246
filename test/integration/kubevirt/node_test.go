//go:build integration

package kubevirt

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	kubevirtv1 "kubevirt.io/api/core/v1"

	kvclient "platform.example/vm-migration/pkg/generated/kubevirt/clientset/versioned"
	"platform.example/vm-migration/test/framework/kubevirt"
)

// TestKubeVirtRunsAVMOnTheNode: with KubeVirt's node side installed
// ($KUBEVIRT_NODE_DIR, hack/build-kubevirt-node.sh), virt-handler runs as
// its DaemonSet, labels the node and announces its devices, and a
// VirtualMachine with a masquerade interface on the pod network (as the
// controller renders one) runs: virt-controller's launcher pod on the
// node runs the real virt-launcher, virt-handler hands it the domain,
// libvirt starts QEMU under TCG, the instance goes Running, and the
// firmware's output reaches the serial console that virt-tail prints in
// the guest-console-log container.
func TestKubeVirtRunsAVMOnTheNode(t *testing.T) {
	if os.Getenv(kubevirt.EnvNodeDir) == "" {
		t.Skipf("$%s is not set: KubeVirt's node side is not built (make kubevirt-node)", kubevirt.EnvNodeDir)
	}
	env := kubevirtEnv(t)
	ns := env.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cs := env.Kubernetes(t)
	kv, err := kvclient.NewForConfig(env.Config())
	require.NoError(t, err)

	node, err := cs.CoreV1().Nodes().Get(ctx, env.NodeName(), metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "true", node.Labels[kubevirtv1.NodeSchedulable], "virt-handler labels its node schedulable")
	machines := 0
	for k := range node.Labels {
		if strings.HasPrefix(k, kubevirtv1.SupportedMachineTypeLabel) {
			machines++
		}
	}
	require.NotEmpty(t, node.Labels[kubevirtv1.SupportedMachineTypeLabel+"q35"], "virt-handler's node labeller found q35 in libvirt's domain capabilities")
	t.Logf("node labelled by virt-handler: schedulable, %d machine types, %d labels in all", machines, len(node.Labels))
	for r, q := range node.Status.Allocatable {
		if strings.HasPrefix(string(r), "devices.kubevirt.io/") {
			t.Logf("node allocatable %s=%s", r, q.String())
		}
	}

	always := kubevirtv1.RunStrategyAlways
	vm := &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "tiny", Namespace: ns},
		Spec: kubevirtv1.VirtualMachineSpec{
			RunStrategy: &always,
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
				Spec: kubevirtv1.VirtualMachineInstanceSpec{
					Domain: kubevirtv1.DomainSpec{
						// SeaBIOS writes to the serial port.
						Firmware: &kubevirtv1.Firmware{Bootloader: &kubevirtv1.Bootloader{BIOS: &kubevirtv1.BIOS{UseSerial: ptr(true)}}},
						Memory:   &kubevirtv1.Memory{Guest: resource.NewQuantity(128<<20, resource.BinarySI)},
						Devices: kubevirtv1.Devices{Interfaces: []kubevirtv1.Interface{{
							Name:                   "default",
							InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Masquerade: &kubevirtv1.InterfaceMasquerade{}},
						}}},
					},
					Networks: []kubevirtv1.Network{*kubevirtv1.DefaultPodNetwork()},
				},
			},
		},
	}
	_, err = kv.KubevirtV1().VirtualMachines(ns).Create(ctx, vm, metav1.CreateOptions{})
	require.NoError(t, err, "creating the VM")

	var vmi *kubevirtv1.VirtualMachineInstance
	err = wait.PollUntilContextCancel(ctx, 2*time.Second, true, func(ctx context.Context) (bool, error) {
		vmi, err = kv.KubevirtV1().VirtualMachineInstances(ns).Get(ctx, vm.Name, metav1.GetOptions{})
		return err == nil && vmi.Status.Phase == kubevirtv1.Running, nil
	})
	if err != nil {
		dumpNode(t, ns)
		require.FailNow(t, "the instance did not reach Running", "instance %+v", vmi)
	}
	t.Logf("instance %s Running on %s: interfaces %+v", vmi.Name, vmi.Status.NodeName, vmi.Status.Interfaces)
	require.Equal(t, env.NodeName(), vmi.Status.NodeName)

	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: kubevirtv1.CreatedByLabel + "=" + string(vmi.UID)})
	require.NoError(t, err)
	require.Len(t, pods.Items, 1, "launcher pods of the instance")
	launcher := pods.Items[0]
	t.Logf("launcher pod %s on %s: image %s", launcher.Name, launcher.Spec.NodeName, launcher.Spec.Containers[0].Image)
	var console string
	err = wait.PollUntilContextCancel(ctx, 2*time.Second, true, func(ctx context.Context) (bool, error) {
		b, err := cs.CoreV1().Pods(ns).GetLogs(launcher.Name, &corev1.PodLogOptions{Container: "guest-console-log"}).DoRaw(ctx)
		console = string(b)
		return err == nil && strings.Contains(console, "SeaBIOS"), nil
	})
	if err != nil {
		dumpNode(t, ns)
	}
	require.NoError(t, err, "the firmware's banner on the serial console; the console log said:\n%s", console)
	t.Logf("serial console:\n%s", console)
}

// dumpNode logs ns's events and the last lines of virt-handler's and the
// launcher pods' logs.
func dumpNode(t *testing.T, ns string) {
	t.Helper()
	env := kubevirtEnv(t)
	cs := env.Kubernetes(t)
	ctx := context.Background()
	dumpVirtController(t, cs, ns)
	tail := int64(80)
	for _, where := range []struct{ ns, selector string }{
		{kubevirt.Namespace, "kubevirt.io=" + kubevirt.HandlerName},
		{ns, "kubevirt.io=virt-launcher"},
	} {
		pods, err := cs.CoreV1().Pods(where.ns).List(ctx, metav1.ListOptions{LabelSelector: where.selector})
		if err != nil {
			continue
		}
		for _, p := range pods.Items {
			t.Logf("pod %s: %s %+v", p.Name, p.Status.Phase, p.Status.ContainerStatuses)
			for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
				b, err := cs.CoreV1().Pods(where.ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name, TailLines: &tail}).DoRaw(ctx)
				t.Logf("%s/%s log (%v):\n%s", p.Name, c.Name, err, b)
			}
		}
	}
}

// ptr returns a pointer to v.
func ptr[T any](v T) *T { return &v }
