package statemachine

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
)

// OutagePhases are the phases a migration goes through while its source
// is stopped and its target not yet running, in order: the checkpoint of
// each ends one part of the outage.
func OutagePhases() []v1alpha1.Phase {
	return []v1alpha1.Phase{v1alpha1.PhaseTransferringDisks, v1alpha1.PhaseConverting, v1alpha1.PhaseImporting,
		v1alpha1.PhaseCreatingVM, v1alpha1.PhaseStarting}
}

// Downtime is the outage st records, read off its checkpoints and what the
// controller did to the source: nil until the source the controller asked
// to stop was seen powered off (a source found off had no outage of the
// migration's making). The parts are the times between consecutive
// outage checkpoints, from the source seen powered off; it ends at the
// target seen running (its Starting checkpoint, once a start was asked
// for) or at the source seen back on. It uses only recorded times, so it
// changes only when a checkpoint is reached and never with the clock; and
// it counts in whole seconds of the Unix clock, as the API stores times,
// so that the parts add up to the whole before and after the status is
// written.
func Downtime(st *v1alpha1.VirtualMachineMigrationStatus) *v1alpha1.DowntimeStatus {
	sc := st.SourceControl
	if sc == nil || sc.PoweredOffAt == nil || (sc.ShutdownRequestedAt == nil && sc.PowerOffRequestedAt == nil) {
		return nil
	}
	out := &v1alpha1.DowntimeStatus{SourceStoppedAt: *sc.PoweredOffAt}
	previous := sc.PoweredOffAt.Time
	for _, phase := range OutagePhases() {
		reached := checkpoint(st, phase)
		if reached == nil || reached.Time.Before(previous) {
			break
		}
		out.Phases = append(out.Phases, v1alpha1.PhaseDowntime{Phase: phase, Seconds: reached.Unix() - previous.Unix()})
		previous = reached.Time
		if phase == v1alpha1.PhaseStarting && st.Target != nil && st.Target.StartRequestedAt != nil {
			out.TargetRunningAt = reached.DeepCopy()
		}
	}
	end := out.TargetRunningAt
	if end == nil && sc.RestoredAt != nil && !sc.RestoredAt.Time.Before(sc.PoweredOffAt.Time) {
		out.SourceRestoredAt = sc.RestoredAt.DeepCopy()
		end = out.SourceRestoredAt
	}
	if end != nil {
		total := end.Unix() - sc.PoweredOffAt.Unix()
		out.Seconds = &total
		out.Duration = naming.Duration(time.Duration(total) * time.Second)
	}
	return out
}

// checkpoint is when st reached phase's checkpoint, or nil.
func checkpoint(st *v1alpha1.VirtualMachineMigrationStatus, phase v1alpha1.Phase) *metav1.Time {
	for i := range st.Evidence {
		if st.Evidence[i].Phase == phase {
			return &st.Evidence[i].ReachedAt
		}
	}
	return nil
}
