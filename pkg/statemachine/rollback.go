package statemachine

import (
	"fmt"
	"slices"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// rollingBack: after a failure, nothing still reads the source or writes the
// staging volumes, the target VM is halted, and the source is back as it
// was found. Staging objects stay for inspection until deletion.
func (d *decider) rollingBack() {
	if d.stopActiveJobs() || d.haltTargetVM() || d.restoreSource() || d.removeSnapshots() {
		return
	}
	d.setPhase(v1alpha1.PhaseFailed, d.restoredMessage())
}

// cancel runs while the migration is being deleted: children go, the source
// is restored, then the finalizer is released. A migration that succeeded
// keeps its VM (it is not a child) and its source stays off.
func (d *decider) cancel() {
	if !hasFinalizer(d.m) {
		return
	}
	if !IsTerminal(d.st.Phase) && d.st.Phase != v1alpha1.PhaseCancelling {
		d.setPhase(v1alpha1.PhaseCancelling, fmt.Sprintf("the migration was deleted during %s", d.st.Phase))
		d.out.Events = append(d.out.Events, Event{Reason: ReasonCancelled, Message: "cancelling: deleting children and restoring the source"})
		return
	}
	// A target VM of a migration that did not succeed is an unfinished
	// copy: it goes with the migration. A migrated VM never does.
	if d.st.Phase != v1alpha1.PhaseSucceeded {
		if vm := d.obs.VM; vm != nil && vm.Ours {
			d.remove(ActionDeleteVM, d.targetName(), vm.Ref)
			d.working("deleting the unfinished target VirtualMachine", d.cfg.PollInterval)
			return
		}
	}
	if n := d.obs.Children.Count(); n > 0 {
		d.remove(ActionDeleteChildren, "", d.obs.Children.All()...)
		d.working(fmt.Sprintf("deleting %d child objects", n), d.cfg.PollInterval)
		return
	}
	if d.st.Phase == v1alpha1.PhaseCancelling && (d.restoreSource() || d.removeSnapshots()) {
		return
	}
	d.act(ActionRemoveFinalizer, v1alpha1.FinalizerName, 0)
	d.working("releasing the finalizer", 0)
}

// stopActiveJobs deletes a transfer or conversion Job that still runs.
func (d *decider) stopActiveJobs() bool {
	for _, job := range []*JobObservation{d.obs.TransferJob, d.obs.ConversionJob} {
		if job != nil && !job.Succeeded && !job.Failed {
			d.remove(ActionDeleteJob, job.Name, job.Ref)
			d.working("stopping job "+job.Name, d.cfg.PollInterval)
			return true
		}
	}
	return false
}

// haltTargetVM stops a target VM this migration started, so that it never
// runs beside the restored source.
func (d *decider) haltTargetVM() bool {
	vm := d.obs.VM
	if vm == nil || !vm.Ours || vm.RunStrategy == RunStrategyHalted {
		return false
	}
	d.act(ActionHaltVM, d.targetName(), 0)
	d.working("halting the target VirtualMachine before restoring the source", d.cfg.PollInterval)
	return true
}

// needsRestore reports whether the controller stopped a source that was
// running and has not yet seen it running again.
func (d *decider) needsRestore() bool { return needsRestore(d.st) }

func needsRestore(st *v1alpha1.VirtualMachineMigrationStatus) bool {
	sc := st.SourceControl
	return sc != nil && sc.OriginalPowerState == PowerStateOn && sc.RestoredAt == nil &&
		(sc.ShutdownRequestedAt != nil || sc.PowerOffRequestedAt != nil)
}

// restoreSource powers the source back on when the controller stopped it.
func (d *decider) restoreSource() bool {
	if !d.needsRestore() {
		return false
	}
	src := d.obs.Source
	// Errors here never replace status.lastError: it keeps the failure
	// that started the rollback.
	if src.Error != nil {
		if src.Error.Class == ErrorPermanent {
			// The source is gone: there is nothing left to restore.
			d.out.Events = append(d.out.Events, Event{Warning: true, Reason: src.Error.Reason,
				Message: "the source could not be restored: " + src.Error.Message})
			return false
		}
		d.wait(src.Error.Reason, "restoring the source: "+src.Error.Message, d.cfg.WaitInterval)
		return true
	}
	if !src.Observed {
		d.working("reading the source VM's power state", d.cfg.PollInterval)
		return true
	}
	sc := d.st.SourceControl
	now := d.now
	if src.PowerState == PowerStateOn {
		sc.RestoredAt = &now
		d.out.Events = append(d.out.Events, Event{Reason: ReasonSourceRestored, Message: "the source VM is powered on again, as it was found"})
		d.requeue(d.cfg.PollInterval)
		return true
	}
	if sc.RestoreRequestedAt != nil && d.now.Sub(sc.RestoreRequestedAt.Time) < d.cfg.PollInterval {
		d.working("waiting for the source VM to power on", d.cfg.PollInterval-d.now.Sub(sc.RestoreRequestedAt.Time))
		return true
	}
	sc.RestoreRequestedAt = &now
	d.act(ActionPowerOnSource, "", 0)
	d.working("powering the source VM back on", d.cfg.PollInterval)
	return true
}

// removeSnapshots removes the snapshots the controller made on the source.
func (d *decider) removeSnapshots() bool {
	sc := d.st.SourceControl
	if sc == nil {
		return false
	}
	for i := range sc.Snapshots {
		snap := &sc.Snapshots[i]
		if snap.RemovedAt != nil {
			continue
		}
		if src := d.obs.Source; src.Observed && src.Error == nil && !slices.Contains(src.Snapshots, snap.Name) {
			now := d.now
			snap.RemovedAt = &now
			continue
		}
		d.act(ActionRemoveSnapshot, snap.Name, 0)
		d.working("removing snapshot "+snap.Name+" from the source", d.cfg.PollInterval)
		return true
	}
	return false
}

func (d *decider) restoredMessage() string {
	sc := d.st.SourceControl
	switch {
	case sc == nil || (sc.ShutdownRequestedAt == nil && sc.PowerOffRequestedAt == nil):
		return "the source VM was not touched"
	case sc.RestoredAt != nil:
		return "the source VM is powered on again, as it was found"
	case sc.OriginalPowerState != PowerStateOn:
		return fmt.Sprintf("the source VM stays %s, as it was found", sc.OriginalPowerState)
	default:
		return "the source VM could not be restored"
	}
}

// pendingSnapshots reports whether a snapshot the controller made is not yet
// known to be removed.
func pendingSnapshots(st *v1alpha1.VirtualMachineMigrationStatus) bool {
	if st.SourceControl == nil {
		return false
	}
	return slices.ContainsFunc(st.SourceControl.Snapshots, func(s v1alpha1.SnapshotRecord) bool { return s.RemovedAt == nil })
}
