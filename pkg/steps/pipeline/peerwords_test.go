package pipeline

import (
	"testing"

	"github.com/stretchr/testify/assert"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/untrusted"
)

// TestPodWordsReachStatusClean (issue 46, found by the fuzz targets): what
// a transfer pod reports of a failure (its reason, its error, which may
// quote a descriptor's fields) and what an image's self-check prints
// reach status without control or format characters.
func TestPodWordsReachStatusClean(t *testing.T) {
	hostile := "Bad\nReason\x1b[2J\u202e\u009b"
	var o statemachine.JobObservation
	observeTransfer(&o, `{"kind":"result","succeeded":false,"reason":"`+"Bad\\nReason\\u001b[2J"+`","error":"descriptor parentCID \u001b]0;owned\u0007 \u202e is not ffffffff","disks":[]}`, nil)
	assert.NoError(t, untrusted.Text(o.Message, 4096), "the transfer's failure %q", o.Message)
	assert.NotContains(t, o.Message, "Bad", "a reason that is not one word is left out")

	res := &v1alpha1.ImageProof{}
	readSelfCheck(res, v1alpha1.ComponentTransfer, `{"command":"vm-transfer","version":"`+"v1\\u001b[2J\\u202e"+`","specVersion":"v9"}`)
	assert.Equal(t, v1alpha1.ProofFailed, res.Result)
	assert.NoError(t, untrusted.Text(res.Message, 4096), "the proof's message %q", res.Message)

	job := &batchv1.Job{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "proof", Image: "x"}}}}}}
	pod := corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: "proof",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: hostile}}}}}}
	got, _ := ProofOutcome(v1alpha1.ComponentTransfer, job, []corev1.Pod{pod}, t0, DefaultProofTimeout)
	if assert.NotNil(t, got) {
		assert.NoError(t, untrusted.Text(got.Message, 4096), "the failed self-check's message %q", got.Message)
	}
}
