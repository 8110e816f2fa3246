//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/object"
	vimtypes "github.com/vmware/govmomi/vim25/types"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/manager"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/steps/pipeline"
	"platform.example/vm-migration/test/builders"
)

// gitopsTTL is the manifest's spec.ttlSecondsAfterFinished: short, for
// the test; a GitOps tool applies the manifest again whatever it is.
const gitopsTTL = 5

// TestGitOpsReapplyAfterTTL (issue 50, items 2 and 3) plays, against the
// real API server and vCenter's simulator, a GitOps tool that keeps
// applying what Git holds: the manifest is applied and succeeds; its time
// to live deletes it (the VM is handed over); the tool applies it again:
// it ends Succeeded, reason AlreadyMigrated, calm (no Failed condition,
// no failure series, no Warning event), touching nothing (the source,
// powered on again meanwhile, stays on; no Job, claim or DataVolume), and
// its time to live leaves it; the manifest then gets another target name
// (a second copy of the migrated source): refused before anything is
// touched, SourceAlreadyMigrated, naming the migrated VM.
func TestGitOpsReapplyAfterTTL(t *testing.T) {
	reg := prometheus.NewRegistry()
	w := newWalkEnvWith(t, func(o *manager.Options) { o.Registerer = reg })
	ctx := testContext(t)
	api := w.mig.MigrationV1alpha1().VirtualMachineMigrations(w.ns)

	// The manifest in Git: approved, with a time to live.
	first := w.newWalkMigration()
	patch := []byte(`{"spec":{"policy":{"approved":true},"ttlSecondsAfterFinished":` + jsonInt(gitopsTTL) + `}}`)
	first, err := api.Patch(ctx, walkMigration, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err, "approving the migration and setting its time to live")
	manifest := &v1alpha1.VirtualMachineMigration{
		ObjectMeta: metav1.ObjectMeta{Name: first.Name, Namespace: first.Namespace},
		Spec:       *first.Spec.DeepCopy(),
	}

	// 1. It migrates the VM.
	target := w.migrateToTheEnd(first)
	t.Logf("migrated into VirtualMachine %s/%s", w.ns, target)

	// 2. Its time to live deletes it; the VM is handed over, saying how
	// its migration ended and which source it came from.
	w.waitFor("the time to live deletes the migration", func(m *v1alpha1.VirtualMachineMigration) bool { return m == nil })
	vm, err := w.kv.KubevirtV1().VirtualMachines(w.ns).Get(ctx, target, metav1.GetOptions{})
	require.NoError(t, err, "the migrated VM")
	assert.Equal(t, w.ns+"/"+walkMigration, vm.Annotations[v1alpha1.AnnotationMigratedBy], "the VM's annotations %v", vm.Annotations)
	assert.Equal(t, v1alpha1.OutcomeSucceeded, vm.Annotations[v1alpha1.AnnotationOutcome], "the VM's annotations %v", vm.Annotations)
	assert.NotEmpty(t, vm.Annotations[v1alpha1.AnnotationSourceInstanceUUID], "the VM's annotations %v", vm.Annotations)
	// Someone powers the source on again in vSphere: whatever a
	// migration of it does from here, it must not stop it.
	w.powerOnSource()

	// 3. The tool applies the same manifest again.
	again, err := api.Create(ctx, manifest.DeepCopy(), metav1.CreateOptions{})
	require.NoError(t, err, "applying the manifest again")
	calm := w.waitFor("the manifest applied again ends Succeeded, already migrated", func(m *v1alpha1.VirtualMachineMigration) bool {
		if m == nil || !statemachine.IsTerminal(m.Status.Phase) {
			return false
		}
		c := meta.FindStatusCondition(m.Status.Conditions, statemachine.ConditionSucceeded)
		return m.Status.Phase == v1alpha1.PhaseSucceeded && c != nil && c.Reason == "AlreadyMigrated"
	})
	t.Logf("applied again: %s", describeStatus(calm))
	w.wantCalm(calm, reg)
	if assert.NotNil(t, calm.Status.AlreadyMigrated, "status.alreadyMigrated") {
		assert.Equal(t, target, calm.Status.AlreadyMigrated.Name, "status.alreadyMigrated names the migrated VM")
	}
	w.wantUntouched("applied again", again.UID, calm)
	// Its time to live does not delete it: the tool would only apply it
	// again.
	time.Sleep((gitopsTTL + 2) * time.Second)
	require.NotNil(t, w.get(), "the already-migrated migration was deleted by its time to live")
	w.quiet("already migrated")

	// 4. The manifest gets another target name: a second copy of the
	// migrated source, refused before anything is touched.
	patch = []byte(`{"spec":{"target":{"name":"` + target + `-copy"}}}`)
	_, err = api.Patch(ctx, walkMigration, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err, "changing the target name")
	refused := w.waitFor("the migration under another target name is refused", func(m *v1alpha1.VirtualMachineMigration) bool {
		return m != nil && m.Status.Phase == v1alpha1.PhaseFailed && m.Status.ObservedGeneration == m.Generation
	})
	t.Logf("under another target name: %s", describeStatus(refused))
	require.NotNil(t, refused.Status.LastError, "lastError")
	assert.Equal(t, v1alpha1.PhaseValidating, refused.Status.LastError.Phase, "refused in Validating")
	var finding *v1alpha1.PreflightFinding
	for i := range refused.Status.Preflight {
		if refused.Status.Preflight[i].Reason == "SourceAlreadyMigrated" {
			finding = &refused.Status.Preflight[i]
		}
	}
	if assert.NotNil(t, finding, "no SourceAlreadyMigrated finding in %+v", refused.Status.Preflight) {
		assert.Contains(t, finding.Message, w.ns+"/"+target, "the finding names the migrated VM")
		assert.Contains(t, finding.Message, "spec.target.secondCopy", "the finding says how to ask for a second copy")
		assert.NotContains(t, strings.ToLower(finding.Message), "delete", "the finding advises deleting migrated data")
	}
	w.wantUntouched("under another target name", again.UID, refused)
}

func jsonInt(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// migrateToTheEnd plays the Job controller, CDI and KubeVirt for an
// approved migration until it succeeds, and returns its target's name.
func (w *walkEnv) migrateToTheEnd(m *v1alpha1.VirtualMachineMigration) string {
	w.t.Helper()
	m = w.waitPhase(v1alpha1.PhaseTransferringDisks, progressing("transferring disks"))
	w.finishJob(naming.TransferJob(walkMigration, 1), pipeline.TransferContainer, transferDone(w.t, m))
	m = w.waitPhase(v1alpha1.PhaseConverting, nil)
	w.finishJob(naming.ConversionJob(walkMigration, 1), pipeline.ConversionContainer, builders.ConvertedChecksumLines(m)+walkInspection)
	m = w.waitPhase(v1alpha1.PhaseImporting, progressing("importing disks: 0 of"))
	m = w.importAll(m)
	w.runVMI(m.Status.Target.Name, kubevirtv1.Running)
	return m.Status.Target.Name
}

// powerOnSource powers the source VM on with the test's own client.
func (w *walkEnv) powerOnSource() {
	w.t.Helper()
	w.withSourceVM(func(ctx context.Context, vm *object.VirtualMachine) {
		task, err := vm.PowerOn(ctx)
		require.NoError(w.t, err, "powering the source VM on")
		require.NoError(w.t, task.Wait(ctx), "powering the source VM on")
	})
	require.Equal(w.t, vimtypes.VirtualMachinePowerStatePoweredOn, w.powerState())
}

// wantCalm asserts that an ended migration raises no alarm: no Failed or
// Stalled condition true, no failure series (the alert rules'
// vm_migration_condition), no Warning event; kstatus reads it Current.
func (w *walkEnv) wantCalm(m *v1alpha1.VirtualMachineMigration, reg *prometheus.Registry) {
	w.t.Helper()
	for _, typ := range []string{statemachine.ConditionFailed, statemachine.ConditionStalled} {
		if c := meta.FindStatusCondition(m.Status.Conditions, typ); c != nil {
			assert.Equal(w.t, metav1.ConditionFalse, c.Status, "condition %s: %s %s", typ, c.Reason, c.Message)
		}
	}
	assert.Nil(w.t, m.Status.LastError, "lastError")
	ready := meta.FindStatusCondition(m.Status.Conditions, statemachine.ConditionReady)
	if assert.NotNil(w.t, ready, "Ready") {
		assert.Equal(w.t, metav1.ConditionTrue, ready.Status, "Ready: %s", ready.Message)
		assert.Contains(w.t, ready.Message, "already migrated", "Ready's message")
		assert.NotContains(w.t, strings.ToLower(ready.Message), "delete", "Ready's message advises deleting migrated data")
	}
	families, err := reg.Gather()
	require.NoError(w.t, err, "reading the controller's metrics")
	for _, f := range families {
		if f.GetName() != "vm_migration_condition" {
			continue
		}
		for _, s := range f.GetMetric() {
			lbl := map[string]string{}
			for _, p := range s.GetLabel() {
				lbl[p.GetName()] = p.GetValue()
			}
			if lbl["migration"] == m.Name && (lbl["condition"] == statemachine.ConditionFailed || lbl["condition"] == statemachine.ConditionStalled) {
				assert.Zero(w.t, s.GetGauge().GetValue(), "vm_migration_condition %v: the failure alerts fire on it", lbl)
			}
		}
	}
	events, err := w.kube.CoreV1().Events(w.ns).List(testContext(w.t), metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(m.UID)})
	require.NoError(w.t, err, "listing the migration's events")
	for _, e := range events.Items {
		w.t.Logf("event %s %s: %s", e.Type, e.Reason, e.Message)
		assert.NotEqual(w.t, "Warning", e.Type, "a Warning event %s: %s", e.Reason, e.Message)
	}
	served := m.DeepCopy()
	served.SetGroupVersionKind(v1alpha1.SchemeGroupVersion.WithKind("VirtualMachineMigration"))
	data, err := json.Marshal(served)
	require.NoError(w.t, err)
	u := &unstructured.Unstructured{}
	require.NoError(w.t, u.UnmarshalJSON(data))
	res, err := kstatus.Compute(u)
	require.NoError(w.t, err, "kstatus")
	assert.Equal(w.t, kstatus.CurrentStatus, res.Status, "kstatus (%s)", res.Message)
}

// wantUntouched asserts that the migration uid touched nothing: no child
// carries its UID, the source is still on, and status says no stop was
// asked.
func (w *walkEnv) wantUntouched(where string, uid types.UID, m *v1alpha1.VirtualMachineMigration) {
	w.t.Helper()
	w.wantChildren(where, uid)
	assert.Nil(w.t, m.Status.SourceControl, "%s: status.sourceControl", where)
	assert.Empty(w.t, m.Status.Disks, "%s: status.disks", where)
	assert.True(w.t, statemachine.SourceUntouched(&m.Status), "%s: SourceUntouched", where)
	assert.Equal(w.t, vimtypes.VirtualMachinePowerStatePoweredOn, w.powerState(), "%s: the source's power state", where)
}
