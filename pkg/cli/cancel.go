package cli

import (
	"fmt"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
)

// cancelEffect says what cancelling (deleting) the migration does in its
// current phase, following the controller's cancellation (see the
// statemachine's cancel and rollingBack).
func cancelEffect(m *v1alpha1.VirtualMachineMigration) string {
	target := orNone(targetNameOf(m))
	switch phaseOf(m) {
	case v1alpha1.PhaseSucceeded:
		return fmt.Sprintf("the migration succeeded, so only its leftover staging objects are deleted; VirtualMachine %s and its disks stay, %s, and the source VM stays powered off.", target, handedOver)
	case v1alpha1.PhaseFailed:
		if statemachine.SourceUntouched(&m.Status) {
			// Its children (the objects carrying its UID label) can only be
			// a stored plan. The image proofs it ran are no migration's:
			// shared per namespace, image and pod shape, they stay until
			// their TTL.
			return "it was refused before its source VM was touched: there is nothing to restore; the migration is deleted, with its stored plan if it has one; " +
				"its image proofs' Jobs are not its own (the namespace's migrations of the same images share them) and stay until they expire."
		}
		return failedSource(m) + "; the staging objects kept for inspection are deleted, and " + targetEffect(m, target) + "."
	case v1alpha1.PhasePending, v1alpha1.PhaseValidating, v1alpha1.PhasePlanned, v1alpha1.PhaseAwaitingApproval, v1alpha1.PhaseQueued:
		return "nothing was done to the source VM yet; the migration (and its stored plan, if any) is deleted."
	case v1alpha1.PhaseStoppingSource:
		return "the controller stops trying to stop the source VM and " + restoreEffect(m) + "."
	case v1alpha1.PhaseTransferringDisks, v1alpha1.PhaseConverting:
		return "the running Job is stopped, the staging volumes, Jobs and ConfigMaps are deleted, and the controller " + restoreEffect(m) + "."
	case v1alpha1.PhaseImporting:
		return "the staging objects and the target DataVolumes being imported are deleted, and the controller " + restoreEffect(m) + "."
	case v1alpha1.PhaseCreatingVM, v1alpha1.PhaseStarting, v1alpha1.PhaseCleaningUp:
		return fmt.Sprintf("the staging objects are deleted, %s, and the controller %s.", targetEffect(m, target), restoreEffect(m))
	case v1alpha1.PhaseRollingBack:
		return "the rollback becomes a cancellation: the staging objects are deleted, " + targetEffect(m, target) + ", and the controller " + restoreEffect(m) + "."
	}
	return "what the migration created is deleted and the controller " + restoreEffect(m) + "."
}

// handedOver says what becomes of a target VM that outlives its migration.
const handedOver = "handed over to you (the migration's labels removed, annotation " + v1alpha1.AnnotationMigratedBy + " naming this migration)"

// targetEffect says what happens to the target VM: one that was started
// holds migrated data and is kept, halted, with its DataVolumes; one that
// never ran is deleted with them.
func targetEffect(m *v1alpha1.VirtualMachineMigration, target string) string {
	if t := m.Status.Target; t != nil && t.StartRequestedAt != nil {
		return fmt.Sprintf("VirtualMachine %s, which was started, is halted and kept with its DataVolumes, %s (delete them yourself if unwanted)", target, handedOver)
	}
	return fmt.Sprintf("the target VirtualMachine %s, which never ran, is deleted with its DataVolumes if it exists", target)
}

// restoreEffect says what happens to the source VM.
func restoreEffect(m *v1alpha1.VirtualMachineMigration) string {
	sc := m.Status.SourceControl
	switch {
	case sc == nil || (sc.ShutdownRequestedAt == nil && sc.PowerOffRequestedAt == nil):
		return "leaves the source VM as it is (it did not stop it)"
	case sc.OriginalPowerState == statemachine.PowerStateOn && sc.RestoredAt == nil:
		return "powers the source VM back on (it was running when found) and removes any snapshot it made"
	default:
		return fmt.Sprintf("leaves the source VM %s, as it was found, and removes any snapshot it made", orNone(sc.OriginalPowerState))
	}
}

// failedSource says what the rollback of a migration that failed after
// the stop left of the source VM: deleting it changes nothing there.
func failedSource(m *v1alpha1.VirtualMachineMigration) string {
	st := &m.Status
	sc := st.SourceControl
	switch {
	case statemachine.SourceLeftOff(st):
		return "its rollback could not power the source VM back on, and deleting the migration does not either: power it on in vSphere yourself"
	case sc == nil:
		return "the source VM was not stopped and is left as it is"
	case sc.RestoredAt != nil:
		return "its rollback already powered the source VM back on, as it was found"
	case sc.SourceGoneAt != nil:
		return "the source VM no longer exists"
	}
	return fmt.Sprintf("the source VM stays %s, as it was found", orNone(sc.OriginalPowerState))
}
