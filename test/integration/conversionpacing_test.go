//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/controller"
	"platform.example/vm-migration/pkg/manager"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/steps/pipeline"
	"platform.example/vm-migration/test/builders"
)

// addNode registers a Ready node with room for one conversion pod of the
// default requests (1 CPU, 3Gi), as a kubelet would report it, and
// removes it when the test ends.
func addNode(t *testing.T, w *walkEnv, name string) {
	t.Helper()
	ctx := testContext(t)
	list, err := w.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, list.Items, "this test counts the cluster's nodes: another test left one")
	node, err := w.kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err, "registering node %s", name)
	t.Cleanup(func() { _ = w.kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	// The API server taints a new node not-ready (TaintNodesByCondition);
	// the node lifecycle controller, which this control plane does not
	// run, removes the taint once the node reports Ready.
	node.Spec.Taints = nil
	node, err = w.kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
	require.NoError(t, err, "removing node %s's not-ready taint", name)
	room := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")}
	node.Status.Capacity, node.Status.Allocatable = room, room
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	_, err = w.kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	require.NoError(t, err, "reporting node %s ready", name)
}

// approve sets spec.policy.approved on the migration name.
func (w *walkEnv) approve(name string) {
	w.t.Helper()
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"policy": map[string]any{"approved": true}}})
	require.NoError(w.t, err)
	_, err = w.mig.MigrationV1alpha1().VirtualMachineMigrations(w.ns).Patch(testContext(w.t), name, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(w.t, err, "approving %s", name)
}

// waitNamed polls the migration name until ok holds.
func (w *walkEnv) waitNamed(name, what string, ok func(*v1alpha1.VirtualMachineMigration) bool) *v1alpha1.VirtualMachineMigration {
	w.t.Helper()
	var last *v1alpha1.VirtualMachineMigration
	require.EventuallyWithT(w.t, func(c *assert.CollectT) {
		last = w.getNamed(name)
		assert.True(c, ok(last), "%s: %s; status: %s", name, what, describeStatus(last))
	}, 30*time.Second, 100*time.Millisecond, "%s: %s: not within 30s", name, what)
	return last
}

// TestConversionSlotsFromNodes (issue 50 item 4): against the real API
// server, the controller as its ServiceAccount with the shipped RBAC
// sizes its conversion slots from the nodes (--max-conversions=auto):
// one node with room for one conversion pod gives one slot. Of two
// approved migrations, one stops its source; the other waits in Queued,
// its source running, saying what it waits for, through the first one's
// transfer and conversion, and stops its source once that conversion
// ended.
func TestConversionSlotsFromNodes(t *testing.T) {
	w := newWalkEnvWith(t, func(o *manager.Options) { o.Conversions = controller.ConversionLimit{Auto: true} })
	addNode(t, w, "conversion-pacing-"+w.ns)
	const second, secondVM = "walk-02", "DC0_H0_VM1"
	w.newWalkMigration()
	w.newMigrationOf(second, secondVM)
	w.approve(walkMigration)
	w.approve(second)

	// One of them takes the slot; which one is the workers' race.
	var first, waiting string
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		a, b := w.getNamed(walkMigration), w.getNamed(second)
		switch {
		case a.Status.Phase == v1alpha1.PhaseTransferringDisks:
			first, waiting = walkMigration, second
		case b.Status.Phase == v1alpha1.PhaseTransferringDisks:
			first, waiting = second, walkMigration
		}
		assert.NotEmpty(c, first, "one transfers: %s; %s", describeStatus(a), describeStatus(b))
	}, 30*time.Second, 100*time.Millisecond)
	waitsForConversion := func(m *v1alpha1.VirtualMachineMigration) bool {
		c := meta.FindStatusCondition(m.Status.Conditions, statemachine.ConditionProgressing)
		return m.Status.Phase == v1alpha1.PhaseQueued && c != nil && c.Reason == statemachine.ReasonWaitingForConversionCapacity
	}
	m := w.waitNamed(waiting, "waits for a conversion slot", waitsForConversion)
	c := meta.FindStatusCondition(m.Status.Conditions, statemachine.ConditionProgressing)
	assert.Equal(t, "1 of 1 conversion slots taken: a migration holds one from the stop of its source to the end of its conversion "+
		"(--max-conversions=auto: 1 conversion pods of cpu 1, memory 3Gi fit the allocatable resources of 1 schedulable nodes)", c.Message)
	assert.True(t, statemachine.SourceUntouched(&m.Status), "the waiting migration touched its source")

	// The first transfers, then converts: the slot stays taken.
	f := w.getNamed(first)
	w.finishJob(naming.TransferJob(first, 1), pipeline.TransferContainer, transferDone(t, f))
	f = w.waitNamed(first, "converting", func(m *v1alpha1.VirtualMachineMigration) bool { return m.Status.Phase == v1alpha1.PhaseConverting })
	time.Sleep(2 * time.Second) // the wait interval is 1s: the waiter looked again
	assert.True(t, waitsForConversion(w.getNamed(waiting)), "the slot is held through the conversion: %s", describeStatus(w.getNamed(waiting)))

	// Its conversion ends: the waiter stops its source.
	w.finishJob(naming.ConversionJob(first, 1), pipeline.ConversionContainer, builders.ConvertedChecksumLines(f)+walkInspection)
	w.waitNamed(first, "importing", func(m *v1alpha1.VirtualMachineMigration) bool { return m.Status.Phase == v1alpha1.PhaseImporting })
	m = w.waitNamed(waiting, "transferring", func(m *v1alpha1.VirtualMachineMigration) bool {
		return m.Status.Phase == v1alpha1.PhaseTransferringDisks
	})
	var queued *v1alpha1.CheckpointEvidence
	for i := range m.Status.Evidence {
		if m.Status.Evidence[i].Phase == v1alpha1.PhaseQueued {
			queued = &m.Status.Evidence[i]
		}
	}
	require.NotNil(t, queued, "the Queued evidence")
	assert.True(t, strings.HasPrefix(queued.Observed, "transfer slot available; conversion slot available (slot 1 of 1); source poweredOn"), queued.Observed)
}
