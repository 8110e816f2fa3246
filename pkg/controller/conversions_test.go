package controller

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/test/builders"
)

// maxConversions paces the fixture's stops with n conversion slots.
func maxConversions(n int) func(*Config) {
	return func(cfg *Config) { cfg.Conversions = ConversionLimit{Max: n} }
}

// progressing is m's Progressing condition, required.
func progressing(t *testing.T, m *v1alpha1.VirtualMachineMigration) *metav1.Condition {
	t.Helper()
	c := condition(m, statemachine.ConditionProgressing)
	require.NotNil(t, c, "a Progressing condition")
	return c
}

// movePhase writes m's status in phase p, as the migration's own
// reconcile would, and refreshes the caches.
func (f *fixture) movePhase(m *v1alpha1.VirtualMachineMigration, p v1alpha1.Phase) *v1alpha1.VirtualMachineMigration {
	f.t.Helper()
	cur := f.get(m)
	cur.Status.Phase = p
	cur, err := f.mig.MigrationV1alpha1().VirtualMachineMigrations(cur.Namespace).UpdateStatus(f.ctx, cur, metav1.UpdateOptions{})
	require.NoError(f.t, err)
	f.resync()
	return cur
}

// TestStopsWaitForAConversionSlot (issue 50 item 4): with one conversion
// slot, held by a migration still transferring its disks (its source
// off, its conversion to come), a migration whose transfer slot is free
// waits in Queued, its source untouched and not even looked at, with a
// condition that says what it waits for; when the holder's conversion
// ends, it is woken and stops its source.
func TestStopsWaitForAConversionSlot(t *testing.T) {
	busy := placed("a-busy", v1alpha1.PhaseTransferringDisks, "host-1", "ds1")
	waiting := placed("b-waiting", v1alpha1.PhaseQueued, "host-2", "ds2")
	src := &fakeSource{obs: statemachine.SourceObservation{Observed: true, PowerState: statemachine.PowerStateOn}}
	f := newFixtureWith(t, maxConversions(1), src, busy, waiting)

	after := f.sync(waiting)
	cur := f.get(waiting)
	require.Equal(t, v1alpha1.PhaseQueued, cur.Status.Phase, "the source is stopped while the only conversion slot is held")
	c := progressing(t, cur)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, statemachine.ReasonWaitingForConversionCapacity, c.Reason)
	assert.Equal(t, "1 of 1 conversion slots taken: a migration holds one from the stop of its source to the end of its conversion (--max-conversions=1)", c.Message)
	assert.Nil(t, cur.Status.SourceControl, "committed to the cutover without a conversion slot")
	assert.Empty(t, src.calls, "a migration waiting for a conversion slot does not look at its source")
	assert.Equal(t, statemachine.DefaultWaitInterval, after, "looked at again after the wait interval (or when woken)")
	f.sync(cur)
	assert.Empty(t, f.writes, "waiting again writes nothing")

	// The holder converts: it keeps its slot.
	old := f.get(busy)
	converting := f.movePhase(busy, v1alpha1.PhaseConverting)
	f.c.wakeOnFreedConversionSlot(old, converting)
	assert.Empty(t, queued(f.c), "no slot freed: nobody is woken")
	f.sync(f.get(waiting))
	assert.Equal(t, v1alpha1.PhaseQueued, f.get(waiting).Status.Phase, "the slot is held through the conversion")

	// Its conversion ends: the slot frees and the waiter is woken.
	importing := f.movePhase(busy, v1alpha1.PhaseImporting)
	f.c.wakeOnFreedConversionSlot(converting, importing)
	assert.Equal(t, []string{key(waiting).String()}, queued(f.c), "the waiter is woken when the slot frees")
	f.sync(f.get(waiting))
	cur = f.get(waiting)
	require.Equal(t, v1alpha1.PhaseStoppingSource, cur.Status.Phase, "the stop once a conversion slot is free")
	e := cur.Status.Evidence[len(cur.Status.Evidence)-1]
	assert.Equal(t, "transfer slot available; conversion slot available (slot 1 of 1); source poweredOn", e.Observed)
}

// TestConversionSlotCountsFromStatus: the slots held are counted from the
// phases the cache shows, so a controller started afresh (a restart, a
// new leader) counts the migrations between their stop and the end of
// their conversion, and no other: not one that skips the conversion, not
// one being deleted, not one past its conversion or back in rollback.
func TestConversionSlotCountsFromStatus(t *testing.T) {
	skipped := placed("s-skip", v1alpha1.PhaseTransferringDisks, "host-1", "ds1")
	skipped.Status.AppliedSpec = &v1alpha1.VirtualMachineMigrationSpec{Conversion: v1alpha1.ConversionSpec{Skip: true}}
	deleting := placed("d-deleting", v1alpha1.PhaseConverting, "host-1", "ds1")
	builders.Deleted(deleting)
	objs := []runtime.Object{
		placed("h-stopping", v1alpha1.PhaseStoppingSource, "host-1", "ds1"),
		placed("h-transferring", v1alpha1.PhaseTransferringDisks, "host-1", "ds1"),
		placed("h-converting", v1alpha1.PhaseConverting, "host-1", "ds1"),
		placed("p-importing", v1alpha1.PhaseImporting, "host-1", "ds1"),
		placed("p-rollingback", v1alpha1.PhaseRollingBack, "host-1", "ds1"),
		skipped, deleting,
	}
	waiting := placed("w-waiting", v1alpha1.PhaseQueued, "host-2", "ds2")
	src := &fakeSource{obs: statemachine.SourceObservation{Observed: true, PowerState: statemachine.PowerStateOn}}

	f := newFixtureWith(t, maxConversions(3), src, append(objs, waiting)...)
	f.sync(waiting)
	assert.Contains(t, progressing(t, f.get(waiting)).Message, "3 of 3 conversion slots taken")

	f = newFixtureWith(t, maxConversions(4), src, append(objs, waiting)...)
	f.sync(waiting)
	assert.Equal(t, v1alpha1.PhaseStoppingSource, f.get(waiting).Status.Phase, "the fourth slot is free")

	// A migration that skips the conversion needs no slot.
	skipping := placed("x-skips", v1alpha1.PhaseQueued, "host-3", "ds3")
	builders.SkipConversion(skipping)
	f = newFixtureWith(t, maxConversions(3), src, append(objs, skipping)...)
	f.sync(skipping)
	assert.Equal(t, v1alpha1.PhaseStoppingSource, f.get(skipping).Status.Phase, "a migration without conversion waits for no conversion slot")
}

// TestConversionSlotTakenOnce: two workers that both saw the last slot
// free cannot both take it: the reservation counts what the cache does
// not show yet, is dropped when the status write that would have shown it
// failed, and counts no more once the cache caught up.
func TestConversionSlotTakenOnce(t *testing.T) {
	a := placed("a", v1alpha1.PhaseQueued, "host-1", "ds1")
	b := placed("b", v1alpha1.PhaseQueued, "host-2", "ds2")
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, migrationIndexers())
	require.NoError(t, idx.Add(a))
	require.NoError(t, idx.Add(b))
	s := newConversionSlots(cachedFrom(idx))
	budget := conversionBudget{slots: 1, known: true, source: "--max-conversions=1"}

	assert.False(t, s.look(a, nil, budget, schedulerHold{}).Full)
	assert.False(t, s.look(b, nil, budget, schedulerHold{}).Full, "both see the last slot free")
	require.True(t, s.reserve(a, nil, budget, schedulerHold{}), "the first takes it")
	assert.False(t, s.reserve(b, nil, budget, schedulerHold{}), "the second is refused: the cache does not show the first's yet")
	assert.True(t, s.look(b, nil, budget, schedulerHold{}).Full)

	// a's status write failed: its reservation goes, b may take the slot.
	s.settle(key(a), false)
	require.True(t, s.reserve(b, nil, budget, schedulerHold{}))

	// b's write succeeded and the cache shows it: the reservation gives
	// way to the holder the cache shows, counted once.
	stopping := b.DeepCopy()
	stopping.Status.Phase, stopping.ResourceVersion = v1alpha1.PhaseStoppingSource, "2"
	require.NoError(t, idx.Update(stopping))
	s.settle(key(b), true)
	assert.Empty(t, s.held, "the reservation the cache caught up with is dropped")
	obs := s.look(a, []*v1alpha1.VirtualMachineMigration{stopping}, budget, schedulerHold{})
	assert.True(t, obs.Full)
	assert.Contains(t, obs.Message, "1 of 1 conversion slots taken")
}

// conversionPod is the conversion pod of m's first attempt, Pending with
// the scheduler's message when there is one.
func conversionPod(m *v1alpha1.VirtualMachineMigration, unschedulable string) *corev1.Pod {
	job := builders.Job(m, naming.ConversionJob(m.Name, 1), v1alpha1.ComponentConversion)
	pod := builders.JobPod(job, false, 0, "")
	pod.Status = corev1.PodStatus{Phase: corev1.PodPending}
	if unschedulable != "" {
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, Message: unschedulable}}
	}
	return pod
}

// TestStopsWaitWhileAConversionPodWaitsForRoom: whatever the budget says,
// no source is stopped while the scheduler finds no room for a conversion
// pod of this controller; a pod that cannot be placed for another reason
// (a volume bound to another node) says nothing of the capacity. Once
// the pod is placed, the oldest waiter is woken.
func TestStopsWaitWhileAConversionPodWaitsForRoom(t *testing.T) {
	holder := placed("a-converting", v1alpha1.PhaseConverting, "host-1", "ds1")
	waiting := placed("b-waiting", v1alpha1.PhaseQueued, "host-2", "ds2")
	pod := conversionPod(holder, "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.")
	src := &fakeSource{obs: statemachine.SourceObservation{Observed: true, PowerState: statemachine.PowerStateOn}}
	f := newFixtureWith(t, maxConversions(10), src, holder, waiting, pod)

	f.sync(waiting)
	cur := f.get(waiting)
	require.Equal(t, v1alpha1.PhaseQueued, cur.Status.Phase, "a source stopped while a conversion pod waits for room")
	c := progressing(t, cur)
	assert.Equal(t, statemachine.ReasonWaitingForConversionCapacity, c.Reason)
	assert.Equal(t, "conversion pods of this controller wait for a node with room (the scheduler: Insufficient cpu): no source is stopped until they run", c.Message)

	// The scheduler places it: the waiter is woken, and stops its source.
	placedPod := pod.DeepCopy()
	placedPod.Spec.NodeName, placedPod.Status.Conditions = "node-1", nil
	_, err := f.kube.CoreV1().Pods(placedPod.Namespace).Update(f.ctx, placedPod, metav1.UpdateOptions{})
	require.NoError(t, err)
	f.resync()
	f.c.wakeOnPlacedPod(pod, placedPod)
	assert.Equal(t, []string{key(waiting).String()}, queued(f.c), "the waiter is woken when the pod is placed")
	f.sync(cur)
	assert.Equal(t, v1alpha1.PhaseStoppingSource, f.get(waiting).Status.Phase)

	// A pod its migration left behind (the migration moved past its
	// conversion) holds nothing back.
	left := placed("d-importing", v1alpha1.PhaseImporting, "host-4", "ds4")
	stale := conversionPod(left, "0/1 nodes are available: 1 Insufficient cpu.")
	later := placed("e-waiting", v1alpha1.PhaseQueued, "host-5", "ds5")
	f = newFixtureWith(t, maxConversions(10), src, left, stale, later)
	f.sync(later)
	assert.Equal(t, v1alpha1.PhaseStoppingSource, f.get(later).Status.Phase, "a pod whose migration converts no more says nothing of the capacity")

	// A pod the scheduler cannot place for want of its volume's node
	// holds nothing back.
	other := placed("c-waiting", v1alpha1.PhaseQueued, "host-3", "ds3")
	stuck := conversionPod(holder, "0/3 nodes are available: 3 node(s) had volume node affinity conflict.")
	f = newFixtureWith(t, maxConversions(10), src, holder, other, stuck)
	f.sync(other)
	assert.Equal(t, v1alpha1.PhaseStoppingSource, f.get(other).Status.Phase, "a pod unplaceable for its volume says nothing of the capacity")
}

// TestUnpacedStopsIgnoreConversions: --max-conversions=0 paces nothing,
// the scheduler's word included (the behaviour before conversion pacing).
func TestUnpacedStopsIgnoreConversions(t *testing.T) {
	holder := placed("a-converting", v1alpha1.PhaseConverting, "host-1", "ds1")
	waiting := placed("b-waiting", v1alpha1.PhaseQueued, "host-2", "ds2")
	pod := conversionPod(holder, "0/1 nodes are available: 1 Insufficient memory.")
	src := &fakeSource{obs: statemachine.SourceObservation{Observed: true, PowerState: statemachine.PowerStateOn}}
	f := newFixtureWith(t, maxConversions(0), src, holder, waiting, pod)
	f.sync(waiting)
	cur := f.get(waiting)
	require.Equal(t, v1alpha1.PhaseStoppingSource, cur.Status.Phase)
	assert.Equal(t, "transfer slot available; source poweredOn", cur.Status.Evidence[len(cur.Status.Evidence)-1].Observed)
}

// TestPodWaitsForRoom: what the scheduler lacks, from its message.
func TestPodWaitsForRoom(t *testing.T) {
	m := placed("m", v1alpha1.PhaseConverting, "host-1", "ds1")
	for msg, want := range map[string]string{
		"0/2 nodes are available: 1 Insufficient cpu, 1 Insufficient memory.":           "Insufficient cpu, Insufficient memory",
		"0/1 nodes are available: 1 Insufficient devices.kubevirt.io/kvm.":              "Insufficient devices.kubevirt.io/kvm",
		"0/1 nodes are available: 1 Too many pods.":                                     "Too many pods",
		"0/1 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}.":    "",
		"0/3 nodes are available: 2 Insufficient cpu, 1 node(s) didn't match selector.": "Insufficient cpu",
	} {
		assert.Equal(t, want, podWaitsForRoom(conversionPod(m, msg)), msg)
	}
	assert.Empty(t, podWaitsForRoom(conversionPod(m, "")), "a pod not refused")
	transfer := conversionPod(m, "0/1 nodes are available: 1 Insufficient cpu.")
	transfer.Labels[v1alpha1.LabelComponent] = v1alpha1.ComponentTransfer
	assert.Empty(t, podWaitsForRoom(transfer), "not a conversion pod")
	deleted := conversionPod(m, "0/1 nodes are available: 1 Insufficient cpu.")
	deleted.DeletionTimestamp = builders.TP(0)
	assert.Empty(t, podWaitsForRoom(deleted), "a pod being deleted")
}

// node is a Ready node with these allocatable resources.
func node(name, cpu, memory string, mods ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory),
		corev1.ResourcePods: resource.MustParse("110")}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	for _, mod := range mods {
		mod(n)
	}
	return n
}

// conversionRequests are the default conversion pod's requests.
var conversionRequests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("3Gi")}

// TestConversionsFit: how many conversion pods a node's allocatable
// resources hold, on the nodes one may be placed on.
func TestConversionsFit(t *testing.T) {
	kvm := corev1.ResourceName("devices.kubevirt.io/kvm")
	withKVM := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("3Gi"), kvm: resource.MustParse("1")}
	for name, tc := range map[string]struct {
		node *corev1.Node
		req  corev1.ResourceList
		want int
	}{
		"cpu bound":    {node("n", "4", "64Gi"), conversionRequests, 4},
		"memory bound": {node("n", "16", "10Gi"), conversionRequests, 3},
		"milli cpu":    {node("n", "3500m", "64Gi"), conversionRequests, 3},
		"too small":    {node("n", "500m", "64Gi"), conversionRequests, 0},
		"pods bound":   {node("n", "16", "64Gi", func(n *corev1.Node) { n.Status.Allocatable[corev1.ResourcePods] = resource.MustParse("2") }), conversionRequests, 2},
		"not ready":    {node("n", "4", "64Gi", func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionUnknown }), conversionRequests, 0},
		"cordoned":     {node("n", "4", "64Gi", func(n *corev1.Node) { n.Spec.Unschedulable = true }), conversionRequests, 0},
		"tainted NoSchedule": {node("n", "4", "64Gi", func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}
		}), conversionRequests, 0},
		"tainted PreferNoSchedule": {node("n", "4", "64Gi", func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule}}
		}), conversionRequests, 4},
		"no kvm device": {node("n", "4", "64Gi"), withKVM, 0},
		"kvm devices":   {node("n", "4", "64Gi", func(n *corev1.Node) { n.Status.Allocatable[kvm] = resource.MustParse("1000") }), withKVM, 4},
	} {
		assert.Equal(t, tc.want, conversionsFit(tc.node, tc.req), name)
	}
}

// TestBudgetFromNodes: --max-conversions=auto sums what the nodes hold,
// says so, waits (unknown) until the nodes were read and says why they
// cannot be, and counts them again after nodeRecount.
func TestBudgetFromNodes(t *testing.T) {
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	synced := false
	n := &nodeCapacity{nodes: store, synced: func() bool { return synced }, requests: conversionRequests}
	now := builders.T0

	b := n.budget(now)
	assert.False(t, b.known, "not sized before the nodes were read")
	assert.Equal(t, "reading the nodes (--max-conversions=auto)", b.source)
	n.listErr = `nodes is forbidden: User "system:serviceaccount:vm-migration-system:migration-controller" cannot list resource "nodes"`
	assert.Contains(t, n.budget(now).source, "give the controller list and watch on nodes, or set --max-conversions to a number")

	synced = true
	require.NoError(t, store.Add(node("a", "2", "8Gi")))
	require.NoError(t, store.Add(node("b", "8", "10Gi")))
	require.NoError(t, store.Add(node("cp", "8", "32Gi", func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}
	})))
	b = n.budget(now)
	assert.True(t, b.known)
	assert.Equal(t, 5, b.slots, "2 on a (cpu), 3 on b (memory), none on the tainted node")
	assert.Equal(t, "--max-conversions=auto: 5 conversion pods of cpu 1, memory 3Gi fit the allocatable resources of 2 schedulable nodes", b.source)

	require.NoError(t, store.Delete(node("b", "8", "10Gi")))
	assert.Equal(t, 5, n.budget(now.Add(nodeRecount/2)).slots, "counted again only after nodeRecount")
	assert.Equal(t, 2, n.budget(now.Add(nodeRecount)).slots)

	// No node holds a conversion pod: every stop waits, saying so.
	require.NoError(t, store.Delete(node("a", "2", "8Gi")))
	b = n.budget(now.Add(2 * nodeRecount))
	s := newConversionSlots(func(cache.ObjectName) (*v1alpha1.VirtualMachineMigration, bool) { return nil, false })
	obs := s.look(placed("q", v1alpha1.PhaseQueued, "host-1", "ds1"), nil, b, schedulerHold{})
	assert.True(t, obs.Full)
	assert.Equal(t, "no conversion slot: --max-conversions=auto: 0 conversion pods of cpu 1, memory 3Gi fit the allocatable resources of 0 schedulable nodes", obs.Message)
}

// TestPodRequests: a resource only limited is requested at its limit.
func TestPodRequests(t *testing.T) {
	kvm := corev1.ResourceName("devices.kubevirt.io/kvm")
	got := PodRequests(corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("3Gi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("4Gi"), kvm: resource.MustParse("1")},
	})
	assert.Equal(t, "cpu 1, devices.kubevirt.io/kvm 1, memory 3Gi", describeRequests(got))
}

// TestConversionCollector: the budget, the slots held, the migrations
// waiting before their stop and the conversion pods waiting for room.
func TestConversionCollector(t *testing.T) {
	holder := placed("a-converting", v1alpha1.PhaseConverting, "host-1", "ds1")
	transferring := placed("b-transferring", v1alpha1.PhaseTransferringDisks, "host-1", "ds1")
	waiting := placed("c-waiting", v1alpha1.PhaseQueued, "host-2", "ds2")
	pod := conversionPod(holder, "0/1 nodes are available: 1 Insufficient memory.")
	src := &fakeSource{obs: statemachine.SourceObservation{Observed: true, PowerState: statemachine.PowerStateOn}}
	f := newFixtureWith(t, maxConversions(2), src, holder, transferring, waiting, pod)
	f.sync(waiting)
	require.Equal(t, statemachine.ReasonWaitingForConversionCapacity, progressing(t, f.get(waiting)).Reason)
	want := `
# HELP vm_migration_conversion_pods_waiting_for_room Conversion pods of the controller waiting Unschedulable for lack of resources (Insufficient cpu, memory, a device; Too many pods): while any does, no source is stopped.
# TYPE vm_migration_conversion_pods_waiting_for_room gauge
vm_migration_conversion_pods_waiting_for_room 1
# HELP vm_migration_conversion_slots Conversion slots in force (--max-conversions, or the count the nodes give with auto); absent while not paced or not sized yet.
# TYPE vm_migration_conversion_slots gauge
vm_migration_conversion_slots 2
# HELP vm_migration_conversion_slots_held Migrations holding a conversion slot: from the stop of their source to the end of their conversion.
# TYPE vm_migration_conversion_slots_held gauge
vm_migration_conversion_slots_held 2
# HELP vm_migration_waiting_for_conversion_capacity Migrations waiting in Queued, their source running, for a conversion slot or for the scheduler to find room for a conversion pod.
# TYPE vm_migration_waiting_for_conversion_capacity gauge
vm_migration_waiting_for_conversion_capacity 1
`
	assert.NoError(t, testutil.CollectAndCompare(conversionCollector{f.c}, strings.NewReader(want)))
}
