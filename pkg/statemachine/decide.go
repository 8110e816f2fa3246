package statemachine

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/untrusted"
)

// Decide returns what to do next for one migration. It is pure and
// deterministic: the same input always gives the same decision.
func Decide(in Input) Decision {
	d := newDecider(in)
	switch {
	case d.m.DeletionTimestamp != nil:
		d.cancel()
	case IsTerminal(d.st.Phase):
		// Terminal phases stay terminal; only deletion acts on them, and
		// a change of the spec of a migration refused before the stop or
		// found already migrated (neither touched anything).
		if d.m.Generation != d.st.ObservedGeneration && (RefusedBeforeCutover(d.st) || AlreadyMigrated(d.st)) {
			d.validateAgain()
		}
	case d.m.Spec.Policy.Paused:
		d.paused = true
		d.progressWhilePaused()
	default:
		d.step()
	}
	d.finish()
	return d.out
}

// IsTerminal reports whether a phase is terminal.
func IsTerminal(p v1alpha1.Phase) bool {
	return p == v1alpha1.PhaseSucceeded || p == v1alpha1.PhaseFailed
}

// decider carries one decision while it is being made.
type decider struct {
	cfg  Config
	m    *v1alpha1.VirtualMachineMigration
	spec *v1alpha1.VirtualMachineMigrationSpec // the spec in force (SpecInForce)
	obs  Observation
	now  metav1.Time
	st   *v1alpha1.VirtualMachineMigrationStatus
	out  Decision

	startPhase v1alpha1.Phase
	paused     bool
	// waitReason is set when the migration waits on something outside the
	// controller (a person, a slot, a transient failure): Progressing is
	// then false with this reason.
	waitReason, waitMessage string
	// workMessage says what the controller is doing now.
	workMessage string
	// restoreProblem says why restoring the source failed this time.
	restoreProblem string
}

func newDecider(in Input) *decider {
	st := in.Migration.Status.DeepCopy()
	if st.Phase == "" {
		st.Phase = v1alpha1.PhasePending
	}
	obs := in.Observation
	obs.Children = obs.Children.ownedBy(in.Migration.UID)
	return &decider{
		cfg:        in.Config.withDefaults(),
		m:          in.Migration,
		spec:       in.Migration.SpecInForce(),
		obs:        obs,
		now:        in.Now,
		st:         st,
		startPhase: st.Phase,
	}
}

// step dispatches to the current phase's decision.
func (d *decider) step() {
	switch d.st.Phase {
	case v1alpha1.PhasePending:
		d.pending()
	case v1alpha1.PhaseValidating:
		d.validating()
	case v1alpha1.PhaseAwaitingApproval:
		d.awaitingApproval()
	case v1alpha1.PhaseQueued:
		d.queued()
	case v1alpha1.PhaseStoppingSource:
		d.stoppingSource()
	case v1alpha1.PhaseTransferringDisks:
		d.transferringDisks()
	case v1alpha1.PhaseConverting:
		d.converting()
	case v1alpha1.PhaseImporting:
		d.importing()
	case v1alpha1.PhaseCreatingVM:
		d.creatingVM()
	case v1alpha1.PhaseStarting:
		d.starting()
	case v1alpha1.PhaseCleaningUp:
		d.cleaningUp()
	case v1alpha1.PhaseRollingBack:
		d.rollingBack()
	case v1alpha1.PhasePlanned:
		d.planned()
	case v1alpha1.PhaseCancelling:
		// Only reachable while the object is being deleted, and then
		// cancel() runs instead; a restored object simply waits.
		d.wait(ReasonCancelled, "the migration is being cancelled", 0)
	default:
		d.fail(ReasonFailed, fmt.Sprintf("unknown phase %q in status", d.st.Phase))
	}
}

// act asks for one action.
func (d *decider) act(t ActionType, name string, attempt int32) {
	d.out.Action = Action{Type: t, Name: name, Attempt: attempt}
}

// remove asks to delete the observed objects; name says what for. An
// object that does not carry this migration's UID is never named, whatever
// the observation held.
func (d *decider) remove(t ActionType, name string, objects ...ObjectRef) {
	ours := slices.DeleteFunc(slices.Clone(objects), func(o ObjectRef) bool {
		return d.m.UID == "" || o.MigrationUID != d.m.UID
	})
	d.out.Action = Action{Type: t, Name: name, Objects: ours}
}

// working says what the controller does now and when to look again.
func (d *decider) working(message string, requeue time.Duration) {
	d.workMessage = message
	d.requeue(requeue)
}

// wait says the migration waits on something outside the controller.
func (d *decider) wait(reason, message string, requeue time.Duration) {
	d.waitReason, d.waitMessage = reason, message
	d.requeue(requeue)
}

// requeue keeps the earliest positive requeue asked for.
func (d *decider) requeue(after time.Duration) {
	if after > 0 && (d.out.RequeueAfter == 0 || after < d.out.RequeueAfter) {
		d.out.RequeueAfter = after
	}
}

// advance records the evidence that the current phase's desired state was
// observed and moves to the next phase.
func (d *decider) advance(next v1alpha1.Phase, observed string) {
	d.recordEvidence(d.st.Phase, observed)
	d.setPhase(next, observed)
}

// PhaseChangedReason is the event reason of a move into phase next: the
// phase itself, so that each phase change is an event of its own (not
// aggregated with the others) and events can be filtered by phase.
func PhaseChangedReason(next v1alpha1.Phase) string { return string(next) }

// setPhase moves to a phase without claiming evidence for the current one
// (failure, cancellation, a step back).
func (d *decider) setPhase(next v1alpha1.Phase, message string) {
	from := d.st.Phase
	d.st.Phase = next
	now := d.now
	d.st.PhaseStartTime = &now
	d.st.LastProgressTime = &now
	if IsTerminal(next) {
		d.st.CompletionTime = &now
	}
	d.out.Events = append(d.out.Events, Event{
		Warning: next == v1alpha1.PhaseFailed || next == v1alpha1.PhaseRollingBack,
		Reason:  PhaseChangedReason(next),
		Message: fmt.Sprintf("%s -> %s: %s", from, next, message),
	})
	// Look again at once: the next phase has its own work.
	d.requeue(time.Millisecond)
}

func (d *decider) recordEvidence(phase v1alpha1.Phase, observed string) {
	ev := v1alpha1.CheckpointEvidence{Phase: phase, ReachedAt: d.now, Observed: observed}
	for i := range d.st.Evidence {
		if d.st.Evidence[i].Phase == phase {
			d.st.Evidence[i] = ev
			return
		}
	}
	d.st.Evidence = append(d.st.Evidence, ev)
}

// fail records the failure and starts the rollback of the source. A
// migration refused before its source VM was touched (in a phase before
// the stop, SourceUntouched, nothing of its own seen) has nothing to roll back: it ends
// Failed at once, and says so.
func (d *decider) fail(reason, message string) {
	d.recordError(reason, message)
	// The message is said in one event (a failed action's says it already).
	if !slices.ContainsFunc(d.out.Events, func(e Event) bool { return e.Message == message }) {
		d.out.Events = append(d.out.Events, Event{Warning: true, Reason: reason, Message: message})
	}
	if beforeTheStop(d.st.Phase) && SourceUntouched(d.st) && !d.ownSeen() {
		d.setPhase(v1alpha1.PhaseFailed, fmt.Sprintf("refused (%s) before the source VM was touched: nothing to roll back", reason))
		return
	}
	d.setPhase(v1alpha1.PhaseRollingBack, fmt.Sprintf("failed (%s; status.lastError says why): rolling back", reason))
}

// SourceUntouched reports whether nothing a migration did reached its
// source VM or came after the stop: no guest shutdown or power-off was
// requested (the intent is recorded before the call), no snapshot made,
// no disk, transfer, conversion, verification or target VM recorded.
// Failing so, it has nothing to roll back.
func SourceUntouched(st *v1alpha1.VirtualMachineMigrationStatus) bool {
	if sc := st.SourceControl; sc != nil && (sc.ShutdownRequestedAt != nil || sc.PowerOffRequestedAt != nil || len(sc.Snapshots) > 0) {
		return false
	}
	if st.Transfer != nil || st.Conversion != nil || st.Verification != nil || len(st.Disks) > 0 {
		return false
	}
	t := st.Target
	return t == nil || (t.UID == "" && t.StartRequestedAt == nil)
}

// beforeTheStop reports whether a phase comes before the source is
// stopped (an unknown one, from another version, does not: its failure
// rolls back, which looks at the source).
func beforeTheStop(p v1alpha1.Phase) bool {
	switch p {
	case v1alpha1.PhasePending, v1alpha1.PhaseValidating, v1alpha1.PhasePlanned, v1alpha1.PhaseAwaitingApproval,
		v1alpha1.PhaseQueued, v1alpha1.PhaseStoppingSource:
		return true
	}
	return false
}

// ownSeen reports whether the observation holds a Job of the run or a
// target VM of this migration: the rollback stops and halts them.
func (d *decider) ownSeen() bool {
	o := d.obs
	return o.TransferJob != nil || o.ConversionJob != nil || o.VerificationJob != nil || (o.VM != nil && o.VM.Ours)
}

// recordError keeps the last error; an identical error keeps its first time
// so that a repeated failure does not rewrite the status.
func (d *decider) recordError(reason, message string) {
	// Cut as status keeps it, so that the same failure compares equal.
	reason, message = untrusted.Cut(reason, v1alpha1.MaxWord), untrusted.Cut(message, v1alpha1.MaxMessage)
	if e := d.st.LastError; e != nil && e.Phase == d.st.Phase && e.Reason == reason && e.Message == message {
		return
	}
	d.st.LastError = &v1alpha1.MigrationError{Phase: d.st.Phase, Reason: reason, Message: message, Time: d.now}
}

// pastDeadline reports whether the retry budget's wall-clock deadline passed.
func (d *decider) pastDeadline() bool {
	if d.st.StartTime == nil {
		return false
	}
	return !d.now.Time.Before(d.st.StartTime.Add(d.spec.Policy.RetryDeadline()))
}

// retry spends one retry of the budget for a failed attempt. It returns
// false, after failing the migration, when the budget is spent.
func (d *decider) retry(reason, message string) bool {
	limit := d.spec.Policy.RetryLimit()
	if d.st.Retries >= limit || d.pastDeadline() {
		why := fmt.Sprintf("%d of %d retries spent", d.st.Retries, limit)
		if d.pastDeadline() {
			why = fmt.Sprintf("retry deadline of %s passed", d.spec.Policy.RetryDeadline())
		}
		d.fail(reason, fmt.Sprintf("%s (retry budget spent: %s)", message, why))
		return false
	}
	d.st.Retries++
	d.recordError(reason, message)
	d.out.Events = append(d.out.Events, Event{
		Warning: true,
		Reason:  ReasonRetrying,
		Message: fmt.Sprintf("%s: %s; retry %d of %d", reason, message, d.st.Retries, limit),
	})
	d.requeue(time.Millisecond)
	return true
}

// observedError handles a failure the steps saw while observing.
func (d *decider) observedError(e *ObservedError) {
	switch {
	case e.Class == ErrorPermanent || e.Class == ErrorGone:
		d.fail(e.Reason, e.Message)
	case d.pastDeadline():
		d.fail(e.Reason, fmt.Sprintf("%s (retry deadline of %s passed)", e.Message, d.spec.Policy.RetryDeadline()))
	case e.Class == ErrorNeedsUser:
		d.recordError(e.Reason, e.Message)
		d.wait(e.Reason, e.Message, d.cfg.WaitInterval)
		d.requeueAtDeadline()
	default:
		d.recordError(e.Reason, e.Message)
		d.wait(e.Reason, e.Message, d.cfg.PollInterval)
		d.requeueAtDeadline()
	}
}

// requeueAtDeadline asks to look again no later than when the retry
// deadline passes, so that a wait fails on time.
func (d *decider) requeueAtDeadline() {
	if d.st.StartTime != nil {
		d.requeue(d.st.StartTime.Add(d.spec.Policy.RetryDeadline()).Sub(d.now.Time))
	}
}

// ActionFailed decides what follows when the action a decision asked for
// failed. in.Migration is the migration as written with that decision's
// status (intents included), and e the failure, classified by the step.
// Going forward, the failure is handled as an observed one: transient
// failures and those a person must fix wait with a condition until the
// retry deadline, permanent ones (and any past the deadline) fail the
// migration, whose rollback restores the source. While the source is being
// restored or the migration deleted, a failure never ends anything: it
// waits and the action is tried again (a failed power-on shows in the
// SourceRestoreFailed condition).
func ActionFailed(in Input, failed Action, e ObservedError) Decision {
	d := newDecider(in)
	msg := failedPrefix(failed.Type) + e.Message
	d.out.Events = append(d.out.Events, Event{Warning: true, Reason: ReasonActionFailed, Message: msg})
	switch {
	case failed.Type == ActionPowerOnSource:
		d.restoreFailed(e.Reason, msg)
	case d.m.DeletionTimestamp != nil || IsTerminal(d.st.Phase) || d.st.Phase == v1alpha1.PhaseRollingBack || d.st.Phase == v1alpha1.PhaseCancelling:
		d.wait(e.Reason, msg, d.cfg.WaitInterval)
	default:
		d.observedError(&ObservedError{Class: e.Class, Reason: e.Reason, Message: msg})
	}
	d.finish()
	return d.out
}

// failedPrefix begins the message of a failed action of type t.
func failedPrefix(t ActionType) string { return string(t) + " failed: " }

// keepActionWait keeps the wait a failed action left (Progressing false
// with its reason and message) while the decision tries that action
// again, until it succeeds. Flipping Progressing to Working for the retry
// and back for its failure would write the status twice per retry, and
// each write brings the migration back at once through its informer: a
// hot loop, whose events also drown the migration's later ones.
func (d *decider) keepActionWait() {
	a := d.out.Action.Type
	if a == ActionNone || d.waitReason != "" {
		return
	}
	c := meta.FindStatusCondition(d.m.Status.Conditions, ConditionProgressing)
	if c != nil && c.Status == metav1.ConditionFalse && strings.HasPrefix(c.Message, failedPrefix(a)) {
		d.waitReason, d.waitMessage = c.Reason, c.Message
	}
}

// hasFinalizer reports whether the migration carries the controller's finalizer.
func hasFinalizer(m *v1alpha1.VirtualMachineMigration) bool {
	return slices.Contains(m.Finalizers, v1alpha1.FinalizerName)
}
