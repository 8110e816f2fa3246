package statemachine

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// finish sets the observed generation and every condition from what the
// decision found, and collects the output status, every string of what a
// source said cut to its bound (Bound) for the API server to store it.
func (d *decider) finish() {
	d.keepActionWait()
	d.st.ObservedGeneration = d.m.Generation
	d.sourceName()
	d.forgetRecoveredError()
	d.forgetDeletedPlan()
	d.st.Downtime = Downtime(d.st)
	d.viewedStatus()
	d.readyCondition()
	d.progressingCondition()
	d.terminalConditions()
	d.stalledCondition()
	d.pausedCondition()
	d.approvalCondition()
	d.specChangeCondition()
	d.insecureCondition()
	d.restoreCondition()
	d.targetKeptCondition()
	d.networkIdentityCondition()
	d.st.Bound()
	d.out.Status = *d.st
}

// setCondition sets a condition; its transition time moves only when its
// status flips.
func (d *decider) setCondition(t string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&d.st.Conditions, metav1.Condition{
		Type:               t,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: d.m.Generation,
		LastTransitionTime: d.now,
	})
}

// clearCondition turns a condition false, if it was ever set.
func (d *decider) clearCondition(t, reason, message string) {
	if meta.FindStatusCondition(d.st.Conditions, t) != nil {
		d.setCondition(t, metav1.ConditionFalse, reason, message)
	}
}

func (d *decider) readyCondition() {
	switch d.st.Phase {
	case v1alpha1.PhaseSucceeded:
		if c := d.st.AlreadyMigrated; c != nil {
			d.setCondition(ConditionReady, metav1.ConditionTrue, ReasonAlreadyMigrated, "the VM was "+alreadyMigratedMessage(c))
			return
		}
		d.setCondition(ConditionReady, metav1.ConditionTrue, ReasonSucceeded, "the VM was migrated: "+d.targetSummary())
	case v1alpha1.PhaseRollingBack:
		// The one condition that says why while the source is restored.
		d.setCondition(ConditionReady, metav1.ConditionFalse, d.failureReason(), d.failureMessage())
	case v1alpha1.PhaseFailed:
		d.setCondition(ConditionReady, metav1.ConditionFalse, d.failureReason(), d.failureReference())
	default:
		d.setCondition(ConditionReady, metav1.ConditionFalse, string(d.st.Phase), d.statusMessage())
	}
}

func (d *decider) progressingCondition() {
	switch {
	case d.st.Phase == v1alpha1.PhaseSucceeded:
		d.setCondition(ConditionProgressing, metav1.ConditionFalse, d.successReason(), d.successMessage())
	case d.st.Phase == v1alpha1.PhaseFailed:
		d.setCondition(ConditionProgressing, metav1.ConditionFalse, d.failureReason(), d.failureReference())
	case d.paused:
		d.setCondition(ConditionProgressing, metav1.ConditionFalse, ReasonPaused, "held by spec.policy.paused")
	case d.waitReason != "":
		d.setCondition(ConditionProgressing, metav1.ConditionFalse, d.waitReason, d.waitMessage)
	default:
		d.setCondition(ConditionProgressing, metav1.ConditionTrue, ReasonWorking, d.statusMessage())
	}
}

// terminalConditions sets Succeeded and Failed, the conditions to wait on
// (kubectl wait --for=condition=Succeeded, or =Failed): neither is set
// while the migration runs; when it ends, the outcome's is True and the
// other's False, both with the reason. Failed turns True only once the
// rollback restored the source (phase Failed), as a Job's Failed
// condition waits for its pods to end; while rolling back, a Failed
// condition that an older controller set True turns False.
func (d *decider) terminalConditions() {
	switch d.st.Phase {
	case v1alpha1.PhaseSucceeded:
		d.setCondition(ConditionSucceeded, metav1.ConditionTrue, d.successReason(), d.successMessage())
		if d.st.AlreadyMigrated != nil {
			d.setCondition(ConditionFailed, metav1.ConditionFalse, ReasonAlreadyMigrated, "nothing failed: the VM was already migrated")
			return
		}
		d.setCondition(ConditionFailed, metav1.ConditionFalse, ReasonSucceeded, "the migration succeeded")
	case v1alpha1.PhaseFailed:
		d.setCondition(ConditionSucceeded, metav1.ConditionFalse, d.failureReason(), d.failureReference())
		d.setCondition(ConditionFailed, metav1.ConditionTrue, d.failureReason(), d.failureMessage())
	case v1alpha1.PhaseRollingBack:
		d.clearCondition(ConditionFailed, ReasonRollingBack, "failing: the source VM is restored before the migration ends Failed")
	}
}

// stalledCondition sets Stalled, kstatus' condition (sigs.k8s.io/cli-utils,
// which Flux, kpt and cli-utils read, and which manifests/argocd follows)
// for a migration that cannot make progress: kstatus reads it as Failed,
// and a GitOps tool waiting on the migration reports the failure instead
// of timing out. It is true once the migration ended Failed, with the
// failure's reason (the Failed condition says the message), and while it
// runs with no progress seen for the stall timeout in a phase where the
// controller itself should make progress (NoProgress): as kstatus reads a
// Deployment past its progress deadline, and kstatus' own Stalled means
// "made insufficient progress". It is false while the migration rolls
// back (its failure is final once the source is restored, as the Failed
// condition's) and while it waits on a person (approval, planOnly,
// paused) or on a slot: those read InProgress.
func (d *decider) stalledCondition() {
	if d.st.Phase == v1alpha1.PhaseFailed {
		d.setCondition(ConditionStalled, metav1.ConditionTrue, d.failureReason(), d.failureReference())
		return
	}
	active := !IsTerminal(d.st.Phase) && !d.paused && d.waitReason == "" &&
		d.st.Phase != v1alpha1.PhaseAwaitingApproval && d.st.Phase != v1alpha1.PhaseQueued
	last := d.st.LastProgressTime
	if active && last != nil {
		limit := d.spec.Policy.StallAfter()
		idle := d.now.Sub(last.Time)
		if idle >= limit {
			d.setCondition(ConditionStalled, metav1.ConditionTrue, ReasonNoProgress,
				fmt.Sprintf("no progress in %s since %s", d.st.Phase, last.UTC().Format("2006-01-02T15:04:05Z")))
			return
		}
		d.requeue(limit - idle)
	}
	d.clearCondition(ConditionStalled, ReasonProgressing, "progress seen")
}

func (d *decider) pausedCondition() {
	if d.paused {
		d.setCondition(ConditionPaused, metav1.ConditionTrue, ReasonPaused,
			fmt.Sprintf("held at %s by spec.policy.paused; running jobs are not interrupted", d.st.Phase))
		return
	}
	d.clearCondition(ConditionPaused, ReasonNotPaused, "spec.policy.paused is false")
}

func (d *decider) approvalCondition() {
	if d.st.Phase == v1alpha1.PhaseAwaitingApproval && d.spec.Policy.NeedsApproval() {
		d.setCondition(ConditionApprovalRequired, metav1.ConditionTrue, ReasonAwaitingApproval, approvalMessage(d.m))
		return
	}
	d.clearCondition(ConditionApprovalRequired, ReasonApproved, "no approval pending")
}

func (d *decider) specChangeCondition() {
	if fields := ignoredSpecChanges(d.m); len(fields) > 0 {
		d.setCondition(ConditionSpecChangeIgnored, metav1.ConditionTrue, ReasonSpecChangeIgnored,
			fmt.Sprintf("changes to %s cannot apply: the source was already being stopped; status.appliedSpec is in force", strings.Join(fields, ", ")))
		return
	}
	d.clearCondition(ConditionSpecChangeIgnored, ReasonSpecApplied, "the spec in force matches the spec")
}

func (d *decider) insecureCondition() {
	if d.spec.Source.InsecureSkipVerify {
		if c := meta.FindStatusCondition(d.st.Conditions, ConditionInsecureConnection); c == nil || c.Status != metav1.ConditionTrue {
			d.out.Events = append(d.out.Events, Event{Warning: true, Reason: ReasonInsecureSkipVerify,
				Message: "TLS verification of the vSphere endpoint is off (spec.source.insecureSkipVerify)"})
		}
		d.setCondition(ConditionInsecureConnection, metav1.ConditionTrue, ReasonInsecureSkipVerify,
			"TLS verification of the vSphere endpoint is off: set ca.crt or thumbprint in the credentials Secret instead")
		return
	}
	d.clearCondition(ConditionInsecureConnection, ReasonVerifiedTLS, "the endpoint's certificate is verified")
}

// restoreCondition says when restoring the source failed, and what to do.
func (d *decider) restoreCondition() {
	if d.restoreProblem != "" {
		d.setCondition(ConditionSourceRestoreFailed, metav1.ConditionTrue, ReasonSourceRestoreFailed,
			d.restoreProblem+": the controller keeps trying and keeps its finalizer until the source VM is back as it was found; "+
				"if it does not recover, power the VM on in vSphere yourself")
		return
	}
	if sc := d.st.SourceControl; sc != nil && (sc.RestoredAt != nil || sc.SourceGoneAt != nil) {
		d.clearCondition(ConditionSourceRestoreFailed, ReasonSourceRestored, d.restoredMessage())
	}
}

// targetKeptCondition names the target VM and disks a failed or cancelled
// migration keeps because the target was started.
func (d *decider) targetKeptCondition() {
	failing := d.st.Phase == v1alpha1.PhaseRollingBack || d.st.Phase == v1alpha1.PhaseFailed ||
		d.st.Phase == v1alpha1.PhaseCancelling
	if failing && d.targetStarted() {
		if c := meta.FindStatusCondition(d.st.Conditions, ConditionTargetKept); c == nil || c.Status != metav1.ConditionTrue {
			d.out.Events = append(d.out.Events, Event{Warning: true, Reason: ReasonTargetKept, Message: d.keptTargetMessage()})
		}
		d.setCondition(ConditionTargetKept, metav1.ConditionTrue, ReasonTargetKept, d.keptTargetMessage())
	}
}

// ignoredSpecChanges lists the spec fields changed after the cutover began.
func ignoredSpecChanges(m *v1alpha1.VirtualMachineMigration) []string {
	applied := m.Status.AppliedSpec
	if applied == nil {
		return nil
	}
	cur := &m.Spec
	var fields []string
	for _, f := range []struct {
		name     string
		now, was any
	}{
		{"spec.source", cur.Source, applied.Source},
		{"spec.target", cur.Target, applied.Target},
		{"spec.staging", cur.Staging, applied.Staging},
		{"spec.conversion", cur.Conversion, applied.Conversion},
		{"spec.policy.shutdown", cur.Policy.Shutdown, applied.Policy.Shutdown},
	} {
		if !equality.Semantic.DeepEqual(f.now, f.was) {
			fields = append(fields, f.name)
		}
	}
	return fields
}

func (d *decider) statusMessage() string {
	if d.waitMessage != "" {
		return d.waitMessage
	}
	if d.workMessage != "" {
		return d.workMessage
	}
	if d.paused {
		return fmt.Sprintf("held at %s by spec.policy.paused", d.st.Phase)
	}
	return string(d.st.Phase)
}

func (d *decider) failureReason() string {
	if d.st.LastError != nil {
		return d.st.LastError.Reason
	}
	return ReasonFailed
}

// failureMessage says why the migration failed. It is said once: in the
// Failed condition once the migration ended, in Ready while it rolls
// back; the other conditions refer to it (failureReference).
func (d *decider) failureMessage() string {
	if e := d.st.LastError; e != nil {
		return fmt.Sprintf("failed in %s: %s", e.Phase, e.Message)
	}
	return "the migration failed"
}

// failureReference is what the other conditions of a failed migration
// say: where it failed, and where the message is.
func (d *decider) failureReference() string {
	if e := d.st.LastError; e != nil {
		return fmt.Sprintf("failed in %s: the Failed condition (and status.lastError) says why", e.Phase)
	}
	return "the migration failed: see the Failed condition"
}

// successReason says how the migration ended well: with the target VM
// started, or left halted as spec.target.start asked, or found already
// migrated.
func (d *decider) successReason() string {
	if d.st.AlreadyMigrated != nil {
		return ReasonAlreadyMigrated
	}
	if t := d.st.Target; t != nil && t.StartRequestedAt != nil {
		return ReasonTargetStarted
	}
	return ReasonTargetLeftHalted
}

func (d *decider) successMessage() string {
	if c := d.st.AlreadyMigrated; c != nil {
		return "the migration succeeded, having done nothing: the VM was " + alreadyMigratedMessage(c) +
			" (status.alreadyMigrated); the source VM and the cluster were left as they were"
	}
	what := "was started"
	if d.successReason() == ReasonTargetLeftHalted {
		what = "was left halted (spec.target.start is false)"
	}
	return fmt.Sprintf("the migration succeeded: %s %s", d.targetSummary(), what)
}

func (d *decider) targetSummary() string {
	if d.st.Target == nil {
		return "no target recorded"
	}
	return fmt.Sprintf("VirtualMachine %s/%s", d.m.Namespace, d.st.Target.Name)
}
