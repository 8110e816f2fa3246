package pipeline

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// TestJobsReplaceAPodOnlyOnceItFailed: every Job the controller renders
// (those that write claims above all: the transfer and the conversion)
// starts a replacement pod only once the one it has is gone, Failed: the
// default (TerminatingOrFailed) lets a drain, an eviction or a
// partitioned node start a second pod while the first still runs, two
// writers on one claim.
func TestJobsReplaceAPodOnlyOnceItFailed(t *testing.T) {
	m := onePass(linuxBIOS())
	transfer, err := RenderTransferJob(m, 1, testConfig, nil)
	require.NoError(t, err)
	conversion, err := RenderConversionJob(m, 1, testConfig, nil)
	require.NoError(t, err)
	verification, err := RenderVerificationJob(m, 1, testConfig, nil)
	require.NoError(t, err)
	proof, _, err := RenderProof(m, v1alpha1.ComponentTransfer, testConfig)
	require.NoError(t, err)
	for name, job := range map[string]*batchv1.Job{"transfer": transfer, "conversion": conversion, "verification": verification, "proof": proof} {
		if assert.NotNil(t, job.Spec.PodReplacementPolicy, name) {
			assert.Equal(t, batchv1.Failed, *job.Spec.PodReplacementPolicy, name)
		}
	}
}
