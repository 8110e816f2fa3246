package statemachine

import (
	"fmt"
	"slices"
	"strings"
	"time"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// What the cluster can refuse is asked before the source is touched: the
// dry run of every object the migration creates (Validating, and again in
// Queued right before the stop) and a short proof pod per image
// (Validating). Both are observed by the pipeline step; their refusals
// reach the decisions as blocking preflight findings (package preflight
// turns them into findings), so they fail the migration in Validating, or
// in Queued before the stop, with the cluster's own words.

// recordClusterChecks copies the dry run's answer and the proofs' results
// into status.
func (d *decider) recordClusterChecks() {
	if dr := d.obs.DryRun; dr != nil && dr.Status != nil {
		d.st.DryRun = dr.Status.DeepCopy()
	}
	for _, p := range d.obs.Proofs {
		if p.Result != nil {
			d.setProof(*p.Result)
		}
	}
}

// setProof records one image's proof, replacing the component's earlier one.
func (d *decider) setProof(p v1alpha1.ImageProof) {
	for i := range d.st.ImageProofs {
		if d.st.ImageProofs[i].Component == p.Component {
			d.st.ImageProofs[i] = p
			return
		}
	}
	d.st.ImageProofs = append(d.st.ImageProofs, p)
	slices.SortFunc(d.st.ImageProofs, func(a, b v1alpha1.ImageProof) int { return strings.Compare(a.Component, b.Component) })
}

// replaceStaleProofs deletes a stale proof Job (ProofObservation.Stale),
// one per decision, so that its image is proven again. The proof objects
// are shared by the migrations of a namespace and key and owned by none:
// a migration deletes none of them otherwise (not once its result is in,
// not when it fails, is rolled back, cancelled or deleted); the Job's TTL
// removes it, and its ServiceAccount with it.
func (d *decider) replaceStaleProofs() bool {
	for _, p := range d.obs.Proofs {
		if p.Stale == nil {
			continue
		}
		d.out.Action = Action{Type: ActionDeleteStaleProof, Name: p.Component, Objects: []ObjectRef{*p.Stale}}
		d.working(fmt.Sprintf("deleting the stale proof job %s of the %s image, to prove it again", p.Stale.Name, p.Component), d.cfg.PollInterval)
		return true
	}
	return false
}

// preflightLines are the findings as "Reason: message", warnings and
// blocking ones apart.
func (d *decider) preflightLines() (warnings, blocking []string) {
	for _, f := range d.obs.Preflight {
		line := fmt.Sprintf("%s: %s", f.Reason, f.Message)
		if f.Severity == v1alpha1.SeverityBlocking {
			blocking = append(blocking, line)
		} else {
			warnings = append(warnings, line)
		}
	}
	return warnings, blocking
}

// blockedByPreflight fails the migration when a finding blocks it, and
// otherwise returns the warnings. As a compiler reports every error, one
// validation pass reports every blocking finding it can determine: a
// refusal found early waits for the image proofs still to run or running
// (their findings join it: a conversion image without virtio-win for a
// Windows guest), then fails with all of them (the proofs' objects stay,
// for the other migrations of their key). A proof a finding forbids (ProofObservation.NotRun) is not waited
// for, and a dry run that could not be made is named, not waited for.
func (d *decider) blockedByPreflight() ([]string, bool) {
	warnings, blocking := d.preflightLines()
	if len(blocking) == 0 {
		return warnings, false
	}
	if d.awaitProofs(true, fmt.Sprintf("; then failing with the %s so far (%s) and those it finds",
		plural(len(blocking), "blocking finding"), strings.Join(d.blockingReasons(), ", "))) {
		return nil, true
	}
	if dr := d.obs.DryRun; dr != nil && dr.Error != nil {
		blocking = append(blocking, fmt.Sprintf("%s: the dry run could not be made: %s", dr.Error.Reason, dr.Error.Message))
	}
	d.fail(ReasonPreflightFailed, strings.Join(blocking, "; "))
	return nil, true
}

// blockingReasons are the reasons of the blocking findings, each once.
func (d *decider) blockingReasons() []string {
	var reasons []string
	for _, f := range d.obs.Preflight {
		if f.Severity == v1alpha1.SeverityBlocking && !slices.Contains(reasons, f.Reason) {
			reasons = append(reasons, f.Reason)
		}
	}
	return reasons
}

// plural is "1 thing" or "n things".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// awaitClusterChecks waits for the dry run and starts and waits for the
// image proofs; it returns false once every check has its answer.
func (d *decider) awaitClusterChecks() bool {
	if dr := d.obs.DryRun; dr != nil && dr.Error != nil {
		d.observedError(dr.Error)
		return true
	}
	return d.awaitProofs(false, "")
}

// awaitProofs starts the image proofs not started yet, one per decision,
// then waits for those running; it returns false once every proof has its
// result. Failing (a finding blocks already), it skips the proofs that
// must not run (NotRun). then ends the message of the wait.
func (d *decider) awaitProofs(failing bool, then string) bool {
	waitFor := func(p ProofObservation) bool { return p.Result == nil && (!failing || p.NotRun == "") }
	for _, p := range d.obs.Proofs {
		if waitFor(p) && !p.Running {
			d.act(ActionCreateProofJob, p.Component, 0)
			d.working(fmt.Sprintf("proving that the %s image runs in namespace %s (job %s)%s", p.Component, d.m.Namespace, p.JobName, then), d.cfg.PollInterval)
			return true
		}
	}
	for _, p := range d.obs.Proofs {
		if waitFor(p) {
			what := fmt.Sprintf("proving that the %s image runs in namespace %s (job %s)", p.Component, d.m.Namespace, p.JobName)
			if p.Waiting != "" {
				what += ": " + p.Waiting
			}
			d.working(what+then, d.cfg.PollInterval)
			return true
		}
	}
	return false
}

// clusterEvidence says, for the Validating checkpoint's evidence, what
// the dry run and the proofs showed.
func (d *decider) clusterEvidence() string {
	var parts []string
	if dr := d.st.DryRun; dr != nil && d.obs.DryRun != nil {
		warned := 0
		for _, o := range dr.Objects {
			if o.Outcome == v1alpha1.DryRunWarned {
				warned++
			}
		}
		parts = append(parts, fmt.Sprintf("the API server accepted the dry run of %d objects (%d with warnings)", len(dr.Objects), warned))
	}
	var proven []string
	for _, p := range d.obs.Proofs {
		if r := p.Result; r != nil && r.Result == v1alpha1.ProofPassed {
			proven = append(proven, fmt.Sprintf("%s (%s)", p.Component, r.Image))
		}
	}
	if len(proven) > 0 {
		parts = append(parts, "images run here: "+strings.Join(proven, ", "))
	}
	if len(parts) == 0 {
		return ""
	}
	return "; " + strings.Join(parts, "; ")
}

// refusedBeforeStop runs the dry run again right before the stop (Queued):
// a refusal fails the migration with the source untouched.
func (d *decider) refusedBeforeStop() bool {
	dr := d.obs.DryRun
	if dr == nil {
		return false
	}
	if dr.Error != nil {
		d.observedError(dr.Error)
		return true
	}
	d.recordClusterChecks()
	for _, f := range d.obs.Preflight {
		if f.Severity == v1alpha1.SeverityBlocking && !slices.Contains(d.st.Preflight, f) {
			d.st.Preflight = append(d.st.Preflight, f)
		}
	}
	_, blocked := d.blockedByPreflight()
	return blocked
}

// notStarted reports whether a Job's pod has not started within the pod
// start timeout for a reason a person must fix, and says so; until the
// timeout it asks to look again when it passes.
func (d *decider) notStarted(job *JobObservation) (string, bool) {
	p := job.StartProblem
	if p == nil || job.CreatedAt.IsZero() {
		return "", false
	}
	timeout := d.cfg.PodStartTimeout
	if deadline := job.CreatedAt.Add(timeout); d.now.Time.Before(deadline) {
		d.requeue(deadline.Sub(d.now.Time))
		return "", false
	}
	return fmt.Sprintf("the pod of job %s did not start within %s: %s: %s",
		job.Name, timeout.Round(time.Second), p.Reason, p.Message), true
}

// neverStarted reports whether job's pod did not start within the pod
// start timeout (notStarted); then the attempt counts as failed: a retry
// is spent and, while the budget allows, the Job is deleted and next
// records the next attempt, whose Job is created only once the stuck
// Job and its pod are gone (earlierAttemptRuns): its image pull may still
// succeed.
func (d *decider) neverStarted(job *JobObservation, next func()) bool {
	msg, stuck := d.notStarted(job)
	if !stuck {
		return false
	}
	if d.retry(ReasonPodNotStarted, msg) {
		d.remove(ActionDeleteJob, job.Name, job.Ref)
		next()
	}
	return true
}

// startWait says, while a Job's pod has not started for a reason a person
// must fix, why and when the attempt counts as failed.
func (d *decider) startWait(job *JobObservation) string {
	p := job.StartProblem
	if p == nil || job.CreatedAt.IsZero() {
		return ""
	}
	return fmt.Sprintf("; its pod has not started: %s: %s (the attempt counts as failed at %s)",
		p.Reason, p.Message, job.CreatedAt.Add(d.cfg.PodStartTimeout).UTC().Format(time.RFC3339))
}
