//go:build integration

package integration

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/manager"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/transfer/wire"
)

// waveVMs are the simulator's VMs a wave migrates: one migration each,
// of one namespace and one pod shape.
var waveVMs = []string{"DC0_H0_VM0", "DC0_H0_VM1", "DC0_C0_RP0_VM0", "DC0_C0_RP0_VM1"}

// proofWave starts a controller with the image proofs on and applies a
// wave of migrations at once (each waiting for approval once validated);
// it returns once every one of them waits on its image proofs and the
// controller made every proof Job it makes for them.
func proofWave(t *testing.T) (*walkEnv, []string) {
	t.Helper()
	w := newWalkEnvWith(t, func(o *manager.Options) { o.Pipeline.ImageProofs = true })
	var names []string
	for i, vm := range waveVMs {
		m := w.newMigrationOf(fmt.Sprintf("wave-%02d", i), vm)
		names = append(names, m.Name)
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, name := range names {
			m, err := w.mig.MigrationV1alpha1().VirtualMachineMigrations(w.ns).Get(testContext(t), name, metav1.GetOptions{})
			if !assert.NoError(c, err) {
				return
			}
			assert.True(c, m.Status.Phase == v1alpha1.PhaseValidating && strings.Contains(describeStatus(m), "proving that the"),
				"%s waits on its proofs; status: %s", name, describeStatus(m))
		}
	}, 30*time.Second, 100*time.Millisecond, "the wave waiting on its image proofs")
	// Many polls more, for every proof Job the controller makes.
	time.Sleep(10 * walkPoll)
	return w, names
}

// createdCount is how many objects the controller created at the
// collection path ending in resource ("jobs", "serviceaccounts").
func (w *walkEnv) createdCount(resource string) int {
	n := 0
	for _, l := range w.writesSince(0) {
		if strings.Contains(l, " POST ") && strings.HasSuffix(strings.Fields(l)[2], "/"+resource) && strings.HasSuffix(l, "-> 201") {
			n++
		}
	}
	return n
}

// proofJobs are the proof Jobs of the test's namespace.
func (w *walkEnv) proofJobs() []batchv1.Job {
	w.t.Helper()
	sel := labels.SelectorFromSet(labels.Set{v1alpha1.LabelComponent: v1alpha1.ComponentProof}).String()
	jobs, err := w.kube.BatchV1().Jobs(w.ns).List(testContext(w.t), metav1.ListOptions{LabelSelector: sel})
	require.NoError(w.t, err, "listing the proof Jobs")
	return jobs.Items
}

// endProofs plays the Job controller and kubelet for every proof Job:
// the transfer image's self-check prints transfer (and exits 0 when
// transferPasses), the conversion image's passes.
func (w *walkEnv) endProofs(transferPasses bool, transfer string) {
	w.t.Helper()
	selfCheck := `{"virtV2V":"2.2.0","outputXMLOption":true,"ok":true,"problems":[]}`
	for _, job := range w.proofJobs() {
		container := job.Spec.Template.Spec.Containers[0].Name
		switch job.Labels[v1alpha1.LabelProofOf] {
		case v1alpha1.ComponentTransfer:
			w.endJob(job.Name, container, transfer, transferPasses)
		default:
			w.finishJob(job.Name, container, selfCheck)
		}
	}
}

// TestAWaveProvesEachImageOnce: a wave of migrations of one namespace and
// pod shape, applied together, creates exactly one proof Job per image
// (and one ServiceAccount for the transfer image's), whose results serve
// every migration of the wave; no migration deletes them.
func TestAWaveProvesEachImageOnce(t *testing.T) {
	w, names := proofWave(t)
	assert.Equal(t, 2, w.createdCount("jobs"), "%d proof Jobs for %d migrations, want 2 (one per image)", w.createdCount("jobs"), len(names))
	assert.Equal(t, 1, w.createdCount("serviceaccounts"), "proof ServiceAccounts, want 1 (the transfer image's)")

	version := `{"command":"vm-transfer","version":"v0.1.0","goVersion":"go1.26.8","specVersion":"` + wire.SpecVersion + `"}`
	w.endProofs(true, version)
	for _, name := range names {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			m, err := w.mig.MigrationV1alpha1().VirtualMachineMigrations(w.ns).Get(testContext(t), name, metav1.GetOptions{})
			if assert.NoError(c, err) {
				assert.Equal(c, v1alpha1.PhaseAwaitingApproval, m.Status.Phase, "%s: %s", name, describeStatus(m))
				assert.Len(c, m.Status.ImageProofs, 2, "%s: both images proven", name)
			}
		}, 30*time.Second, 100*time.Millisecond, "%s validated by the wave's proofs", name)
	}
	assert.Equal(t, 2, w.createdCount("jobs"), "proof Jobs once the wave validated, want 2")
	jobs := w.proofJobs()
	assert.Len(t, jobs, 2, "the proof Jobs stay for their TTL: no migration deletes them")
	sas, err := w.kube.CoreV1().ServiceAccounts(w.ns).List(testContext(t), metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{v1alpha1.LabelComponent: v1alpha1.ComponentProof}).String()})
	require.NoError(t, err, "listing the proof ServiceAccounts")
	require.Len(t, sas.Items, 1, "the transfer image's proof ServiceAccount")
	owners := sas.Items[0].OwnerReferences
	require.Len(t, owners, 1, "the proof ServiceAccount goes with its Job (garbage collector)")
	assert.Equal(t, "Job", owners[0].Kind)
	assert.True(t, slices.ContainsFunc(jobs, func(j batchv1.Job) bool { return j.UID == owners[0].UID && j.Name == owners[0].Name }),
		"owned by the transfer image's proof Job: %+v", owners[0])
	for _, l := range w.writesSince(0) {
		assert.NotContains(t, l, "-> 403", "a request the controller's RBAC refused")
	}
	for _, l := range w.writesSince(0) {
		assert.NotContains(t, l, "DELETE", "a migration of the wave deleted a proof object")
	}
}

// TestAFailedProofRefusesTheWave: the transfer image's proof failing
// refuses every migration waiting on it, with the same message.
func TestAFailedProofRefusesTheWave(t *testing.T) {
	w, names := proofWave(t)
	w.endProofs(false, "vm-transfer: cannot read /etc/vm-transfer: permission denied")
	messages := map[string][]string{}
	for _, name := range names {
		var last *v1alpha1.VirtualMachineMigration
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			m, err := w.mig.MigrationV1alpha1().VirtualMachineMigrations(w.ns).Get(testContext(t), name, metav1.GetOptions{})
			if assert.NoError(c, err) {
				last = m
				assert.True(c, statemachine.IsTerminal(m.Status.Phase), "%s: %s", name, describeStatus(m))
			}
		}, 30*time.Second, 100*time.Millisecond, "%s refused", name)
		assert.Equal(t, v1alpha1.PhaseFailed, last.Status.Phase, "%s: %s", name, describeStatus(last))
		for _, c := range last.Status.Conditions {
			if c.Type == statemachine.ConditionFailed && c.Reason == statemachine.ReasonPreflightFailed {
				messages[c.Message] = append(messages[c.Message], name)
			}
		}
	}
	require.Len(t, messages, 1, "every migration refused with the same message; by message: %v", messages)
	for msg, refused := range messages {
		assert.Len(t, refused, len(names), "refused with %q", msg)
		assert.Contains(t, msg, "permission denied", "the proof's own words")
	}
}
