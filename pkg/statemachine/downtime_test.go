package statemachine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/test/builders"
)

// outageStatus is a status whose source was shut down at T0-49m and whose
// outage checkpoints were reached at the given offsets from the stop, in
// OutagePhases order.
func outageStatus(offsets ...time.Duration) *v1alpha1.VirtualMachineMigrationStatus {
	stop := builders.At(-49 * time.Minute)
	st := &v1alpha1.VirtualMachineMigrationStatus{
		SourceControl: &v1alpha1.SourceControlStatus{OriginalPowerState: PowerStateOn, ShutdownRequestedAt: builders.TP(-50 * time.Minute), PoweredOffAt: &stop},
		Target:        &v1alpha1.TargetStatus{Name: "vm"},
		Evidence: []v1alpha1.CheckpointEvidence{
			{Phase: v1alpha1.PhaseQueued, ReachedAt: builders.At(-55 * time.Minute)},
			{Phase: v1alpha1.PhaseStoppingSource, ReachedAt: stop},
		},
	}
	for i, off := range offsets {
		st.Evidence = append(st.Evidence, v1alpha1.CheckpointEvidence{Phase: OutagePhases()[i], ReachedAt: metav1.NewTime(stop.Add(off))})
	}
	return st
}

func TestDowntime(t *testing.T) {
	stop := builders.At(-49 * time.Minute)
	after := func(d time.Duration) *metav1.Time { return ptr.To(metav1.NewTime(stop.Add(d))) }
	parts := func(seconds ...int64) []v1alpha1.PhaseDowntime {
		var out []v1alpha1.PhaseDowntime
		for i, s := range seconds {
			out = append(out, v1alpha1.PhaseDowntime{Phase: OutagePhases()[i], Seconds: s})
		}
		return out
	}
	started := func(st *v1alpha1.VirtualMachineMigrationStatus) *v1alpha1.VirtualMachineMigrationStatus {
		st.Target.StartRequestedAt = after(40 * time.Second)
		return st
	}
	cases := map[string]struct {
		st   *v1alpha1.VirtualMachineMigrationStatus
		want *v1alpha1.DowntimeStatus
	}{
		"not stopped yet":   {st: &v1alpha1.VirtualMachineMigrationStatus{SourceControl: &v1alpha1.SourceControlStatus{ShutdownRequestedAt: builders.TP(-time.Minute)}}},
		"no source control": {st: &v1alpha1.VirtualMachineMigrationStatus{}},
		"found powered off: no outage of ours": {st: func() *v1alpha1.VirtualMachineMigrationStatus {
			st := outageStatus(5 * time.Second)
			st.SourceControl.ShutdownRequestedAt = nil
			return st
		}()},
		"stopped, transferring":   {st: outageStatus(), want: &v1alpha1.DowntimeStatus{SourceStoppedAt: stop}},
		"transferred, converting": {st: outageStatus(5 * time.Second), want: &v1alpha1.DowntimeStatus{SourceStoppedAt: stop, Phases: parts(5)}},
		"running: the outage ended": {
			st:   started(outageStatus(5*time.Second, 11*time.Second, 22*time.Second, 23*time.Second, 31*time.Second)),
			want: &v1alpha1.DowntimeStatus{SourceStoppedAt: stop, TargetRunningAt: after(31 * time.Second), Seconds: ptr.To[int64](31), Duration: "31s", Phases: parts(5, 6, 11, 1, 8)},
		},
		"left halted (start false): not ended": {
			st:   outageStatus(5*time.Second, 11*time.Second, 22*time.Second, 23*time.Second, 24*time.Second),
			want: &v1alpha1.DowntimeStatus{SourceStoppedAt: stop, Phases: parts(5, 6, 11, 1, 1)},
		},
		"powered off by force": {
			st: func() *v1alpha1.VirtualMachineMigrationStatus {
				st := outageStatus(5 * time.Second)
				st.SourceControl.ShutdownRequestedAt, st.SourceControl.PowerOffRequestedAt = nil, builders.TP(-50*time.Minute)
				return st
			}(),
			want: &v1alpha1.DowntimeStatus{SourceStoppedAt: stop, Phases: parts(5)},
		},
		"failed, source restored: the outage ended there": {
			st: func() *v1alpha1.VirtualMachineMigrationStatus {
				st := outageStatus(5 * time.Second)
				st.SourceControl.RestoredAt = after(2 * time.Minute)
				return st
			}(),
			want: &v1alpha1.DowntimeStatus{SourceStoppedAt: stop, SourceRestoredAt: after(2 * time.Minute), Seconds: ptr.To[int64](120), Duration: "2m", Phases: parts(5)},
		},
		"a checkpoint older than the stop (an earlier attempt's) ends the parts": {
			st: func() *v1alpha1.VirtualMachineMigrationStatus {
				st := outageStatus(-time.Minute, 10*time.Second)
				return st
			}(),
			want: &v1alpha1.DowntimeStatus{SourceStoppedAt: stop},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, Downtime(tc.st))
		})
	}
}

// TestDowntimeRecordedByDecide: the decision that sees the target running
// records the whole outage in status, and a later decision, however late,
// leaves it as it was.
func TestDowntimeRecordedByDecide(t *testing.T) {
	m := newMigration(builders.Reached(v1alpha1.PhaseStarting), builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
		s.SourceControl.PoweredOffAt = builders.TP(-49 * time.Minute)
		for i := range s.Evidence {
			s.Evidence[i].ReachedAt = builders.At(-50 * time.Minute)
		}
		s.Evidence = append(s.Evidence[:len(s.Evidence)-4],
			v1alpha1.CheckpointEvidence{Phase: v1alpha1.PhaseTransferringDisks, ReachedAt: builders.At(-40 * time.Minute)},
			v1alpha1.CheckpointEvidence{Phase: v1alpha1.PhaseConverting, ReachedAt: builders.At(-30 * time.Minute)},
			v1alpha1.CheckpointEvidence{Phase: v1alpha1.PhaseImporting, ReachedAt: builders.At(-20 * time.Minute)},
			v1alpha1.CheckpointEvidence{Phase: v1alpha1.PhaseCreatingVM, ReachedAt: builders.At(-10 * time.Minute)})
		s.Target.StartRequestedAt = builders.TP(-5 * time.Minute)
	}))
	require.Equal(t, v1alpha1.PhaseCreatingVM, m.Status.Evidence[len(m.Status.Evidence)-1].Phase, "the fixture's last checkpoint")
	obs := newObs(sourceOff, targetVM(true, RunStrategyAlways), targetVMI(VMIRunning, false))
	out := decideAt(m, obs, 0)
	require.Equal(t, v1alpha1.PhaseCleaningUp, out.Status.Phase)
	dt := out.Status.Downtime
	require.NotNil(t, dt)
	assert.Equal(t, metav1.NewTime(builders.T0), *dt.TargetRunningAt)
	assert.Equal(t, ptr.To[int64](49*60), dt.Seconds)
	assert.Equal(t, []v1alpha1.PhaseDowntime{
		{Phase: v1alpha1.PhaseTransferringDisks, Seconds: 9 * 60}, {Phase: v1alpha1.PhaseConverting, Seconds: 600},
		{Phase: v1alpha1.PhaseImporting, Seconds: 600}, {Phase: v1alpha1.PhaseCreatingVM, Seconds: 600}, {Phase: v1alpha1.PhaseStarting, Seconds: 600},
	}, dt.Phases)

	later := m.DeepCopy()
	later.Status = out.Status
	again := decideAt(later, obs, time.Hour)
	assert.Equal(t, dt, again.Status.Downtime)
}
