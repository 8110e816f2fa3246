package statemachine

import (
	"fmt"
	"slices"
	"strings"
	"time"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// rollingBack: after a failure, nothing still reads the source or writes the
// staging volumes, the target VM is halted (and kept once it was started),
// and the source is back as it was found. Staging objects stay for
// inspection until deletion.
func (d *decider) rollingBack() {
	if d.stopActiveJobs() || d.haltTargetVM() || d.awaitTargetGone() || d.restoreSource() || d.removeSnapshots() {
		return
	}
	d.setPhase(v1alpha1.PhaseFailed, d.restoredMessage())
}

// cancel runs while the migration is being deleted. Migrated data is never
// destroyed: a migration that succeeded, or whose target VM was started,
// keeps the VM and its DataVolumes (halted, unless it succeeded) and loses
// only its staging objects; an unfinished target that never ran goes with
// the migration. The source is restored, then the finalizer released.
func (d *decider) cancel() {
	if !hasFinalizer(d.m) {
		return
	}
	if !IsTerminal(d.st.Phase) && d.st.Phase != v1alpha1.PhaseCancelling {
		d.setPhase(v1alpha1.PhaseCancelling, fmt.Sprintf("the migration was deleted during %s", d.st.Phase))
		d.out.Events = append(d.out.Events, Event{Reason: ReasonCancelled, Message: d.cancellingMessage()})
		return
	}
	if d.keepsTarget() {
		if d.st.Phase != v1alpha1.PhaseSucceeded && d.haltTargetVM() {
			return
		}
		if staging := d.obs.Children.Staging(); len(staging) > 0 {
			d.remove(ActionDeleteStaging, "", staging...)
			d.working(fmt.Sprintf("deleting %d staging objects; the target VM and its disks are kept", len(staging)), d.cfg.PollInterval)
			return
		}
	} else if d.deleteUnfinishedTarget() {
		return
	}
	if d.st.Phase == v1alpha1.PhaseCancelling && (d.awaitTargetGone() || d.restoreSource() || d.removeSnapshots()) {
		return
	}
	if d.releaseTarget() {
		return
	}
	d.act(ActionRemoveFinalizer, v1alpha1.FinalizerName, 0)
	d.working("releasing the finalizer", 0)
}

// deleteUnfinishedTarget deletes a target VM that never ran, then every
// child, the DataVolumes no VM owns included.
func (d *decider) deleteUnfinishedTarget() bool {
	if vm := d.obs.VM; vm != nil && vm.Ours {
		d.remove(ActionDeleteVM, d.targetName(), vm.Ref)
		d.working("deleting the unfinished target VirtualMachine", d.cfg.PollInterval)
		return true
	}
	if n := d.obs.Children.Count(); n > 0 {
		d.remove(ActionDeleteChildren, "", d.obs.Children.All()...)
		d.working(fmt.Sprintf("deleting %d child objects", n), d.cfg.PollInterval)
		return true
	}
	return false
}

// targetStarted reports whether the target VM was asked to run, or was
// seen running: from then on it holds the migrated data.
func (d *decider) targetStarted() bool {
	if t := d.st.Target; t != nil && t.StartRequestedAt != nil {
		return true
	}
	vm := d.obs.VM
	return vm != nil && vm.Ours && vm.RunStrategy != "" && vm.RunStrategy != RunStrategyHalted
}

// keepsTarget reports whether the target VM and its disks must outlive a
// deletion of the migration: it succeeded, or its target was started.
func (d *decider) keepsTarget() bool {
	return d.st.Phase == v1alpha1.PhaseSucceeded || d.targetStarted()
}

// stopActiveJobs deletes a transfer, conversion or verification Job that
// still runs.
func (d *decider) stopActiveJobs() bool {
	for _, job := range []*JobObservation{d.obs.TransferJob, d.obs.ConversionJob, d.obs.VerificationJob} {
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
	return sc != nil && sc.OriginalPowerState == PowerStateOn && sc.RestoredAt == nil && sc.SourceGoneAt == nil && sc.RestoreAbandonedAt == nil &&
		(sc.ShutdownRequestedAt != nil || sc.PowerOffRequestedAt != nil)
}

// restoreSource powers the source back on when the controller stopped it.
// A stop it requested may still be under way (a guest shutting down): the
// source counts as restored only once it was seen off and powered on
// again, or once the stop's time ran out with the source still on. Only a
// source VM that no longer exists ends a restore otherwise; any other
// failure waits, retries and says so in the SourceRestoreFailed condition.
func (d *decider) restoreSource() bool {
	if !d.needsRestore() {
		return false
	}
	src := d.obs.Source
	// Errors here never replace status.lastError: it keeps the failure
	// that started the rollback.
	switch {
	case src.Error != nil && src.Error.Class == ErrorGone:
		now := d.now
		d.st.SourceControl.SourceGoneAt = &now
		d.out.Events = append(d.out.Events, Event{Warning: true, Reason: src.Error.Reason,
			Message: "the source VM no longer exists: there is nothing to power on again (" + src.Error.Message + ")"})
		return false
	case src.Error != nil && d.restoreHopeless(src.Error):
		d.abandonRestore(src.Error)
		return false
	case src.Error != nil:
		d.restoreFailed(src.Error.Reason, "reading the source VM's power state: "+src.Error.Message)
		return true
	case !src.Observed:
		d.working("reading the source VM's power state", d.cfg.PollInterval)
		return true
	case src.PowerState == PowerStateOn:
		return d.seenOn()
	}
	if t, pending := d.pendingPowerOff(); pending {
		// Powered on now, the VM would be powered off again by the task.
		d.recordPowerOffTask()
		d.waitForStop(fmt.Sprintf("power-off task %s is %s", t.Ref, t.State))
		return true
	}
	return d.powerOn()
}

// seenOn handles a source seen powered on: restored, unless a stop the
// controller asked for may still turn it off.
func (d *decider) seenOn() bool {
	sc := d.st.SourceControl
	if what, pending := d.stopPending(); pending {
		d.waitForStop(what)
		return true
	}
	now := d.now
	sc.RestoredAt = &now
	d.out.Events = append(d.out.Events, Event{Reason: ReasonSourceRestored, Message: "the source VM is powered on again, as it was found"})
	d.requeue(d.cfg.PollInterval)
	return true
}

func stopRequestedAt(sc *v1alpha1.SourceControlStatus) time.Time {
	if sc.PowerOffRequestedAt != nil {
		return sc.PowerOffRequestedAt.Time
	}
	return sc.ShutdownRequestedAt.Time
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// powerOn asks for the source to be powered on, the intent first, at most
// once a poll interval.
func (d *decider) powerOn() bool {
	sc := d.st.SourceControl
	if sc.RestoreRequestedAt != nil && d.now.Sub(sc.RestoreRequestedAt.Time) < d.cfg.PollInterval {
		d.working("waiting for the source VM to power on", d.cfg.PollInterval-d.now.Sub(sc.RestoreRequestedAt.Time))
		return true
	}
	now := d.now
	sc.RestoreRequestedAt = &now
	d.act(ActionPowerOnSource, "", 0)
	d.working("powering the source VM back on", d.cfg.PollInterval)
	return true
}

// restoreFailed waits after a failure to restore the source, and says so
// in the SourceRestoreFailed condition.
func (d *decider) restoreFailed(reason, message string) {
	d.restoreProblem = message
	d.wait(reason, "restoring the source: "+message, d.cfg.WaitInterval)
}

// removeSnapshots removes the snapshots the controller made on the source.
func (d *decider) removeSnapshots() bool {
	sc := d.st.SourceControl
	if sc == nil || sc.RestoreAbandonedAt != nil {
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
	case sc.SourceGoneAt != nil:
		return "the source VM no longer exists"
	case sc.RestoreAbandonedAt != nil:
		return "the source VM could not be restored and was left powered off: " + sc.RestoreAbandonedReason
	case sc.OriginalPowerState != PowerStateOn:
		return fmt.Sprintf("the source VM stays %s, as it was found", sc.OriginalPowerState)
	default:
		return "the source VM could not be restored"
	}
}

// keptTargetMessage names the target VM and disks kept after a failure or
// cancellation once the target was started.
func (d *decider) keptTargetMessage() string {
	var dvs []string
	for _, disk := range d.st.Disks {
		if disk.DataVolume != "" {
			dvs = append(dvs, disk.DataVolume)
		}
	}
	return fmt.Sprintf("VirtualMachine %s/%s and its DataVolumes %s hold migrated data and are kept, halted: delete them yourself if they are not wanted",
		d.m.Namespace, d.targetName(), strings.Join(dvs, ", "))
}

// pendingSnapshots reports whether a snapshot the controller made is not yet
// known to be removed.
func pendingSnapshots(st *v1alpha1.VirtualMachineMigrationStatus) bool {
	if st.SourceControl == nil {
		return false
	}
	return slices.ContainsFunc(st.SourceControl.Snapshots, func(s v1alpha1.SnapshotRecord) bool { return s.RemovedAt == nil })
}
