package controller

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/pkg/preflight"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/steps/pipeline"
	"platform.example/vm-migration/pkg/transfer/wire"
	"platform.example/vm-migration/test/builders"
)

// windowsInventory is the default source VM running Windows.
func windowsInventory() *v1alpha1.SourceInventory {
	return builders.Inventory(func(inv *v1alpha1.SourceInventory) {
		inv.GuestID, inv.GuestFamily, inv.GuestFullName = "windows2019srv_64Guest", "windowsGuest", "Microsoft Windows Server 2019 (64-bit)"
	})
}

// validatingMigration is a migration in Validating whose networks are all
// mapped (so that the preflight rules pass on the default inventory).
func validatingMigration(mods ...builders.MigrationMod) *v1alpha1.VirtualMachineMigration {
	return builders.Migration(append([]builders.MigrationMod{builders.WithFinalizer, builders.InPhase(v1alpha1.PhaseValidating),
		builders.WithSpec(func(s *v1alpha1.VirtualMachineMigrationSpec) {
			s.Target.Networks = []v1alpha1.NetworkMapping{builders.PodNetwork("VM Network"), builders.IgnoredNetwork("backup")}
		})}, mods...)...)
}

// proofFixture is a fixture whose pipeline proves images, on the
// fixture's clock.
func proofFixture(t *testing.T, inv *v1alpha1.SourceInventory, m *v1alpha1.VirtualMachineMigration) *fixture {
	t.Helper()
	src := &fakeSource{obs: statemachine.SourceObservation{Observed: true, Inventory: inv, PowerState: statemachine.PowerStateOn, ToolsRunning: true}}
	f := newFixture(t, src, m, builders.StorageClass("standard", true))
	p := f.c.steps.Pipeline.(*pipeline.Step)
	p.Config.ImageProofs, p.Clock = true, f.clock
	return f
}

// syncUntilTrue syncs m until done holds (at most 20 reconciles) and returns it.
func (f *fixture) syncUntilTrue(m *v1alpha1.VirtualMachineMigration, what string, done func(*v1alpha1.VirtualMachineMigration) bool) *v1alpha1.VirtualMachineMigration {
	f.t.Helper()
	for range 20 {
		f.sync(m)
		if cur := f.get(m); cur != nil && done(cur) {
			return cur
		}
	}
	cur := f.get(m)
	require.FailNow(f.t, "never "+what, "phase %s, conditions %+v, lastError %+v", cur.Status.Phase, cur.Status.Conditions, cur.Status.LastError)
	return nil
}

// jobExists says whether the fake cluster holds the Job.
func (f *fixture) jobExists(name string) bool {
	_, err := f.kube.BatchV1().Jobs(builders.Namespace).Get(f.ctx, name, metav1.GetOptions{})
	return err == nil
}

// proofJobOf is the name of the shared proof Job of a component's image
// in the fake cluster, "" while there is none.
func (f *fixture) proofJobOf(component string) string {
	f.t.Helper()
	sel := labels.SelectorFromSet(labels.Set{v1alpha1.LabelComponent: v1alpha1.ComponentProof, v1alpha1.LabelProofOf: component}).String()
	jobs, err := f.kube.BatchV1().Jobs(builders.Namespace).List(f.ctx, metav1.ListOptions{LabelSelector: sel})
	require.NoError(f.t, err)
	if len(jobs.Items) == 0 {
		return ""
	}
	require.Len(f.t, jobs.Items, 1, "one proof Job per image")
	return jobs.Items[0].Name
}

// proofPod plays the kubelet for a proof Job: its pod in state, and the
// Job complete once the pod terminated with code 0.
func (f *fixture) proofPod(name string, state corev1.ContainerState) {
	f.t.Helper()
	jobs := f.kube.BatchV1().Jobs(builders.Namespace)
	job, err := jobs.Get(f.ctx, name, metav1.GetOptions{})
	require.NoError(f.t, err)
	podLabels := map[string]string{"batch.kubernetes.io/job-name": name, "job-name": name}
	for k, v := range job.Spec.Template.Labels {
		podLabels[k] = v
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-p0d", Namespace: builders.Namespace, Labels: podLabels},
		Spec:       job.Spec.Template.Spec,
		Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
			Name: job.Spec.Template.Spec.Containers[0].Name, State: state}}},
	}
	if t := state.Terminated; t != nil && t.ExitCode == 0 {
		pod.Status.Phase = corev1.PodSucceeded
		now := metav1.NewTime(f.clock.Now())
		job.Status.Conditions = append(job.Status.Conditions, batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now})
		job.Status.Succeeded, job.Status.CompletionTime = 1, &now
		_, err = jobs.UpdateStatus(f.ctx, job, metav1.UpdateOptions{})
		require.NoError(f.t, err)
	}
	_, err = f.kube.CoreV1().Pods(builders.Namespace).Create(f.ctx, pod, metav1.CreateOptions{})
	require.NoError(f.t, err)
}

// noVirtioWin is the conversion image's self-check without virtio-win.
const noVirtioWin = `{"virtV2V":"2.7.1","outputXMLOption":true,"virtioWin":{"path":"/usr/share/virtio-win","present":false},"ok":true,"problems":[]}`

// TestValidationReportsEveryRefusalTogether: the transfer image's proof
// fails at once (its image cannot be pulled), and the conversion image's
// proof still runs: its self-check (no virtio-win drivers, for a Windows
// guest) adds its refusal, and the migration fails once, with both.
func TestValidationReportsEveryRefusalTogether(t *testing.T) {
	m := validatingMigration()
	f := proofFixture(t, windowsInventory(), m)
	f.syncUntilTrue(m, "started the transfer image's proof", func(*v1alpha1.VirtualMachineMigration) bool {
		return f.proofJobOf(v1alpha1.ComponentTransfer) != ""
	})
	transfer := f.proofJobOf(v1alpha1.ComponentTransfer)
	f.proofPod(transfer, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImageNeverPull",
		Message: `Container image "registry.example/vm-migration:1" is not present with pull policy of Never`}})

	cur := f.syncUntilTrue(m, "started the conversion image's proof", func(cur *v1alpha1.VirtualMachineMigration) bool {
		return f.proofJobOf(v1alpha1.ComponentConversion) != "" || cur.Status.Phase != v1alpha1.PhaseValidating
	})
	conversion := f.proofJobOf(v1alpha1.ComponentConversion)
	require.Equal(t, v1alpha1.PhaseValidating, cur.Status.Phase, "failed before the conversion image's proof ran; lastError %+v", cur.Status.LastError)
	c := condition(cur, statemachine.ConditionProgressing)
	require.NotNil(t, c)
	f.proofPod(conversion, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Message: noVirtioWin}})

	cur = f.syncUntilTrue(m, "ended its validation", func(cur *v1alpha1.VirtualMachineMigration) bool {
		return cur.Status.Phase != v1alpha1.PhaseValidating
	})
	require.NotNil(t, cur.Status.LastError)
	assert.Equal(t, statemachine.ReasonPreflightFailed, cur.Status.LastError.Reason)
	assert.Contains(t, cur.Status.LastError.Message, preflight.ReasonTransferImageNotRunnable+": ")
	assert.Contains(t, cur.Status.LastError.Message, "ErrImageNeverPull")
	assert.Contains(t, cur.Status.LastError.Message, preflight.ReasonWindowsWithoutVirtioDrivers+": ")
	assert.True(t, f.jobExists(transfer) && f.jobExists(conversion),
		"the shared proof Jobs stay after the failed validation (for the other migrations of their key; their TTL removes them)")
	var refusals []string
	for _, e := range f.events {
		if strings.Contains(e, " "+statemachine.ReasonPreflightFailed+" ") {
			refusals = append(refusals, e)
		}
	}
	assert.Len(t, refusals, 1, "one refusal event, with every finding: %q", refusals)
}

// TestImageNotAllowedIsNeverProven: a conversion image that is not on the
// allow-list is refused, and never run, not even as a proof, while the
// validation waits for the transfer image's proof to report with it.
func TestImageNotAllowedIsNeverProven(t *testing.T) {
	m := validatingMigration(builders.WithSpec(func(s *v1alpha1.VirtualMachineMigrationSpec) { s.Conversion.Image = "evil.example/v2v:1" }))
	f := proofFixture(t, builders.Inventory(), m)
	ranProof := false
	for range 20 {
		f.sync(m)
		if transfer := f.proofJobOf(v1alpha1.ComponentTransfer); transfer != "" && !ranProof {
			f.proofPod(transfer, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0,
				Message: `{"command":"vm-transfer","version":"v1","specVersion":"` + wire.SpecVersion + `"}`}})
			ranProof = true
		}
		require.Empty(t, f.proofJobOf(v1alpha1.ComponentConversion), "the proof of a conversion image that is not allowed was created")
		if f.get(m).Status.Phase != v1alpha1.PhaseValidating {
			break
		}
	}
	cur := f.get(m)
	require.True(t, ranProof, "the transfer image's proof never ran")
	require.NotNil(t, cur.Status.LastError, "phase %s", cur.Status.Phase)
	assert.Contains(t, cur.Status.LastError.Message, preflight.ReasonConversionImageNotAllowed+": ")
}

// TestRefusedMigrationIsFixedInPlace: a migration refused before the stop
// (a DataVolume of its name is somebody else's) is fixed by editing its
// spec: the new generation validates it again, the failure reset, and it
// goes on to the cutover's approval; the source was never touched.
func TestRefusedMigrationIsFixedInPlace(t *testing.T) {
	f := newWalkFixture(t, walkOptions{})
	target := naming.TargetName(f.srcVM)
	f.add(&cdiv1.DataVolume{ObjectMeta: builders.Foreign(walkNamespace, naming.DataVolume(target, 0))})
	m := f.syncUntil(f.m, "", v1alpha1.PhasePending, v1alpha1.PhaseValidating)
	require.Equal(t, v1alpha1.PhaseFailed, m.Status.Phase)
	require.NotNil(t, condition(m, statemachine.ConditionFailed))
	f.unchangedSyncWritesNothing("refused, its spec unchanged")

	f.updateMigration(func(m *v1alpha1.VirtualMachineMigration) { m.Spec.Target.Name = "web-01-fixed" })
	m = f.syncUntil(f.m, v1alpha1.PhaseFailed, v1alpha1.PhaseValidating)
	require.Equal(t, v1alpha1.PhaseAwaitingApproval, m.Status.Phase, "after the fix; conditions %s", conditionSummary(m))
	assert.Nil(t, m.Status.LastError, "the refusal's error, kept past the new validation")
	assert.Nil(t, m.Status.CompletionTime)
	assert.Nil(t, condition(m, statemachine.ConditionFailed), "the Failed condition of the refusal, kept")
	assert.Nil(t, condition(m, statemachine.ConditionSucceeded), "the Succeeded condition of the refusal, kept")
	assert.Equal(t, "web-01-fixed", m.Status.Target.Name)
	assert.Equal(t, m.Generation, m.Status.ObservedGeneration)
	assert.Contains(t, f.events, "Normal Validating Failed -> Validating: the spec changed (generation 2) after the migration was refused (PreflightFailed) before its source VM was touched: validating again")
	assert.Equal(t, vsphereOn, f.powerState())
}

// TestRefusalSaidOnce: the message of a refusal is said once in the
// conditions (Failed) and once in the events the controller records.
func TestRefusalSaidOnce(t *testing.T) {
	f := newWalkFixture(t, walkOptions{})
	f.add(&cdiv1.DataVolume{ObjectMeta: builders.Foreign(walkNamespace, naming.DataVolume(naming.TargetName(f.srcVM), 0))})
	m := f.syncUntil(f.m, "", v1alpha1.PhasePending, v1alpha1.PhaseValidating)
	require.Equal(t, v1alpha1.PhaseFailed, m.Status.Phase)
	require.NotNil(t, m.Status.LastError)
	msg := m.Status.LastError.Message
	var conds, events []string
	for _, c := range m.Status.Conditions {
		if strings.Contains(c.Message, msg) {
			conds = append(conds, c.Type)
		}
	}
	for _, e := range f.events {
		if strings.Contains(e, msg) {
			events = append(events, e[:strings.Index(e, msg)])
		}
	}
	assert.Equal(t, []string{statemachine.ConditionFailed}, conds, "the conditions that say the refusal's message")
	assert.Equal(t, []string{"Warning PreflightFailed "}, events, "the events that say it")
}
