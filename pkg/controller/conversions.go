package controller

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
)

// Conversion pacing (issue 50). A source is stopped only when the whole
// path after the stop can run without queueing. The transfer has its
// slots (slots.go); the conversion pod, which needs a node with room for
// a helper VM, has conversion slots: a migration takes one in the same
// reservation step as its transfer slot, right before the stop, and holds
// it until its conversion ended (statemachine.HoldsConversionSlot), so
// that the pod finds room when the transfer ends instead of waiting
// Unschedulable with the source off (and failing the attempt after
// --pod-start-timeout). The verification pods that follow are small
// (100m CPU, 32Mi) and not paced.
//
// Two signals bound the stops, and both must let one through:
//   - a budget of slots, cluster-wide (the watched namespaces): set
//     (--max-conversions=N), or derived from the nodes (auto: how many
//     conversion pods the allocatable resources of the schedulable nodes
//     hold). A budget is known before any pod exists, so a wave's first
//     stops are paced too.
//   - what the scheduler says: while a conversion pod of this controller
//     waits Unschedulable for lack of resources (Insufficient cpu,
//     memory, a device; Too many pods), no source is stopped. The budget
//     from the nodes counts their allocatable resources, not what other
//     pods (the migrated VMs among them) use of them; the scheduler knows,
//     and this hold corrects a budget set or derived too high.
//
// Nothing of it is kept but in memory, and that only for the instant the
// cache lags behind a status write (the reservations, as for transfer
// slots): the slots held are counted from the phases of the cached
// migrations, the pods waiting from the cached pods, so a restarted
// controller recounts them from what it observes and a slot is never
// leaked (a migration that leaves the phases holds none).

// ConversionLimit is how the stops are paced by conversion capacity.
type ConversionLimit struct {
	// Max is the number of conversion slots; with Auto false, 0 means
	// conversions do not pace the stops (neither the budget nor the
	// scheduler's word).
	Max int
	// Auto sizes the budget from the nodes (see nodeCapacity); Max is
	// then ignored.
	Auto bool
	// PodRequests are what one conversion pod requests (Auto only).
	PodRequests corev1.ResourceList
}

// Paced reports whether conversion capacity paces the stops at all.
func (l ConversionLimit) Paced() bool { return l.Auto || l.Max > 0 }

// String is the limit as the flag spells it.
func (l ConversionLimit) String() string {
	if l.Auto {
		return "auto"
	}
	return fmt.Sprint(l.Max)
}

// conversionBudget is the number of conversion slots in force, and where
// it comes from (for the messages).
type conversionBudget struct {
	// slots is the budget; meaningful when known.
	slots int
	// known is false while an automatic budget cannot be sized (the nodes
	// not read yet, or unreadable): stops wait meanwhile.
	known bool
	// source says where slots comes from, or why it is not known.
	source string
}

// schedulerHold is what the scheduler says of the conversion pods waiting
// for room: how many, and the scheduler's reason for the oldest.
type schedulerHold struct {
	pods   int
	reason string
}

// conversionSlots remembers the migrations that took a conversion slot
// whose new phase the informer cache may not show yet, so that two
// workers deciding at the same instant cannot both take the last slot.
// As for transfer slots (slotReservations), the slot is looked at while
// observing and taken by reserve, which counts again under the lock; a
// reservation counts until the cache caught up with it.
type conversionSlots struct {
	cached cachedMigration
	mu     sync.Mutex
	// held maps a migration to the resourceVersion it reserved from.
	held map[cache.ObjectName]string
}

func newConversionSlots(cached cachedMigration) *conversionSlots {
	return &conversionSlots{cached: cached, held: map[cache.ObjectName]string{}}
}

// look says whether m may take a conversion slot now, given the
// migrations the cache shows holding one (holders), the budget and what
// the scheduler says. It changes nothing.
func (s *conversionSlots) look(m *v1alpha1.VirtualMachineMigration, holders []*v1alpha1.VirtualMachineMigration, b conversionBudget, hold schedulerHold) statemachine.CapacityObservation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.verdict(m, holders, b, hold)
}

// reserve takes a conversion slot for m if one is still free, and reports
// whether it did.
func (s *conversionSlots) reserve(m *v1alpha1.VirtualMachineMigration, holders []*v1alpha1.VirtualMachineMigration, b conversionBudget, hold schedulerHold) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.verdict(m, holders, b, hold).Full {
		return false
	}
	s.held[cache.MetaObjectToName(m)] = m.ResourceVersion
	return true
}

// settle drops the reservation of key when its phase holds no slot any
// more (holds false: it went on past its conversion, failed, or is gone),
// and those the cache caught up with.
func (s *conversionSlots) settle(key cache.ObjectName, holds bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, rv := range s.held {
		if caughtUp(s.cached, k, rv, statemachine.HoldsConversionSlot) {
			delete(s.held, k)
		}
	}
	if !holds {
		delete(s.held, key)
	}
}

// taken counts the slots held by others than m: the holders the cache
// shows and the reservations it does not show yet. Call with the lock held.
func (s *conversionSlots) taken(m *v1alpha1.VirtualMachineMigration, holders []*v1alpha1.VirtualMachineMigration) int {
	self := cache.MetaObjectToName(m)
	seen := map[cache.ObjectName]bool{}
	for _, h := range holders {
		if statemachine.HoldsConversionSlot(h) {
			seen[cache.MetaObjectToName(h)] = true
		}
	}
	for k, rv := range s.held {
		if !caughtUp(s.cached, k, rv, statemachine.HoldsConversionSlot) {
			seen[k] = true
		}
	}
	delete(seen, self)
	return len(seen)
}

// verdict compares what is taken with the budget. Call with the lock held.
func (s *conversionSlots) verdict(m *v1alpha1.VirtualMachineMigration, holders []*v1alpha1.VirtualMachineMigration, b conversionBudget, hold schedulerHold) statemachine.CapacityObservation {
	switch {
	case hold.pods > 0:
		return statemachine.CapacityObservation{Full: true, Message: fmt.Sprintf(
			"conversion pods of this controller wait for a node with room (the scheduler: %s): no source is stopped until they run", hold.reason)}
	case !b.known:
		return statemachine.CapacityObservation{Full: true, Message: "the conversion slots are not sized yet: " + b.source}
	}
	if b.slots <= 0 {
		return statemachine.CapacityObservation{Full: true, Message: "no conversion slot: " + b.source}
	}
	taken := s.taken(m, holders)
	if taken >= b.slots {
		return statemachine.CapacityObservation{Full: true, Message: fmt.Sprintf(
			"%d of %d conversion slots taken: a migration holds one from the stop of its source to the end of its conversion (%s)", taken, b.slots, b.source)}
	}
	return statemachine.CapacityObservation{Message: fmt.Sprintf("slot %d of %d", taken+1, b.slots)}
}

// lookConversion is the conversion capacity m's stop needs, for the
// observation: nothing to look at unless the stops are paced and m
// converts its guest.
func (c *Controller) lookConversion(m *v1alpha1.VirtualMachineMigration) (statemachine.CapacityObservation, error) {
	if !c.cfg.Conversions.Paced() || !statemachine.NeedsConversionSlot(&m.Spec) {
		return statemachine.CapacityObservation{}, nil
	}
	holders, err := c.conversionHolders()
	if err != nil {
		return statemachine.CapacityObservation{}, err
	}
	return c.conversions.look(m, holders, c.conversionBudget(), c.schedulerHold()), nil
}

// reserveConversion is the reservation step of a decision that stops the
// source: it takes a conversion slot, and is dropped (false) when another
// worker took the last one since it was observed. Any other decision
// releases a reservation its phase no longer needs.
func (c *Controller) reserveConversion(m *v1alpha1.VirtualMachineMigration, dec statemachine.Decision) bool {
	key := cache.MetaObjectToName(m)
	next := m.DeepCopy()
	next.Status = dec.Status
	holdsNext := statemachine.HoldsConversionSlot(next)
	if !c.cfg.Conversions.Paced() || !holdsNext || statemachine.HoldsConversionSlot(m) {
		c.conversions.settle(key, holdsNext)
		return true
	}
	holders, err := c.conversionHolders()
	if err != nil {
		return false
	}
	return c.conversions.reserve(m, holders, c.conversionBudget(), c.schedulerHold())
}

// conversionHolders are the cached migrations holding a conversion slot.
func (c *Controller) conversionHolders() ([]*v1alpha1.VirtualMachineMigration, error) {
	return c.indexed(lookup{indexConversionSlot, []string{conversionSlotHeld}})
}

// conversionBudget is the budget in force: the configured number, or the
// one the nodes give.
func (c *Controller) conversionBudget() conversionBudget {
	lim := c.cfg.Conversions
	if !lim.Auto {
		return conversionBudget{slots: lim.Max, known: true, source: fmt.Sprintf("--max-conversions=%d", lim.Max)}
	}
	if c.nodes == nil {
		return conversionBudget{source: "--max-conversions=auto, and the controller does not read the nodes: set --max-conversions to a number"}
	}
	return c.nodes.budget(c.clock.Now())
}

// Values of the conversion indexes.
const (
	conversionSlotHeld     = "held"
	conversionWaiting      = "waiting"
	podWaitsForConversions = "waits-for-room"
)

// waitsForConversion reports whether a cached migration waits in Queued
// for a conversion slot (its Progressing condition says so).
func waitsForConversion(m *v1alpha1.VirtualMachineMigration) bool {
	if m.Status.Phase != v1alpha1.PhaseQueued || m.DeletionTimestamp != nil {
		return false
	}
	for _, cond := range m.Status.Conditions {
		if cond.Type == statemachine.ConditionProgressing {
			return cond.Reason == statemachine.ReasonWaitingForConversionCapacity
		}
	}
	return false
}

// conversionIndex indexes the migrations that match under one value.
func conversionIndex(match func(*v1alpha1.VirtualMachineMigration) bool, value string) cache.IndexFunc {
	return func(obj any) ([]string, error) {
		if m, ok := obj.(*v1alpha1.VirtualMachineMigration); ok && match(m) {
			return []string{value}, nil
		}
		return nil, nil
	}
}

// indexConversionPods indexes the conversion pods that wait for a node
// with room (podWaitsForRoom).
const indexConversionPods = "conversion-waits-for-room"

// conversionPodIndexers are the indexes the controller adds to the cache
// of its pods.
func conversionPodIndexers() cache.Indexers {
	return cache.Indexers{indexConversionPods: func(obj any) ([]string, error) {
		if pod, ok := obj.(*corev1.Pod); ok && podWaitsForRoom(pod) != "" {
			return []string{podWaitsForConversions}, nil
		}
		return nil, nil
	}}
}

// resourceShortage finds what the scheduler found too little of in its
// message: "Insufficient cpu", "Insufficient devices.kubevirt.io/kvm",
// "Too many pods" (NodeResourcesFit). Other reasons a pod may not be
// placed (a taint, a volume bound to another node, an affinity) say
// nothing of the capacity, and are the attempt's problem alone.
var resourceShortage = regexp.MustCompile(`Insufficient [A-Za-z0-9_-]+(?:[./][A-Za-z0-9_-]+)*|Too many pods`)

// podWaitsForRoom says, for a conversion pod of this controller that
// waits Unschedulable for lack of resources, what it lacks ("Insufficient
// cpu, Insufficient memory"); "" for any other pod.
func podWaitsForRoom(pod *corev1.Pod) string {
	if pod.Labels[v1alpha1.LabelComponent] != v1alpha1.ComponentConversion || pod.DeletionTimestamp != nil ||
		pod.Spec.NodeName != "" || (pod.Status.Phase != "" && pod.Status.Phase != corev1.PodPending) {
		return ""
	}
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
			return strings.Join(slices.Compact(slices.Sorted(slices.Values(resourceShortage.FindAllString(cond.Message, -1)))), ", ")
		}
	}
	return ""
}

// schedulerHold reads the conversion pods waiting for room from the pod
// cache: how many, and what the oldest lacks. Only the pods of migrations
// holding a conversion slot count: a pod its migration left behind (it
// moved on, or is gone) will not run, and holds nothing back.
func (c *Controller) schedulerHold() schedulerHold {
	if c.podIndex == nil {
		return schedulerHold{}
	}
	objs, err := c.podIndex.ByIndex(indexConversionPods, podWaitsForConversions)
	if err != nil || len(objs) == 0 {
		return schedulerHold{}
	}
	var oldest *corev1.Pod
	n := 0
	for _, o := range objs {
		pod, ok := o.(*corev1.Pod)
		if !ok || !c.convertsNow(pod) {
			continue
		}
		n++
		if oldest == nil || pod.CreationTimestamp.Before(&oldest.CreationTimestamp) ||
			pod.CreationTimestamp.Equal(&oldest.CreationTimestamp) && pod.Namespace+"/"+pod.Name < oldest.Namespace+"/"+oldest.Name {
			oldest = pod
		}
	}
	if oldest == nil {
		return schedulerHold{}
	}
	return schedulerHold{pods: n, reason: podWaitsForRoom(oldest)}
}

// convertsNow reports whether the pod's migration (its labels) is cached
// and holds a conversion slot.
func (c *Controller) convertsNow(pod *corev1.Pod) bool {
	m, err := c.migrations.VirtualMachineMigrations(pod.Namespace).Get(pod.Labels[v1alpha1.LabelMigrationName])
	return err == nil && string(m.UID) == pod.Labels[v1alpha1.LabelMigrationUID] && statemachine.HoldsConversionSlot(m)
}

// pace sets up what conversion pacing reads: the index of the conversion
// pods waiting for room, the waking of the migrations waiting for a
// conversion slot when a pod is placed, and the node cache of an
// automatic budget. Nothing when the stops are not paced.
func (c *Controller) pace(inf Informers) error {
	lim := c.cfg.Conversions
	if !lim.Paced() {
		return nil
	}
	if pods := inf.Children["pods"]; pods != nil {
		if err := pods.AddIndexers(conversionPodIndexers()); err != nil {
			return fmt.Errorf("indexing the pod cache: %w", err)
		}
		c.podIndex = pods.GetIndexer()
		if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
			UpdateFunc: func(old, obj any) { c.wakeOnPlacedPod(old, obj) },
			DeleteFunc: func(obj any) { c.wakeOnPlacedPod(obj, nil) },
		}); err != nil {
			return fmt.Errorf("registering the conversion pod handler: %w", err)
		}
	}
	if lim.Auto && inf.Nodes != nil {
		c.nodes = newNodeCapacity(inf.Nodes, lim.PodRequests)
	}
	return nil
}

// wakeOnPlacedPod wakes the oldest migration waiting for a conversion
// slot when a conversion pod that waited for room no longer does (the
// scheduler placed it, or it is gone): the hold may have lifted.
func (c *Controller) wakeOnPlacedPod(old, obj any) {
	before, ok := unwrapTombstone(old).(*corev1.Pod)
	if !ok || podWaitsForRoom(before) == "" {
		return
	}
	if now, isPod := obj.(*corev1.Pod); isPod && podWaitsForRoom(now) != "" {
		return
	}
	c.wakeConversionWaiters(1)
}

// wakeConversionWaiters enqueues the n oldest migrations waiting in
// Queued for a conversion slot, so that a freed slot is taken at once
// rather than at the waiters' next periodic look.
func (c *Controller) wakeConversionWaiters(n int) {
	waiters, err := c.indexed(lookup{indexConversionWaiting, []string{conversionWaiting}})
	if err != nil {
		return
	}
	for range min(n, len(waiters)) {
		first := oldest(waiters)
		c.queue.Add(cache.MetaObjectToName(first))
		waiters = slices.DeleteFunc(waiters, func(m *v1alpha1.VirtualMachineMigration) bool { return m == first })
	}
}

// wakeOnFreedConversionSlot wakes a waiter when a migration leaves a
// conversion slot: its phase moved past the conversion, its deletion
// began, or it is gone (obj nil). The informer calls it once the cache
// shows the change, so the woken reconcile counts the slot as free.
func (c *Controller) wakeOnFreedConversionSlot(old, obj any) {
	if !c.cfg.Conversions.Paced() {
		return
	}
	before := migrationOf(old)
	if before == nil || !statemachine.HoldsConversionSlot(before) {
		return
	}
	if now := migrationOf(obj); now != nil && statemachine.HoldsConversionSlot(now) {
		return
	}
	c.wakeConversionWaiters(1)
}

// Conversion pacing's series, read from the caches at scrape time.
var (
	conversionSlotsDesc = prometheus.NewDesc("vm_migration_conversion_slots",
		"Conversion slots in force (--max-conversions, or the count the nodes give with auto); absent while not paced or not sized yet.", nil, nil)
	conversionSlotsHeldDesc = prometheus.NewDesc("vm_migration_conversion_slots_held",
		"Migrations holding a conversion slot: from the stop of their source to the end of their conversion.", nil, nil)
	conversionWaitingDesc = prometheus.NewDesc("vm_migration_waiting_for_conversion_capacity",
		"Migrations waiting in Queued, their source running, for a conversion slot or for the scheduler to find room for a conversion pod.", nil, nil)
	conversionPodsWaitingDesc = prometheus.NewDesc("vm_migration_conversion_pods_waiting_for_room",
		"Conversion pods of the controller waiting Unschedulable for lack of resources (Insufficient cpu, memory, a device; Too many pods): while any does, no source is stopped.", nil, nil)
)

// conversionCollector exports the conversion slots: the budget, the slots
// held, the migrations waiting for one, the conversion pods waiting for
// room.
type conversionCollector struct{ c *Controller }

func (p conversionCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{conversionSlotsDesc, conversionSlotsHeldDesc, conversionWaitingDesc, conversionPodsWaitingDesc} {
		ch <- d
	}
}

func (p conversionCollector) Collect(ch chan<- prometheus.Metric) {
	c := p.c
	count := func(index, value string) float64 {
		objs, err := c.migrationIndex.ByIndex(index, value)
		if err != nil {
			return 0
		}
		return float64(len(objs))
	}
	if c.cfg.Conversions.Paced() {
		if b := c.conversionBudget(); b.known {
			ch <- prometheus.MustNewConstMetric(conversionSlotsDesc, prometheus.GaugeValue, float64(b.slots))
		}
	}
	ch <- prometheus.MustNewConstMetric(conversionSlotsHeldDesc, prometheus.GaugeValue, count(indexConversionSlot, conversionSlotHeld))
	ch <- prometheus.MustNewConstMetric(conversionWaitingDesc, prometheus.GaugeValue, count(indexConversionWaiting, conversionWaiting))
	ch <- prometheus.MustNewConstMetric(conversionPodsWaitingDesc, prometheus.GaugeValue, float64(c.schedulerHold().pods))
}
