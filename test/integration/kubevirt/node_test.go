//go:build integration

package kubevirt

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	kubevirtv1 "kubevirt.io/api/core/v1"

	kvclient "platform.example/vm-migration/pkg/generated/kubevirt/clientset/versioned"
	"platform.example/vm-migration/test/framework"
	"platform.example/vm-migration/test/framework/kubevirt"
)

// multusMAC is the MAC of the test VM's NIC on a Multus network.
const multusMAC = "02:54:00:12:34:56"

// nodeCase is what a test of KubeVirt's node side works with: the
// suite's environment with it installed, the test's namespace, a context
// of five minutes and the clients.
type nodeCase struct {
	env *framework.Environment
	ns  string
	ctx context.Context
	cs  kubernetes.Interface
	kv  kvclient.Interface
}

// newNodeCase skips t unless KubeVirt's node side is built, else returns
// its nodeCase.
func newNodeCase(t *testing.T) *nodeCase {
	t.Helper()
	if os.Getenv(kubevirt.EnvNodeDir) == "" {
		t.Skipf("$%s is not set: KubeVirt's node side is not built (make kubevirt-node)", kubevirt.EnvNodeDir)
	}
	env := kubevirtEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	kv, err := kvclient.NewForConfig(env.Config())
	require.NoError(t, err)
	return &nodeCase{env: env, ns: env.Namespace(t), ctx: ctx, cs: env.Kubernetes(t), kv: kv}
}

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
	c := newNodeCase(t)
	env, ns, ctx, cs, kv := c.env, c.ns, c.ctx, c.cs, c.kv

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

	vm := tinyVM("tiny", ns, false)
	_, err = kv.KubevirtV1().VirtualMachines(ns).Create(ctx, vm, metav1.CreateOptions{})
	require.NoError(t, err, "creating the VM")
	vmi := waitRunning(ctx, t, kv, ns, vm.Name)
	t.Logf("instance %s Running on %s: interfaces %+v", vmi.Name, vmi.Status.NodeName, vmi.Status.Interfaces)
	require.Equal(t, env.NodeName(), vmi.Status.NodeName)

	launcher := launcherPod(ctx, t, cs, ns, vmi)
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

// TestMultusNICUnderKubeVirt: a VM with a second NIC on a Multus network
// (bridge binding, as the controller renders a source network mapped to
// one). The node's stand-in for Multus attaches the launcher pod to the
// network and writes its network-status, as Multus does. KubeVirt v1.8's
// bridge binding then moves the pod interface's identity onto a dummy
// link, which only a kernel with the dummy link type can make: on such a
// kernel the instance must run with the NIC's MAC; on one without (this
// project's machines: `ip link add type dummy` answers "Unknown device
// type"), the test shows virt-handler's refusal and skips.
func TestMultusNICUnderKubeVirt(t *testing.T) {
	c := newNodeCase(t)
	ns, ctx, cs, kv := c.ns, c.ctx, c.cs, c.kv
	require.NoError(t, kubevirt.DefineNetwork(ctx, c.env.Config(), ns+"/backend"), "defining the Multus network")
	vm := tinyVM("multus", ns, true)
	_, err := kv.KubevirtV1().VirtualMachines(ns).Create(ctx, vm, metav1.CreateOptions{})
	require.NoError(t, err, "creating the VM")

	var vmi *kubevirtv1.VirtualMachineInstance
	err = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		vmi, err = kv.KubevirtV1().VirtualMachineInstances(ns).Get(ctx, vm.Name, metav1.GetOptions{})
		return err == nil && vmi.Status.Phase != "" && vmi.Status.Phase != kubevirtv1.Pending, nil
	})
	require.NoError(t, err, "the instance was never scheduled")
	launcher := launcherPod(ctx, t, cs, ns, vmi)
	var statuses []map[string]any
	err = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, launcher.Name, metav1.GetOptions{})
		statuses = nil
		return err == nil && json.Unmarshal([]byte(p.Annotations["k8s.v1.cni.cncf.io/network-status"]), &statuses) == nil && len(statuses) == 2, nil
	})
	require.NoError(t, err, "the launcher pod's network-status names the pod network and the Multus network: %+v", statuses)
	t.Logf("launcher pod %s attached: %+v", launcher.Name, statuses)
	require.Equal(t, ns+"/backend", statuses[1]["name"])

	if !dummyLinks(t) {
		var refusal string
		err = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
			evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=VirtualMachineInstance"})
			if err != nil {
				return false, nil
			}
			for _, e := range evs.Items {
				if e.Reason == "SyncFailed" && strings.Contains(e.Message, "LinkAdd: operation not supported") {
					refusal = e.Message
					return true, nil
				}
			}
			return false, nil
		})
		require.NoError(t, err, "virt-handler's refusal of the bridge binding on a kernel without dummy links")
		t.Skipf("this kernel has no dummy link type, which KubeVirt's bridge binding needs; virt-handler said: %s", refusal)
	}
	vmi = waitRunning(ctx, t, kv, ns, vm.Name)
	macs := map[string]string{}
	for _, i := range vmi.Status.Interfaces {
		macs[i.Name] = i.MAC
	}
	require.Equal(t, multusMAC, macs["backend"], "the Multus NIC in the domain, with its MAC: %+v", vmi.Status.Interfaces)
}

// dummyLinks says whether this kernel makes dummy links (in a network
// namespace of its own, so nothing of the machine's changes).
func dummyLinks(t *testing.T) bool {
	out, err := exec.Command("unshare", "--net", "ip", "link", "add", "probe0", "type", "dummy").CombinedOutput()
	t.Logf("dummy link probe: %v %s", err, strings.TrimSpace(string(out)))
	return err == nil
}

// tinyVM is a VM of 128 MiB without disks (SeaBIOS finds nothing to boot
// and says so on the serial port), a masquerade NIC on the pod network,
// and with multus a bridge NIC on the Multus network "backend".
func tinyVM(name, ns string, multus bool) *kubevirtv1.VirtualMachine {
	always := kubevirtv1.RunStrategyAlways
	ifaces := []kubevirtv1.Interface{{
		Name:                   "default",
		InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Masquerade: &kubevirtv1.InterfaceMasquerade{}},
	}}
	networks := []kubevirtv1.Network{*kubevirtv1.DefaultPodNetwork()}
	if multus {
		ifaces = append(ifaces, kubevirtv1.Interface{
			Name:                   "backend",
			MacAddress:             multusMAC,
			InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Bridge: &kubevirtv1.InterfaceBridge{}},
		})
		networks = append(networks, kubevirtv1.Network{
			Name:          "backend",
			NetworkSource: kubevirtv1.NetworkSource{Multus: &kubevirtv1.MultusNetwork{NetworkName: "backend"}},
		})
	}
	return &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: kubevirtv1.VirtualMachineSpec{
			RunStrategy: &always,
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
				Spec: kubevirtv1.VirtualMachineInstanceSpec{
					Domain: kubevirtv1.DomainSpec{
						// SeaBIOS writes to the serial port.
						Firmware: &kubevirtv1.Firmware{Bootloader: &kubevirtv1.Bootloader{BIOS: &kubevirtv1.BIOS{UseSerial: ptr(true)}}},
						Memory:   &kubevirtv1.Memory{Guest: resource.NewQuantity(128<<20, resource.BinarySI)},
						Devices:  kubevirtv1.Devices{Interfaces: ifaces},
					},
					Networks: networks,
				},
			},
		},
	}
}

// waitRunning waits until the instance name runs, and dumps the node's
// logs if it does not.
func waitRunning(ctx context.Context, t *testing.T, kv kvclient.Interface, ns, name string) *kubevirtv1.VirtualMachineInstance {
	t.Helper()
	var vmi *kubevirtv1.VirtualMachineInstance
	err := wait.PollUntilContextCancel(ctx, 2*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		vmi, err = kv.KubevirtV1().VirtualMachineInstances(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && vmi.Status.Phase == kubevirtv1.Running, nil
	})
	if err != nil {
		dumpNode(t, ns)
		require.FailNow(t, "the instance did not reach Running", "instance %+v", vmi)
	}
	return vmi
}

// launcherPod returns the instance's one launcher pod.
func launcherPod(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string, vmi *kubevirtv1.VirtualMachineInstance) corev1.Pod {
	t.Helper()
	var pods *corev1.PodList
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		pods, err = cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: kubevirtv1.CreatedByLabel + "=" + string(vmi.UID)})
		return err == nil && len(pods.Items) == 1, nil
	})
	require.NoError(t, err, "one launcher pod of instance %s", vmi.Name)
	return pods.Items[0]
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
