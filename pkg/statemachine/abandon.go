package statemachine

import (
	"fmt"
	"time"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// ReasonSourceRestoreAbandoned is the event (and status) reason of a
// restore given up because the migration's namespace is being deleted and
// vSphere can no longer be reached for it.
const ReasonSourceRestoreAbandoned = "SourceRestoreAbandoned"

// TerminatingRestoreGrace is how long, from the migration's deletion, the
// restore of a migration whose namespace is being deleted keeps trying
// through failures that may heal (an unreachable vCenter) before it is
// given up. Failures nothing can heal there (the credentials Secret gone,
// a Terminating namespace accepting no new one) give it up at once.
const TerminatingRestoreGrace = 10 * time.Minute

// SourceNeedsRestore reports whether a migration with this status stopped
// a source that was running and has neither seen it running again, nor
// seen it gone, nor given its restore up.
func SourceNeedsRestore(st *v1alpha1.VirtualMachineMigrationStatus) bool { return needsRestore(st) }

// restoreHopeless reports whether a restore that could not read the source
// (e) can never succeed: the migration is being deleted with its
// namespace, and either e is nothing time heals (no credentials, refused
// ones: a Terminating namespace takes no new Secret), or the grace for
// failures that might heal has passed. Anywhere else a failed restore
// waits for as long as it takes, keeping the finalizer.
func (d *decider) restoreHopeless(e *ObservedError) bool {
	if !d.obs.NamespaceTerminating || d.m.DeletionTimestamp == nil {
		return false
	}
	if e.Class != ErrorTransient {
		return true
	}
	return !d.now.Time.Before(d.m.DeletionTimestamp.Add(TerminatingRestoreGrace))
}

// abandonRestore gives the restore up: the source stays as it is, the
// status and a warning event say so, naming the source VM, and the
// cancellation goes on to release the finalizer.
func (d *decider) abandonRestore(e *ObservedError) {
	sc := d.st.SourceControl
	now := d.now
	sc.RestoreAbandonedAt = &now
	sc.RestoreAbandonedReason = fmt.Sprintf("namespace %s is being deleted and vSphere cannot be reached for the source (%s: %s)",
		d.m.Namespace, e.Reason, e.Message)
	d.out.Events = append(d.out.Events, Event{Warning: true, Reason: ReasonSourceRestoreAbandoned, Message: fmt.Sprintf(
		"source VM %s was left powered off: %s; power it on in vSphere yourself; the finalizer is released so that the namespace can go",
		d.sourceVMName(), sc.RestoreAbandonedReason)})
}

// sourceVMName names the source VM for a person: its name, inventory path
// or reference, and its endpoint.
func (d *decider) sourceVMName() string {
	name := "(not inventoried)"
	if src := d.st.Source; src != nil {
		switch {
		case src.InventoryPath != "":
			name = fmt.Sprintf("%q (%s, %s)", src.Name, src.InventoryPath, src.MoRef)
		default:
			name = fmt.Sprintf("%q (%s)", src.Name, src.MoRef)
		}
	}
	return name + " on " + d.spec.Source.URL
}
