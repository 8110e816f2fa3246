package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// nodeRecount is how long a budget derived from the nodes serves before
// the nodes are counted again: the count reads every cached node, and a
// wave's waiting migrations look at it every wait interval.
const nodeRecount = 10 * time.Second

// nodeCapacity sizes the conversion budget from the nodes
// (--max-conversions=auto): the sum, over the nodes a conversion pod may
// be placed on, of how many conversion pods each node's allocatable
// resources hold (conversionsFit). It counts the nodes' allocatable
// resources, not what other pods use of them: the scheduler's word on the
// conversion pods corrects the rest (conversions.go).
type nodeCapacity struct {
	nodes    cache.Store
	synced   cache.InformerSynced
	requests corev1.ResourceList

	mu      sync.Mutex
	counted time.Time
	last    conversionBudget
	// listErr is the last error of the node informer's list and watch.
	listErr string
}

func newNodeCapacity(informer cache.SharedIndexInformer, requests corev1.ResourceList) *nodeCapacity {
	n := &nodeCapacity{nodes: informer.GetStore(), synced: informer.HasSynced, requests: requests}
	// Only an informer not yet started takes a handler: a running one
	// keeps the default (its errors are logged either way).
	_ = informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		cache.DefaultWatchErrorHandler(ctx, r, err)
		n.mu.Lock()
		n.listErr = err.Error()
		n.mu.Unlock()
	})
	return n
}

// budget is the budget the nodes give now (counted again at most every
// nodeRecount), or an unknown one, which says why, until the nodes were
// read.
func (n *nodeCapacity) budget(now time.Time) conversionBudget {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.synced() {
		why := "reading the nodes (--max-conversions=auto)"
		if n.listErr != "" {
			why = fmt.Sprintf("the nodes cannot be read (%s): give the controller list and watch on nodes, or set --max-conversions to a number", n.listErr)
		}
		return conversionBudget{source: why}
	}
	if n.last.known && now.Sub(n.counted) < nodeRecount && !now.Before(n.counted) {
		return n.last
	}
	slots, fitting := 0, 0
	for _, obj := range n.nodes.List() {
		if node, ok := obj.(*corev1.Node); ok {
			if fit := conversionsFit(node, n.requests); fit > 0 {
				slots += fit
				fitting++
			}
		}
	}
	n.last = conversionBudget{slots: slots, known: true,
		source: fmt.Sprintf("--max-conversions=auto: %d conversion pods of %s fit the allocatable resources of %d schedulable nodes", slots, describeRequests(n.requests), fitting)}
	n.counted = now
	return n.last
}

// conversionsFit is how many pods requesting req the node's allocatable
// resources hold, on a node a conversion pod may be placed on: Ready,
// schedulable, without a NoSchedule or NoExecute taint (the conversion
// pods tolerate none). 0 for any other node, and for one that lacks a
// requested resource (/dev/kvm where --conversion-kvm asks for it).
func conversionsFit(node *corev1.Node, req corev1.ResourceList) int {
	if node.Spec.Unschedulable || !nodeReady(node) {
		return 0
	}
	for _, t := range node.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			return 0
		}
	}
	alloc := node.Status.Allocatable
	fit := -1
	if pods, ok := alloc[corev1.ResourcePods]; ok {
		fit = int(pods.Value())
	}
	for name, want := range req {
		if want.Sign() <= 0 {
			continue
		}
		have, ok := alloc[name]
		if !ok {
			return 0
		}
		// MilliValue rounds up: a positive request is at least 1.
		n := int(have.MilliValue() / want.MilliValue())
		if fit < 0 || n < fit {
			fit = n
		}
	}
	return max(fit, 0)
}

// nodeReady reports whether the node's Ready condition is True.
func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// describeRequests spells requests out: "cpu 1, memory 3Gi".
func describeRequests(req corev1.ResourceList) string {
	names := make([]string, 0, len(req))
	for name := range req {
		names = append(names, string(name))
	}
	slices.Sort(names)
	parts := make([]string, 0, len(names))
	for _, name := range names {
		q := req[corev1.ResourceName(name)]
		parts = append(parts, name+" "+q.String())
	}
	return strings.Join(parts, ", ")
}

// PodRequests are what a pod of these container resources requests: its
// requests, and for a resource it only limits, the limit (the API server
// defaults a request missing beside a limit to the limit).
func PodRequests(res corev1.ResourceRequirements) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, q := range res.Requests {
		out[name] = q.DeepCopy()
	}
	for name, q := range res.Limits {
		if _, ok := out[name]; !ok {
			out[name] = q.DeepCopy()
		}
	}
	return out
}

// trimNode is the transform of the node cache: what conversionsFit reads
// (schedulability, taints, allocatable resources, the Ready condition),
// not a node's images, addresses, volumes or labels.
func trimNode(obj any) (any, error) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	t := &corev1.Node{TypeMeta: node.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: node.Name, UID: node.UID, ResourceVersion: node.ResourceVersion}}
	t.Spec.Unschedulable, t.Spec.Taints = node.Spec.Unschedulable, node.Spec.Taints
	t.Status.Allocatable = node.Status.Allocatable
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			t.Status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status}}
		}
	}
	return t, nil
}
