package statemachine

import (
	"fmt"
	"strings"
	"time"
)

// One writer per claim: the transfer and conversion pods write the
// staging claims, the verification pods read the target claims, and an
// attempt counted as failed may leave a pod behind that still runs (its
// image pull succeeds after the pod start timeout, its node comes back,
// it terminates within its grace period). The pipeline step deletes Jobs
// with foreground propagation, so a Job is seen until its pods are gone,
// and observes what of the migration's Jobs and pods may still run
// (Observation.Workers): no attempt's Job is created while any of it
// exists.

// earlierAttemptRuns reports whether something of an attempt may still
// run beside the Job named job that is about to be created, and then
// deletes what is left of the earlier attempts' Jobs and waits for them
// and their pods to be gone. The wait is bounded by the retry deadline:
// past it the migration fails (its rollback restores the source) and no
// second writer was ever started.
func (d *decider) earlierAttemptRuns(job string) bool {
	if len(d.obs.Workers) == 0 {
		return false
	}
	if d.jobAlreadyThere(job) {
		return true
	}
	var left []string
	var undeleted []ObjectRef
	for _, w := range d.obs.Workers {
		what := fmt.Sprintf("%s %s", strings.ToLower(w.Ref.Kind), w.Ref.Name)
		if w.Ref.Kind == KindPod {
			what += " of job " + w.Job
		}
		if w.Deleting {
			what += " (being deleted)"
		}
		left = append(left, what)
		if w.Ref.Kind == KindJob && !w.Deleting {
			undeleted = append(undeleted, w.Ref)
		}
	}
	waiting := strings.Join(left, ", ")
	if d.pastDeadline() {
		d.fail(ReasonEarlierAttemptRunning, fmt.Sprintf("job %s was never started: %s may still run and the retry deadline of %s passed; two pods never write the same claims",
			job, waiting, d.spec.Policy.RetryDeadline()))
		return true
	}
	if len(undeleted) > 0 {
		d.remove(ActionDeleteJob, undeleted[0].Name, undeleted...)
	}
	msg := fmt.Sprintf("job %s starts once what is left of the earlier attempts is gone: %s; two pods never write the same claims", job, waiting)
	if d.st.StartTime != nil {
		msg += fmt.Sprintf(" (the migration fails if it is still there at %s)", d.st.StartTime.Add(d.spec.Policy.RetryDeadline()).UTC().Format(time.RFC3339))
	}
	d.wait(ReasonEarlierAttemptRunning, msg, d.cfg.PollInterval)
	d.requeueAtDeadline()
	return true
}

// jobAlreadyThere handles the Job about to be created showing among the
// workers, not being deleted: the caches are read one after the other,
// and the Job's add event can land between the read of the Job (absent)
// and the read of the workers (present). It is the attempt's own Job,
// never an earlier one: neither deleted nor created again, it is looked
// at on the next reconcile, which its event brings.
func (d *decider) jobAlreadyThere(job string) bool {
	for _, w := range d.obs.Workers {
		if w.Ref.Kind == KindJob && w.Ref.Name == job && !w.Deleting {
			d.working(fmt.Sprintf("job %s exists; reading it on the next look", job), d.cfg.PollInterval)
			return true
		}
	}
	return false
}
