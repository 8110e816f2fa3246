package statemachine

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// A migration refused before its source VM was touched is fixed in
// place: nothing of it reached the source or came after the stop, so a
// change of its spec (a new generation) validates it again, from the
// start, as a new migration of that spec would be. One that failed after
// the stop, or once its cutover was committed (status.appliedSpec), stays
// Failed: what it did is on record and its rollback has run.

// RefusedBeforeCutover reports whether a Failed migration was refused
// before its cutover was committed: it failed in a phase before the stop,
// its spec was never applied, and its source is untouched
// (SourceUntouched). Such a migration validates again when its spec
// changes.
func RefusedBeforeCutover(st *v1alpha1.VirtualMachineMigrationStatus) bool {
	return st.Phase == v1alpha1.PhaseFailed && st.AppliedSpec == nil && st.LastError != nil &&
		beforeTheStop(st.LastError.Phase) && SourceUntouched(st)
}

// validateAgain sends a migration refused before the stop, or found
// already migrated, back to Validating after a change of its spec: the
// outcome is reset (its error or status.alreadyMigrated, its end, its
// Succeeded and Failed conditions, the proofs that
// failed; a passed proof serves for its TTL), the checkpoints the refused
// validation passed are forgotten (Validating, an approval: this
// validation passes its own, the timeline shows no approval of before,
// and the migration holds no claim on its source while it only
// validates), and the retry deadline counts from now.
func (d *decider) validateAgain() {
	what := "was found already migrated"
	if e := d.st.LastError; e != nil {
		what = fmt.Sprintf("was refused (%s)", e.Reason)
	}
	now := d.now
	d.st.LastError, d.st.CompletionTime, d.st.StartTime, d.st.AlreadyMigrated = nil, nil, &now, nil
	d.st.Evidence = slices.DeleteFunc(d.st.Evidence, func(e v1alpha1.CheckpointEvidence) bool { return e.Phase != v1alpha1.PhasePending })
	d.st.ImageProofs = slices.DeleteFunc(d.st.ImageProofs, func(p v1alpha1.ImageProof) bool { return p.Result != v1alpha1.ProofPassed })
	if len(d.st.ImageProofs) == 0 {
		d.st.ImageProofs = nil
	}
	meta.RemoveStatusCondition(&d.st.Conditions, ConditionSucceeded)
	meta.RemoveStatusCondition(&d.st.Conditions, ConditionFailed)
	d.setPhase(v1alpha1.PhaseValidating, fmt.Sprintf("the spec changed (generation %d) after the migration %s before its source VM was touched: validating again",
		d.m.Generation, what))
}
