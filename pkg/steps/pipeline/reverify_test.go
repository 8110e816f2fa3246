package pipeline

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/test/builders"
)

// TestObserveVerificationBeforeTheStart: in Starting, until the start is
// requested, the verification Job is observed (a start later than the
// bound reads the targets back again first); once the start is
// requested, it no longer is.
func TestObserveVerificationBeforeTheStart(t *testing.T) {
	m := linuxBIOS()
	m.Status.Phase = v1alpha1.PhaseStarting
	name := naming.VerificationJob(m.Name, 2)
	m.Status.Verification = &v1alpha1.JobStatus{JobName: name, Attempt: 2}
	job := builders.Job(m, name, v1alpha1.ComponentVerification)
	f := newFakeStep(t, job)

	var obs statemachine.Observation
	require.NoError(t, f.step.Observe(m, &obs))
	require.NotNil(t, obs.VerificationJob, "the verification Job before the start")
	assert.Equal(t, name, obs.VerificationJob.Name)

	m.Status.Target.StartRequestedAt = builders.TP(-time.Second)
	obs = statemachine.Observation{}
	require.NoError(t, f.step.Observe(m, &obs))
	assert.Nil(t, obs.VerificationJob, "not looked at once the start is requested")
}
