package statemachine

import v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"

// Conversion slots. A migration's source is stopped only when the whole
// path after the stop can run without queueing: a transfer slot of its
// host and datastores (SlotObservation) and a conversion slot, taken
// before the stop and held until the conversion ended, so that the
// conversion pod finds room when the transfer ends instead of waiting
// for a node with the source off. The controller counts the slots from
// the phases it observes (HoldsConversionSlot); the decision in Queued
// only obeys what it observed (Observation.ConversionCapacity).

// ReasonWaitingForConversionCapacity is the Progressing reason of a
// migration waiting in Queued, its source untouched, because the
// conversion slots are all taken (--max-conversions), or the scheduler
// finds no room for a conversion pod already waiting.
const ReasonWaitingForConversionCapacity = "WaitingForConversionCapacity"

// NeedsConversionSlot reports whether a migration of this spec converts
// its guest, and so needs a conversion slot before its source is stopped.
func NeedsConversionSlot(spec *v1alpha1.VirtualMachineMigrationSpec) bool {
	return !spec.Conversion.Skip
}

// HoldsConversionSlot reports whether a migration in this phase holds a
// conversion slot: from the moment its source is being stopped until its
// conversion ended (a failed conversion that transfers the disks again
// keeps it), unless the spec in force skips the conversion. A migration
// being deleted holds none: its children are being deleted.
func HoldsConversionSlot(m *v1alpha1.VirtualMachineMigration) bool {
	switch m.Status.Phase {
	case v1alpha1.PhaseStoppingSource, v1alpha1.PhaseTransferringDisks, v1alpha1.PhaseConverting:
		spec := m.Status.AppliedSpec // the spec in force once the stop began
		if spec == nil {
			spec = &m.Spec
		}
		return m.DeletionTimestamp == nil && NeedsConversionSlot(spec)
	}
	return false
}
