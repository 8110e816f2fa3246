package statemachine

import (
	"fmt"
	"time"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// A stop the controller issued can land late: a power-off task queued on a
// busy vCenter runs minutes after it was asked for, and a guest shutting
// down (VMware Tools already stopped) powers the VM off when it is done. A
// restore is done only once neither can still land.

// ReasonSourceStopPending: a stop the controller issued may still power
// the source off; the restore waits for it, and a person may end it.
const ReasonSourceStopPending = "SourceStopPending"

// WatchesPowerOffTasks reports whether the decision for m looks at the
// source VM's power-off tasks (SourceObservation.PowerOffTasks): a
// power-off the controller requested may still run while the source is
// being stopped or restored.
func WatchesPowerOffTasks(m *v1alpha1.VirtualMachineMigration) bool {
	sc := m.Status.SourceControl
	if sc == nil || sc.PowerOffRequestedAt == nil || NeedsSource(m) != SourceNeedState {
		return false
	}
	return m.Status.Phase == v1alpha1.PhaseStoppingSource || needsRestore(&m.Status)
}

// recordPowerOffTask records the newest power-off task seen once a
// power-off was requested: the task the request started.
func (d *decider) recordPowerOffTask() {
	sc := d.st.SourceControl
	tasks := d.obs.Source.PowerOffTasks
	if sc == nil || sc.PowerOffRequestedAt == nil || len(tasks) == 0 {
		return
	}
	if ref := tasks[len(tasks)-1].Ref; ref != "" {
		sc.PowerOffTask = ref
	}
}

// pendingPowerOff returns a power-off task of the source that may still
// run, if any was seen.
func (d *decider) pendingPowerOff() (TaskObservation, bool) {
	if d.st.SourceControl == nil || d.st.SourceControl.PowerOffRequestedAt == nil {
		return TaskObservation{}, false
	}
	for _, t := range d.obs.Source.PowerOffTasks {
		if t.Pending() {
			return t, true
		}
	}
	return TaskObservation{}, false
}

// failedPowerOff returns the failure of the power-off task recorded, when
// it ended failing.
func (d *decider) failedPowerOff() *ObservedError {
	sc := d.st.SourceControl
	for _, t := range d.obs.Source.PowerOffTasks {
		if t.Ref == sc.PowerOffTask && t.State == TaskFailed && t.Error != nil {
			return t.Error
		}
	}
	return nil
}

// awaitPowerOffTask waits, while the source is being stopped, for the
// power-off task to run (until the retry deadline); it reports whether
// the decision is made.
func (d *decider) awaitPowerOffTask() bool {
	sc := d.st.SourceControl
	if sc.PowerOffRequestedAt == nil {
		return false
	}
	d.recordPowerOffTask()
	if t, ok := d.pendingPowerOff(); ok {
		if d.pastDeadline() {
			d.fail(ReasonSourceStopPending, fmt.Sprintf("power-off task %s of the source VM is still %s and the retry deadline of %s passed: it may still power the source off",
				t.Ref, t.State, d.spec.Policy.RetryDeadline()))
			return true
		}
		d.working(fmt.Sprintf("waiting for power-off task %s of the source VM (%s)", t.Ref, t.State), d.cfg.PollInterval)
		d.requeueAtDeadline()
		return true
	}
	if e := d.failedPowerOff(); e != nil {
		msg := fmt.Sprintf("power-off task %s failed: %s", sc.PowerOffTask, e.Message)
		if e.Class == ErrorPermanent || e.Class == ErrorGone || d.pastDeadline() {
			d.fail(e.Reason, msg)
			return true
		}
		d.recordError(e.Reason, msg)
	}
	return false
}

// stopPending says what stop the controller issued may still power the
// source off, if any: a power-off task that has not ended, a power-off
// requested moments ago whose task is not seen yet (a call in flight when
// the controller stopped), or a guest shutdown neither seen done (the VM
// off) nor abandoned.
func (d *decider) stopPending() (string, bool) {
	sc := d.st.SourceControl
	d.recordPowerOffTask()
	if t, ok := d.pendingPowerOff(); ok {
		return fmt.Sprintf("power-off task %s is %s", t.Ref, t.State), true
	}
	if sc.PoweredOffAt != nil || sc.RestoreRequestedAt != nil {
		return "", false
	}
	if sc.PowerOffRequestedAt != nil && sc.PowerOffTask == "" && d.now.Time.Before(sc.PowerOffRequestedAt.Add(d.cfg.PollInterval)) {
		return "the power-off may not have reached vSphere yet", true
	}
	if sc.ShutdownRequestedAt != nil && !d.shutdownAbandoned() {
		if d.obs.Source.ToolsRunning {
			return "the guest shutdown may not have begun yet", true
		}
		return "the guest is shutting down (VMware Tools stopped)", true
	}
	return "", false
}

// shutdownAbandoned reports whether a requested guest shutdown can no
// longer land: VMware Tools run on the powered-on VM after the shutdown
// timeout (they stop early in a shutdown: running again, or still, the
// guest came back or never acted on the request).
func (d *decider) shutdownAbandoned() bool {
	sc := d.st.SourceControl
	return d.obs.Source.ToolsRunning && !d.now.Time.Before(sc.ShutdownRequestedAt.Add(d.spec.Policy.ShutdownTimeout()))
}

// waitForStop waits for a pending stop before the restore goes on: as work
// for the shutdown timeout after the stop was requested, then as a wait a
// person may have to end.
func (d *decider) waitForStop(what string) {
	sc := d.st.SourceControl
	at := stopRequestedAt(sc)
	patience := at.Add(d.spec.Policy.ShutdownTimeout())
	state := "still on"
	if d.obs.Source.PowerState == PowerStateOff {
		state = "off"
	}
	if d.now.Time.Before(patience) {
		d.working(fmt.Sprintf("the source VM is %s, but the stop requested at %s may still be under way (%s): waiting until it can no longer land before powering it on",
			state, at.UTC().Format(time.RFC3339), what), min(d.cfg.PollInterval, patience.Sub(d.now.Time)))
		return
	}
	d.wait(ReasonSourceStopPending, fmt.Sprintf("the source VM is %s, but the stop requested at %s may still power it off (%s). "+
		"The controller powers it on once it is off and no power-off task is pending, or ends the restore once VMware Tools run again on the powered-on VM. "+
		"If the guest hangs in its shutdown, power the VM off (or reset it) in vSphere; if a power-off task is stuck, cancel it in vSphere",
		state, at.UTC().Format(time.RFC3339), what), d.cfg.PollInterval)
}
