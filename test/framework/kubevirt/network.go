package kubevirt

import (
	"context"
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"platform.example/vm-migration/test/framework/apply"
)

// DefineNetwork creates the Multus NetworkAttachmentDefinition network
// (namespace/name, or name in default) as a bridge, the way a cluster
// with Multus has it: virt-controller reads the definition of each Multus
// network of an instance before it renders the launcher pod. No Multus
// runs on the test node, so no pod is ever attached to it.
func DefineNetwork(ctx context.Context, cfg *rest.Config, network string) error {
	ns, name, ok := strings.Cut(network, "/")
	if !ok {
		ns, name = metav1.NamespaceDefault, network
	}
	a, err := apply.New(cfg, fieldManager, ns, func(string, ...any) {})
	if err != nil {
		return err
	}
	nad := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"config": fmt.Sprintf(`{"cniVersion":"0.3.1","name":%q,"type":"bridge","bridge":"br-%s"}`, name, name)},
	}}
	if _, err := a.Apply(ctx, nad); err != nil {
		return fmt.Errorf("defining the Multus network %s: %w", network, err)
	}
	return nil
}

// Summary says which KubeVirt runs and where: "v1.8.2 virt-api,
// virt-controller[, virt-handler] on node vmm-node", from the running
// pods of the Deployments (and of virt-handler's DaemonSet, when the
// node side is installed) and the version their images carry.
func Summary(ctx context.Context, cfg *rest.Config) (string, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	nodes := map[string]bool{}
	version := ""
	var running []string
	for _, name := range []string{APIName, ControllerName, HandlerName} {
		pods, err := kube.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{LabelSelector: "kubevirt.io=" + name})
		if err != nil {
			return "", fmt.Errorf("listing the %s pods: %w", name, err)
		}
		for _, p := range pods.Items {
			if p.Status.Phase != "Running" || p.DeletionTimestamp != nil {
				continue
			}
			running = append(running, name)
			nodes[p.Spec.NodeName] = true
			if img := p.Spec.Containers[0].Image; version == "" {
				version = img[strings.LastIndex(img, ":")+1:]
			}
			break
		}
	}
	if len(running) == 0 {
		return "", fmt.Errorf("no virt-api, virt-controller or virt-handler pod runs in namespace %s", Namespace)
	}
	var on []string
	for n := range nodes {
		on = append(on, n)
	}
	sort.Strings(on)
	return fmt.Sprintf("%s %s on node %s", version, strings.Join(running, ", "), strings.Join(on, ", ")), nil
}
