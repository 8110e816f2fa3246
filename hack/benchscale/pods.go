package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	migclient "platform.example/vm-migration/pkg/generated/migration/clientset/versioned"
	"platform.example/vm-migration/pkg/transfer/wire"
	"platform.example/vm-migration/test/builders"
)

// The benchmark measures the controller alone, so its pods never run: the
// pod completer below registers a Node, binds every pod of the benchmark's
// namespace to it and ends it at once with what the real command would
// report. It is the only kubelet simulation of the project, and it moves
// no byte: a transfer pod ends with the result of a complete transfer
// (each disk of its job spec with its capacity and a made-up checksum), a
// conversion pod with a checksum line per disk (each changed) and a small
// inspection document, a verification pod with each target disk read back
// equal to its converted checksum, and the image proofs' pods with what the
// project's images answer (vm-transfer --version, the conversion image's
// self-check).

// benchNode is the Node the pod completer registers.
const benchNode = "bench-node"

// completerOptions shape the simulated node.
type completerOptions struct {
	// nodeCPU is the node's allocatable CPU. Conversion pods are placed
	// only while the CPU the placed ones request leaves room for theirs
	// (the others, which end at once in light mode, always are): those
	// beyond wait Pending, PodScheduled false Unschedulable with the
	// scheduler's "Insufficient cpu", until a placed one ends.
	nodeCPU resource.Quantity
	// conversionRun is how long a placed conversion pod runs before it
	// ends (0: at once).
	conversionRun time.Duration
	// stats receives what the node saw (nil: nothing is kept).
	stats *nodeStats
}

// nodeStats is what the simulated node saw of the conversion pods.
type nodeStats struct {
	mu sync.Mutex
	// waiting is how many conversion pods wait for room now; maxWaiting
	// the most at once, maxRunning the most placed at once.
	waiting, maxWaiting, maxRunning int
}

// peaks returns the most conversion pods that waited for room, and ran,
// at once.
func (s *nodeStats) peaks() (waiting, running int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxWaiting, s.maxRunning
}

// schedulerMessage is what kube-scheduler says of a pod no node has room
// for (one node, too little CPU, nothing to preempt).
const schedulerMessage = "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."

// completerWorkers is how many pods the completer ends at once.
const completerWorkers = 8

// benchInspection is what a completed conversion pod reports.
const benchInspection = `<?xml version="1.0" encoding="utf-8"?>
<v2v-inspection>
  <program>virt-v2v-in-place (SIMULATED by hack/benchscale: no conversion ran)</program>
  <operatingsystem><name>linux</name><distro>rhel</distro><major_version>9</major_version><minor_version>4</minor_version></operatingsystem>
</v2v-inspection>
`

// podCompleter ends the benchmark's pods; see above.
type podCompleter struct {
	kube      kubernetes.Interface
	mig       migclient.Interface
	namespace string
	pods      cache.Indexer
	queue     workqueue.TypedRateLimitingInterface[string]
	opts      completerOptions

	// mu guards the simulated scheduler's state: the CPU (millicores) of
	// each placed conversion pod that has not ended and when it was
	// placed, and the conversion pods waiting for room.
	mu      sync.Mutex
	placed  map[string]int64
	since   map[string]time.Time
	waiting map[string]bool
}

// runPodCompleter registers the Node and completes pods until ctx ends.
func runPodCompleter(ctx context.Context, kube kubernetes.Interface, mig migclient.Interface, namespace string, opts completerOptions) error {
	c := &podCompleter{kube: kube, mig: mig, namespace: namespace, opts: opts,
		placed: map[string]int64{}, since: map[string]time.Time{}, waiting: map[string]bool{},
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())}
	if c.opts.nodeCPU.IsZero() {
		c.opts.nodeCPU = resource.MustParse("1000")
	}
	if err := c.register(ctx); err != nil {
		return err
	}
	factory := kubeinformers.NewSharedInformerFactoryWithOptions(kube, time.Minute, kubeinformers.WithNamespace(namespace))
	informer := factory.Core().V1().Pods().Informer()
	c.pods = informer.GetIndexer()
	enqueue := func(obj any) {
		if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			c.queue.Add(key)
		}
	}
	gone := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			c.release(key)
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) }, DeleteFunc: gone}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return ctx.Err()
	}
	go c.heartbeats(ctx)
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	var wg sync.WaitGroup
	for range completerWorkers {
		wg.Go(func() {
			for c.next(ctx) {
			}
		})
	}
	wg.Wait()
	return nil
}

// next completes one queued pod; false once the queue shut down.
func (c *podCompleter) next(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	if err := c.complete(ctx, key); err != nil && ctx.Err() == nil {
		klog.FromContext(ctx).Error(err, "completing a pod", "pod", key)
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

// register creates the Node, Ready, with room for every pod.
func (c *podCompleter) register(ctx context.Context) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: benchNode, Labels: map[string]string{"kubernetes.io/hostname": benchNode}}}
	if _, err := c.kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("registering node %s: %w", benchNode, err)
	}
	return c.heartbeat(ctx)
}

// heartbeats keep the Node Ready while the benchmark runs.
func (c *podCompleter) heartbeats(ctx context.Context) {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := c.heartbeat(ctx); err != nil && ctx.Err() == nil {
				klog.FromContext(ctx).Error(err, "node heartbeat")
			}
		}
	}
}

// heartbeat reports the Node Ready and renews its Lease.
func (c *podCompleter) heartbeat(ctx context.Context) error {
	now := metav1.Now()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := c.kube.CoreV1().Nodes().Get(ctx, benchNode, metav1.GetOptions{})
		if err != nil {
			return err
		}
		capacity := corev1.ResourceList{corev1.ResourceCPU: c.opts.nodeCPU, corev1.ResourceMemory: resource.MustParse("4Ti"), corev1.ResourcePods: resource.MustParse("100000")}
		node.Status.Capacity, node.Status.Allocatable = capacity, capacity
		node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "BenchmarkPodCompleter",
			Message: "hack/benchscale's pod completer: pods are ended, not run", LastHeartbeatTime: now, LastTransitionTime: now}}
		_, err = c.kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("reporting node %s ready: %w", benchNode, err)
	}
	leases := c.kube.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	micro := metav1.NewMicroTime(now.Time)
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: benchNode, Namespace: corev1.NamespaceNodeLease},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(benchNode), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &micro}}
	if _, err := leases.Create(ctx, lease, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		return err
	}
	cur, err := leases.Get(ctx, benchNode, metav1.GetOptions{})
	if err != nil {
		return err
	}
	cur.Spec.RenewTime = &micro
	if _, err := leases.Update(ctx, cur, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
		return err
	}
	return nil
}

// complete binds a pending pod, or ends a bound one with its command's
// result.
func (c *podCompleter) complete(ctx context.Context, key string) error {
	obj, exists, err := c.pods.GetByKey(key)
	if err != nil || !exists {
		return err
	}
	pod := obj.(*corev1.Pod)
	switch {
	case pod.DeletionTimestamp != nil:
		uid := pod.UID
		err := c.kube.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &uid}})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return err
	case pod.Spec.NodeName == "":
		return c.schedule(ctx, key, pod)
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		c.release(key)
		return nil
	}
	if wait := c.stillRunning(key, pod); wait > 0 {
		c.queue.AddAfter(key, wait)
		return nil
	}
	code, msg := c.outcome(ctx, pod)
	if err := c.terminate(ctx, pod, code, msg); err != nil {
		return err
	}
	c.release(key)
	return nil
}

// isConversion reports whether the pod is a conversion pod (not its
// image proof).
func isConversion(pod *corev1.Pod) bool {
	return pod.Labels[v1alpha1.LabelComponent] == v1alpha1.ComponentConversion
}

// cpuRequest is the CPU (millicores) a pod requests: its containers' sum,
// or its largest init container's when more.
func cpuRequest(pod *corev1.Pod) int64 {
	var sum, initMax int64
	for _, ctr := range pod.Spec.Containers {
		sum += ctr.Resources.Requests.Cpu().MilliValue()
	}
	for _, ctr := range pod.Spec.InitContainers {
		initMax = max(initMax, ctr.Resources.Requests.Cpu().MilliValue())
	}
	return max(sum, initMax)
}

// schedule places a pod on the node: at once, unless it is a conversion
// pod the node has no CPU left for, which then waits Unschedulable as
// kube-scheduler leaves it, until a placed conversion pod ends.
func (c *podCompleter) schedule(ctx context.Context, key string, pod *corev1.Pod) error {
	if isConversion(pod) {
		if room := c.place(key, cpuRequest(pod)); !room {
			return c.markUnschedulable(ctx, pod)
		}
	}
	b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
		Target: corev1.ObjectReference{Kind: "Node", Name: benchNode}}
	if err := c.kube.CoreV1().Pods(pod.Namespace).Bind(ctx, b, metav1.CreateOptions{}); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
		c.release(key)
		return fmt.Errorf("binding: %w", err)
	}
	return nil
}

// place takes the CPU a conversion pod requests if the node has it left,
// and reports whether it did; a pod that cannot be placed waits.
func (c *podCompleter) place(key string, cpu int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.placed[key]; ok {
		return true
	}
	var used int64
	for _, v := range c.placed {
		used += v
	}
	if used+cpu > c.opts.nodeCPU.MilliValue() {
		c.waiting[key] = true
		c.noteLocked()
		return false
	}
	delete(c.waiting, key)
	c.placed[key], c.since[key] = cpu, time.Now()
	c.noteLocked()
	return true
}

// release frees what a conversion pod that ended or is gone held, and
// wakes the pods waiting for room, oldest first.
func (c *podCompleter) release(key string) {
	c.mu.Lock()
	_, held := c.placed[key]
	delete(c.placed, key)
	delete(c.since, key)
	if !held {
		delete(c.waiting, key)
		c.noteLocked()
		c.mu.Unlock()
		return
	}
	var waiters []*corev1.Pod
	for k := range c.waiting {
		if obj, ok, _ := c.pods.GetByKey(k); ok {
			waiters = append(waiters, obj.(*corev1.Pod))
		} else {
			delete(c.waiting, k)
		}
	}
	c.noteLocked()
	c.mu.Unlock()
	slices.SortFunc(waiters, func(a, b *corev1.Pod) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	for _, p := range waiters {
		c.queue.Add(p.Namespace + "/" + p.Name)
	}
}

// noteLocked records the peaks; c.mu is held.
func (c *podCompleter) noteLocked() {
	if s := c.opts.stats; s != nil {
		s.mu.Lock()
		s.waiting = len(c.waiting)
		s.maxWaiting, s.maxRunning = max(s.maxWaiting, len(c.waiting)), max(s.maxRunning, len(c.placed))
		s.mu.Unlock()
	}
}

// stillRunning is how long a placed conversion pod has left to run.
func (c *podCompleter) stillRunning(key string, pod *corev1.Pod) time.Duration {
	if !isConversion(pod) || c.opts.conversionRun <= 0 {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.since[key]
	if !ok {
		at = time.Now()
		c.since[key] = at
	}
	return time.Until(at.Add(c.opts.conversionRun))
}

// markUnschedulable reports, as kube-scheduler does, that no node has
// room for the pod.
func (c *podCompleter) markUnschedulable(ctx context.Context, pod *corev1.Pod) error {
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
			return nil
		}
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := c.kube.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if cur.Spec.NodeName != "" {
			return nil
		}
		cur.Status.Phase = corev1.PodPending
		cur.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, Message: schedulerMessage, LastTransitionTime: metav1.Now()}}
		_, err = c.kube.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

// outcome is what the pod's command would have reported.
func (c *podCompleter) outcome(ctx context.Context, pod *corev1.Pod) (int32, string) {
	switch pod.Labels[v1alpha1.LabelComponent] {
	case v1alpha1.ComponentTransfer:
		res, err := c.transferResult(ctx, pod)
		if err != nil {
			return 1, "bench pod completer: " + err.Error()
		}
		return 0, string(wire.TerminationMessage(res))
	case v1alpha1.ComponentConversion:
		m, err := c.migrationOf(ctx, pod)
		if err != nil {
			return 1, "bench pod completer: " + err.Error()
		}
		return 0, builders.ConvertedChecksumLines(m) + benchInspection
	case v1alpha1.ComponentVerification:
		m, err := c.migrationOf(ctx, pod)
		if err != nil {
			return 1, "bench pod completer: " + err.Error()
		}
		res, err := builders.ReadBackResult(m, 0)
		if err != nil {
			return 1, "bench pod completer: " + err.Error()
		}
		return 0, res
	case v1alpha1.ComponentProof:
		return proofOutcome(pod.Labels[v1alpha1.LabelProofOf])
	}
	return 128, "bench pod completer: not a pod of the migration's components"
}

// benchSelfCheck is what the conversion image's self-check prints
// (docs/operators/conversion-image.md), for its proof pod.
const benchSelfCheck = `{"virtV2V":"2.2.0","outputXMLOption":false,"simulated":true,"virtioWin":{"path":"","present":false},"uid":107,"gid":107,"groups":[107],"kvm":"absent","tmpWritable":true,"rootReadOnly":true,"ok":true,"problems":[]}`

// proofOutcome is what an image proof's pod reports: vm-transfer
// --version for the transfer image, the self-check for the conversion's.
func proofOutcome(component string) (int32, string) {
	switch component {
	case v1alpha1.ComponentTransfer:
		v, err := json.Marshal(wire.BuildVersion())
		if err != nil {
			return 1, "bench pod completer: encoding the version: " + err.Error()
		}
		return 0, string(v)
	case v1alpha1.ComponentConversion:
		return 0, benchSelfCheck
	}
	return 128, "bench pod completer: a proof of an unknown component " + component
}

// migrationOf reads the migration a pod works for (its label), whose
// status names the disks and their converted checksums.
func (c *podCompleter) migrationOf(ctx context.Context, pod *corev1.Pod) (*v1alpha1.VirtualMachineMigration, error) {
	name := pod.Labels[v1alpha1.LabelMigrationName]
	if name == "" {
		return nil, errors.New("the pod has no migration label")
	}
	m, err := c.mig.MigrationV1alpha1().VirtualMachineMigrations(pod.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading migration %s: %w", name, err)
	}
	return m, nil
}

// transferResult is the result of a complete transfer of every disk the
// pod's job spec (in its ConfigMap volume) names.
func (c *podCompleter) transferResult(ctx context.Context, pod *corev1.Pod) (*wire.Result, error) {
	data, err := c.specFile(ctx, pod)
	if err != nil {
		return nil, err
	}
	spec, err := wire.ParseJobSpec(data)
	if err != nil {
		return nil, err
	}
	res := &wire.Result{Kind: wire.KindResult, Succeeded: true}
	for _, d := range spec.Disks {
		sum := sha256.Sum256(fmt.Appendf(nil, "bench: disk %d, no bytes moved", d.Key))
		res.Disks = append(res.Disks, wire.DiskResult{Key: d.Key, Bytes: d.CapacityBytes, SHA256: hex.EncodeToString(sum[:])})
	}
	return res, nil
}

// specFile reads the file --spec names from the ConfigMap mounted there.
func (c *podCompleter) specFile(ctx context.Context, pod *corev1.Pod) ([]byte, error) {
	ctr := pod.Spec.Containers[0]
	var specPath string
	for _, a := range ctr.Args {
		if v, ok := strings.CutPrefix(a, "--spec="); ok {
			specPath = v
		}
	}
	if specPath == "" {
		return nil, errors.New("the transfer pod has no --spec argument")
	}
	for _, m := range ctr.VolumeMounts {
		rel, ok := strings.CutPrefix(specPath, strings.TrimSuffix(m.MountPath, "/")+"/")
		if !ok {
			continue
		}
		for _, v := range pod.Spec.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil {
				cm, err := c.kube.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
				if err != nil {
					return nil, fmt.Errorf("reading the job spec's ConfigMap: %w", err)
				}
				return []byte(cm.Data[path.Clean(rel)]), nil
			}
		}
	}
	return nil, fmt.Errorf("--spec=%s is on no ConfigMap volume of the pod", specPath)
}

// terminate reports the pod's container ended with code and msg.
func (c *podCompleter) terminate(ctx context.Context, pod *corev1.Pod, code int32, msg string) error {
	now := metav1.Now()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := c.kube.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		phase, reason := corev1.PodSucceeded, "Completed"
		if code != 0 {
			phase, reason = corev1.PodFailed, "Error"
		}
		ctr := cur.Spec.Containers[0]
		cur.Status.Phase, cur.Status.StartTime = phase, &now
		cur.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: ctr.Name, Image: ctr.Image, ImageID: "bench://" + ctr.Image,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, Message: msg, StartedAt: now, FinishedAt: now}}}}
		_, err = c.kube.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}
