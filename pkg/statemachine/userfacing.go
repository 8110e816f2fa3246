package statemachine

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/pkg/untrusted"
)

// What a person reads in status and events that is not a condition: an
// error the migration recovered from is forgotten, a plan ConfigMap that
// was deleted is no longer named, a cancellation says what it will do to
// the source, and virt-v2v's warnings are kept with the conversion.

// sourceName keeps status.sourceName, the source VM's name as tables
// show it, in step with the inventory.
func (d *decider) sourceName() {
	if d.st.Source != nil {
		d.st.SourceName = naming.Shorten(d.st.Source.Name, naming.MaxDisplayName)
	}
}

// releaseTarget hands the target VM a deleted migration keeps over to its
// owner, last, right before the finalizer goes (once the source is
// restored: until then the target is still observed): the migration's
// labels would otherwise mark it (and its disks) as a child of a
// migration that no longer exists, and an annotation says where it came
// from instead. A target VM of ours still seen here is a kept one (an
// unfinished one was deleted before). Released, it leaves the
// controller's caches (they hold only labelled objects), so this is asked
// once.
func (d *decider) releaseTarget() bool {
	vm := d.obs.VM
	if vm == nil || !vm.Ours {
		return false
	}
	name := d.targetName()
	d.act(ActionReleaseTarget, name, 0)
	d.working(fmt.Sprintf("handing VirtualMachine %s and its disks over: the migration's labels leave them, annotation %s names the migration",
		name, v1alpha1.AnnotationMigratedBy), d.cfg.PollInterval)
	return true
}

// forgetRecoveredError clears status.lastError once the migration moves
// past the phase the error happened in, its evidence recorded: the error
// no longer holds (a transfer killed once and retried, a vCenter that was
// unreachable for a while), and LAST ERROR would otherwise show it through
// to Succeeded. The retry it cost stays counted in status.retries, and its
// event stays.
func (d *decider) forgetRecoveredError() {
	e := d.st.LastError
	if e == nil || e.Phase != d.startPhase || d.st.Phase == d.startPhase || failing(d.st.Phase) {
		return
	}
	for _, ev := range d.st.Evidence {
		if ev.Phase == d.startPhase && ev.ReachedAt.Equal(&d.now) {
			d.st.LastError = nil
			return
		}
	}
}

// failing reports whether a phase is on the way to Failed or to deletion.
func failing(p v1alpha1.Phase) bool {
	return p == v1alpha1.PhaseRollingBack || p == v1alpha1.PhaseFailed || p == v1alpha1.PhaseCancelling
}

// forgetDeletedPlan stops naming the plan ConfigMap once the cleanup of a
// successful run deleted it with the staging objects: status.plan keeps
// when the plan was rendered and the objects it listed.
func (d *decider) forgetDeletedPlan() {
	p := d.st.Plan
	if p == nil || p.ConfigMapName == "" || d.startPhase != v1alpha1.PhaseCleaningUp || d.st.Phase != v1alpha1.PhaseSucceeded {
		return
	}
	if d.spec.Policy.CleanupPolicy() == v1alpha1.CleanupPolicyDelete {
		p.ConfigMapName = ""
	}
}

// cancellingMessage says what a cancellation does, from where the
// migration stands: what it deletes and keeps, and what becomes of the
// source VM (powered back on only if the controller stopped it).
func (d *decider) cancellingMessage() string {
	what := "cancelling: deleting what the migration created"
	if d.targetStarted() {
		what = "cancelling: deleting the staging objects and keeping the target VM, which was started, halted"
	}
	sc := d.st.SourceControl
	switch {
	case d.needsRestore():
		return what + "; powering the source VM back on"
	case sc != nil && (sc.ShutdownRequestedAt != nil || sc.PowerOffRequestedAt != nil):
		return fmt.Sprintf("%s; the source VM was %s when found and is left so", what, orUnknown(sc.OriginalPowerState))
	}
	return what + "; the source VM was not stopped and is left as it is"
}

func orUnknown(s string) string {
	if s == "" {
		return "in an unknown state"
	}
	return s
}

// recordConversionWarnings keeps the warnings virt-v2v printed in a
// conversion that succeeded, in status and in one Warning event, and
// returns them as a note for the conversion's evidence ("" without any).
func (d *decider) recordConversionWarnings(job *JobObservation) string {
	d.st.Conversion.Warnings = nil
	if len(job.Warnings) == 0 {
		return ""
	}
	d.st.Conversion.Warnings = append([]string(nil), job.Warnings...)
	note := fmt.Sprintf("virt-v2v warned: %s", strings.Join(job.Warnings, "; "))
	d.out.Events = append(d.out.Events, Event{Warning: true, Reason: ReasonConversionWarnings,
		Message: fmt.Sprintf("conversion job %s succeeded, but %s", job.Name, note)})
	return "; " + note
}

// viewedStatus keeps what views read besides the conditions: why the
// pod of the phase's Job has not started, the last error's short form,
// and the overall progress (none once the migration fails).
func (d *decider) viewedStatus() {
	d.recordPodWaiting()
	d.summarizeLastError()
	d.recordProgress()
}

// recordPodWaiting keeps status.podWaiting in step with the pod of the
// Job the phase waits for: set while it has not started for a reason a
// person must fix, its since kept while it is the same Job's, unset once
// it started, the attempt moved on or the phase did. The same problem
// seen again writes nothing new. In Validating, the Job is an image
// proof's whose pod waits for a node (waitedProof): its attempt fails
// when the proof does.
func (d *decider) recordPodWaiting() {
	name, problem, failsAt := "", (*PodStartProblem)(nil), time.Time{}
	if job := d.waitedJob(); job != nil && job.StartProblem != nil {
		name, problem = job.Name, job.StartProblem
		if !job.CreatedAt.IsZero() {
			failsAt = job.CreatedAt.Add(d.cfg.PodStartTimeout)
		}
	} else if p := d.waitedProof(); p != nil {
		name, problem, failsAt = p.JobName, p.StartProblem, p.FailsAt
	}
	if problem == nil {
		d.st.PodWaiting = nil
		return
	}
	w := d.st.PodWaiting
	if w == nil || w.Job != name {
		w = &v1alpha1.PodWaiting{Job: name, Since: d.now}
	}
	w.Reason, w.Message = problem.Reason, untrusted.Cut(problem.Message, v1alpha1.MaxPodMessage)
	w.AttemptFailsAt = nil
	if !failsAt.IsZero() {
		at := metav1.NewTime(failsAt)
		w.AttemptFailsAt = &at
	}
	d.st.PodWaiting = w
}

// waitedProof is the image proof a migration in Validating waits for
// whose pod has not started for a reason a person must fix (the first,
// in the order they are proven), nil otherwise.
func (d *decider) waitedProof() *ProofObservation {
	if d.st.Phase != v1alpha1.PhaseValidating || d.m.DeletionTimestamp != nil {
		return nil
	}
	for i := range d.obs.Proofs {
		if p := &d.obs.Proofs[i]; p.Result == nil && p.Running && p.StartProblem != nil {
			return p
		}
	}
	return nil
}

// waitedJob is the observed Job the current phase waits for (the
// transfer, the conversion, the verification), when it is the attempt
// status names and it has not ended; nil otherwise.
func (d *decider) waitedJob() *JobObservation {
	var job *JobObservation
	name := ""
	switch d.st.Phase {
	case v1alpha1.PhaseTransferringDisks:
		if t := d.st.Transfer; t != nil {
			job, name = d.obs.TransferJob, t.JobName
		}
	case v1alpha1.PhaseConverting:
		if c := d.st.Conversion; c != nil && !c.Skipped {
			job, name = d.obs.ConversionJob, c.JobName
		}
	case v1alpha1.PhaseImporting:
		if v := d.st.Verification; v != nil {
			job, name = d.obs.VerificationJob, v.JobName
		}
	}
	if job == nil || d.m.DeletionTimestamp != nil || job.Name != name || job.Succeeded || job.Failed {
		return nil
	}
	return job
}

// summarizeLastError keeps status.lastError.summary, the message's short
// form that tables show (kubectl get -o wide's Last Error column).
func (d *decider) summarizeLastError() {
	if e := d.st.LastError; e != nil {
		e.Summary = naming.Summarize(e.Message)
	}
}
