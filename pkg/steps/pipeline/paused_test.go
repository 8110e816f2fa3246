package pipeline

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/transfer/wire"
	"platform.example/vm-migration/test/builders"
)

// TestPausedMigrationStillReadsItsTransfer: a paused migration's running
// transfer Job and its progress are observed (issue 25: the observation
// left them out while paused, so status.progress froze while the Job ran
// on); a migration being deleted reads no Job.
func TestPausedMigrationStillReadsItsTransfer(t *testing.T) {
	m := linuxBIOS()
	builders.Paused(m)
	m.Status.Phase = v1alpha1.PhaseTransferringDisks
	m.Status.Transfer = &v1alpha1.JobStatus{JobName: naming.TransferJob(m.Name, 1), Attempt: 1}
	progress := naming.TransferJob(m.Name, 1) + "-progress"
	key := m.Status.Disks[0].Key
	f := newFakeStep(t,
		builders.Job(m, m.Status.Transfer.JobName, v1alpha1.ComponentTransfer, builders.JobArgs(progressFlag+m.Namespace+"/"+progress)),
		builders.ConfigMap(m, progress, v1alpha1.ComponentTransfer, map[string]string{
			wire.ConfigMapKeyProgress: fmt.Sprintf(`{"kind":"progress","disks":[{"key":%d,"bytesDone":4096,"totalBytes":8192}]}`, key),
		}))

	var obs statemachine.Observation
	require.NoError(t, f.step.Observe(m, &obs))
	require.NotNil(t, obs.TransferJob, "the paused migration's transfer Job")
	assert.Equal(t, []statemachine.DiskProgress{{Key: key, BytesDone: 4096, BytesTotal: 8192}}, obs.TransferJob.Progress)

	builders.Deleted(m)
	obs = statemachine.Observation{}
	require.NoError(t, f.step.Observe(m, &obs))
	assert.Nil(t, obs.TransferJob, "a migration being deleted reads no Job")
}
