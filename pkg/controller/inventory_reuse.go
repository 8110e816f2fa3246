package controller

import (
	"time"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/steps/pipeline"
)

// inventoryReuse bounds how long a migration in Validating decides from
// the source inventory it recorded in this pass (with the dry run made
// from it) instead of reading vSphere at every look while its dry run and
// image proofs run. Validating touches nothing of the source, and Queued
// reads the source's state again before the stop.
const inventoryReuse = pipeline.ValidatingDryRunTTL

// recordedSource is the source observation m's Validating pass recorded,
// when it may stand for a new read: the phase is Validating, the status
// reflects the current spec, and a dry run of this generation was made in
// Validating less than inventoryReuse ago (from that inventory). Otherwise
// nil: the source is read.
func recordedSource(m *v1alpha1.VirtualMachineMigration, now time.Time) *statemachine.SourceObservation {
	st := &m.Status
	dr := st.DryRun
	switch {
	case m.DeletionTimestamp != nil, st.Phase != v1alpha1.PhaseValidating, st.Source == nil,
		st.ObservedGeneration != m.Generation, dr == nil, dr.Phase != v1alpha1.PhaseValidating,
		dr.ObservedGeneration != m.Generation, now.Sub(dr.CheckedAt.Time) >= inventoryReuse:
		return nil
	}
	inv := st.Source.DeepCopy()
	return &statemachine.SourceObservation{Observed: true, Inventory: inv, Snapshots: inv.Snapshots, PowerState: inv.PowerState,
		ToolsRunning: inv.ToolsRunningStatus == "guestToolsRunning"}
}
