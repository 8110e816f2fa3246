package pipeline

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
)

// TestAProofPodWithoutANodeIsShownAsWaiting: an image proof's pod that
// no node can run is waited for (until the proof timeout), and status
// says so as it does of a transfer's pod: status.podWaiting names the
// proof Job, the scheduler's reason and words, and when the proof fails
// (issue 50 item 6: kubectl vmm's Next said the controller was "reading
// the source VM's inventory ...; nothing to do").
func TestAProofPodWithoutANodeIsShownAsWaiting(t *testing.T) {
	job := proofJob(t, v1alpha1.ComponentTransfer)
	unschedulable := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/1 nodes are available: 1 Insufficient memory."}
	p := proofPodIn(job, corev1.ContainerState{}, unschedulable)
	f := newFakeStep(t, job, &p)
	clock := clocktesting.NewFakePassiveClock(t0.Add(time.Minute))
	f.step.Clock, f.step.Config.ImageProofs = clock, true
	m := validating("web-01", func(m *v1alpha1.VirtualMachineMigration) { m.Spec.Conversion.Skip = true })

	var obs statemachine.Observation
	require.NoError(t, f.step.Observe(m, &obs))
	require.Len(t, obs.Proofs, 1, "conversion skipped: the transfer image only")
	obs.Source = statemachine.SourceObservation{Observed: true, Inventory: m.Status.Source.DeepCopy(), PowerState: statemachine.PowerStateOn, ToolsRunning: true}
	d := statemachine.Decide(statemachine.Input{Migration: m, Observation: obs, Now: metav1.NewTime(clock.Now())})

	require.Equal(t, v1alpha1.PhaseValidating, d.Status.Phase, "lastError %+v", d.Status.LastError)
	w := d.Status.PodWaiting
	require.NotNil(t, w, "status.podWaiting, want the proof pod's (conditions %+v)", d.Status.Conditions)
	assert.Equal(t, job.Name, w.Job)
	assert.Equal(t, ReasonUnschedulable, w.Reason)
	assert.Contains(t, w.Message, "Insufficient memory")
	if assert.NotNil(t, w.AttemptFailsAt, "when the proof fails") {
		assert.Equal(t, job.CreationTimestamp.Add(DefaultProofTimeout), w.AttemptFailsAt.Time, "the Job's creation and the proof timeout")
	}
}
