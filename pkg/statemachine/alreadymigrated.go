package statemachine

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// A migration whose target VirtualMachine already exists, made from the
// same source VM by an earlier migration that succeeded, has nothing to
// do: the same manifest applied again (by a GitOps tool, once the time
// to live deleted the migration that ran it) finds the VM it made. It
// ends Succeeded at once, reason AlreadyMigrated: calm (no failure, no
// alert, kstatus Current, Argo CD Healthy), touching nothing, and its
// time to live leaves it (deleting it would only have the GitOps tool
// apply it again). A change of its spec validates it again, as one
// refused before the stop.

// ReasonAlreadyMigrated is the reason of the conditions (Ready, Succeeded,
// Progressing, Failed false) of a migration that found its target VM
// already migrated from the same source by an earlier migration that
// succeeded, and ended Succeeded having done nothing.
const ReasonAlreadyMigrated = "AlreadyMigrated"

// alreadyMigrated ends the migration Succeeded when its target VM is such
// a copy (targetCopy) and no second copy is asked for, and reports
// whether it did. The preflight findings of the names it would take are
// dropped: the names are taken by the migrated VM itself.
func (d *decider) alreadyMigrated(target string) bool {
	if d.spec.Target.SecondCopy {
		return false
	}
	c := d.targetCopy(target)
	if c == nil {
		return false
	}
	found := *c
	d.st.AlreadyMigrated = &found
	d.st.Preflight = nil
	d.advance(v1alpha1.PhaseSucceeded, alreadyMigratedMessage(&found)+"; nothing was done")
	return true
}

// targetCopy is the copy of the source that holds the target name in the
// migration's namespace and was made by a migration that succeeded (or
// whose end the VM does not say: handed over by an earlier version); nil
// when there is none.
func (d *decider) targetCopy(target string) *v1alpha1.MigratedCopy {
	for i := range d.obs.SourceCopies {
		c := &d.obs.SourceCopies[i]
		if c.Namespace != d.m.Namespace || c.Name != target {
			continue
		}
		if c.Outcome == v1alpha1.OutcomeSucceeded || c.Outcome == "" {
			return c
		}
	}
	return nil
}

// alreadyMigratedMessage says what was found.
func alreadyMigratedMessage(c *v1alpha1.MigratedCopy) string {
	s := fmt.Sprintf("already migrated: VirtualMachine %s/%s exists, migrated from this source VM", c.Namespace, c.Name)
	if c.Identity != "" {
		s += " (" + c.Identity + ")"
	}
	if c.MigratedBy != "" {
		s += " by migration " + c.MigratedBy
	}
	return s
}

// AlreadyMigrated reports whether a migration ended Succeeded because it
// found its target already migrated: status.alreadyMigrated, or, in a
// summary the controller's cache holds of a finished migration, its
// Succeeded condition's reason.
func AlreadyMigrated(st *v1alpha1.VirtualMachineMigrationStatus) bool {
	if st.Phase != v1alpha1.PhaseSucceeded {
		return false
	}
	if st.AlreadyMigrated != nil {
		return true
	}
	c := meta.FindStatusCondition(st.Conditions, ConditionSucceeded)
	return c != nil && c.Reason == ReasonAlreadyMigrated
}
