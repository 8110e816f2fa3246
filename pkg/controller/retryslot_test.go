package controller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/test/builders"
)

// convertingOnHost is a migration on host-1 (disk on ds1) in Converting,
// its disks transferred, its conversion attempt 1 recorded, created at
// T0+created.
func convertingOnHost(name string, created time.Duration) *v1alpha1.VirtualMachineMigration {
	m := onHost(name, v1alpha1.PhaseConverting)
	m.CreationTimestamp = metav1.NewTime(builders.T0.Add(created))
	m.Status.Transfer = &v1alpha1.JobStatus{JobName: naming.TransferJob(name, 1), Attempt: 1, CompletedAt: builders.TP(-time.Minute)}
	m.Status.Conversion = &v1alpha1.ConversionStatus{
		JobStatus:     v1alpha1.JobStatus{JobName: naming.ConversionJob(name, 1), Attempt: 1},
		ConfigMapName: naming.ConversionConfigMap(name, 1),
	}
	m.Status.SourceControl = &v1alpha1.SourceControlStatus{OriginalPowerState: statemachine.PowerStateOn,
		PowerOffRequestedAt: builders.TP(-time.Hour), PoweredOffAt: builders.TP(-time.Hour)}
	return m
}

// TestConversionRetryKeepsPriorityForASlot: a migration whose conversion
// failed must transfer its disks again, with its source off. With the
// host's only slot taken, it waits with a condition saying so (its
// decision is not dropped in silence every second), and when the slot
// frees it gets it before an older migration waiting in Queued (whose
// source still runs), even when that one is woken first.
func TestConversionRetryKeepsPriorityForASlot(t *testing.T) {
	busy := onHost("a-busy", v1alpha1.PhaseTransferringDisks)
	queuedFirst := onHost("b-queued", v1alpha1.PhaseQueued)
	queuedFirst.CreationTimestamp = metav1.NewTime(builders.T0.Add(-time.Hour))
	retry := convertingOnHost("c-retry", 0)
	failedJob := builders.Job(retry, naming.ConversionJob(retry.Name, 1), v1alpha1.ComponentConversion,
		builders.JobFailed("BackoffLimitExceeded", "virt-v2v crashed"))
	src := &fakeSource{obs: statemachine.SourceObservation{Observed: true, PowerState: statemachine.PowerStateOn}}
	f := newFixture(t, src, busy, queuedFirst, retry, failedJob)
	f.c.cfg.MaxTransfersPerHost = 1

	after := f.sync(retry)
	cur := f.get(retry)
	require.NotNil(t, cur)
	assert.Equal(t, int32(1), cur.Status.Retries, "the failed conversion spends a retry, written")
	c := condition(cur, statemachine.ConditionProgressing)
	if assert.NotNil(t, c, "a Progressing condition") {
		assert.Equal(t, metav1.ConditionFalse, c.Status, "Progressing: %+v", c)
		assert.Equal(t, statemachine.ReasonWaitingForTransferSlot, c.Reason, "Progressing: %+v", c)
		assert.Contains(t, c.Message, "1 of 1 transfers already run from host", "the condition names the limit")
	}
	assert.Positive(t, after, "looked at again")
	again := f.sync(cur)
	assert.Empty(t, f.writes, "waiting again writes nothing")
	assert.Equal(t, statemachine.DefaultWaitInterval, again, "looked at again after the wait interval (or when woken)")

	// The busy migration's transfer ends: its slot frees. The queued
	// migration, older, is the one a freed slot used to wake.
	busy = f.get(busy)
	busy.Status.Phase = v1alpha1.PhaseConverting
	_, err := f.mig.MigrationV1alpha1().VirtualMachineMigrations(busy.Namespace).UpdateStatus(f.ctx, busy, metav1.UpdateOptions{})
	require.NoError(t, err)
	f.resync()
	f.c.wakeSlotWaiters(onHost("a-busy", v1alpha1.PhaseTransferringDisks), busy)
	woken := queued(f.c)
	assert.Contains(t, woken, cache.MetaObjectToName(retry).String(), "the waiting retry is woken when the slot frees")

	f.sync(queuedFirst)
	assert.Equal(t, v1alpha1.PhaseQueued, f.get(queuedFirst).Status.Phase, "a queued migration took the slot the retry waits for")
	f.sync(f.get(retry))
	assert.Equal(t, v1alpha1.PhaseTransferringDisks, f.get(retry).Status.Phase, "the retry transfers again once the slot frees")
	f.sync(f.get(queuedFirst))
	assert.Equal(t, v1alpha1.PhaseQueued, f.get(queuedFirst).Status.Phase, "the slot is the retry's")
}
