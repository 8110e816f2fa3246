package cdi

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// PodPartLabel is the label CDI puts on the pods it starts, naming their
// part: cdi-clone-source, cdi-upload-server, cdi-importer, ...
const PodPartLabel = componentLabel

// WatchPods records, from now until stop is called, the pods CDI starts in
// namespace ns: per pod, its part, its node and the last phase seen. list
// returns them sorted, one line each: "pod <ns>/<name> (<part>) on node
// <node>: <phase>".
func WatchPods(ctx context.Context, cs kubernetes.Interface, ns string) (list func() []string, stop func(), err error) {
	w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: PodPartLabel})
	if err != nil {
		return nil, nil, fmt.Errorf("watching CDI's pods in %s: %w", ns, err)
	}
	var mu sync.Mutex
	seen := map[string]string{}
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			mu.Lock()
			seen[p.Name] = fmt.Sprintf("pod %s/%s (%s) on node %s: %s", p.Namespace, p.Name, p.Labels[PodPartLabel], p.Spec.NodeName, p.Status.Phase)
			mu.Unlock()
		}
	}()
	list = func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Sorted(maps.Values(seen))
	}
	return list, w.Stop, nil
}
