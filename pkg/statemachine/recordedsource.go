package statemachine

import (
	"time"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// ValidatingDryRunTTL is how long a dry run made in Validating serves the
// migration (Queued asks again right before the stop), and with it the
// source inventory it was rendered from: asked again every minute, a
// thousand migrations validating together sent more dry runs than the
// controller's API rate limit lets through, and none moved on.
const ValidatingDryRunTTL = 10 * time.Minute

// RecordedSource is the source observation m's Validating pass recorded,
// when it may stand for a new read of the inventory: the phase is
// Validating, the status reflects the current spec, and a dry run of this
// generation was made in Validating less than ValidatingDryRunTTL ago
// (from that inventory). Validating touches nothing of the source, and
// Queued reads its state again before the stop. Otherwise nil: the source
// is read.
func RecordedSource(m *v1alpha1.VirtualMachineMigration, now time.Time) *SourceObservation {
	st := &m.Status
	dr := st.DryRun
	switch {
	case m.DeletionTimestamp != nil, st.Phase != v1alpha1.PhaseValidating, st.Source == nil,
		st.ObservedGeneration != m.Generation, dr == nil, dr.Phase != v1alpha1.PhaseValidating,
		dr.ObservedGeneration != m.Generation, now.Sub(dr.CheckedAt.Time) >= ValidatingDryRunTTL:
		return nil
	}
	inv := st.Source.DeepCopy()
	return &SourceObservation{Observed: true, Inventory: inv, Snapshots: inv.Snapshots, PowerState: inv.PowerState,
		ToolsRunning: inv.ToolsRunningStatus == "guestToolsRunning"}
}
