package pipeline

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"platform.example/vm-migration/pkg/statemachine"
)

// ReasonClaimPending: a claim a Job's pod mounts has stayed Pending
// longer than claimPendingGrace, with no provisioning failure said.
const ReasonClaimPending = "ClaimPending"

// claimPendingGrace is how long a claim a pod waits on may stay Pending
// before that is a start problem: a claim bound at first use
// (WaitForFirstConsumer) is Pending until its pod is scheduled, and a
// provisioner takes seconds. A provisioning failure is one at once.
const claimPendingGrace = time.Minute

// claimProblem says why a Job's pod, which has not started, waits on a
// claim it mounts: the latest warning of a Pending claim's events (the
// provisioner's ProvisioningFailed, the binder's), else, once the Job is
// older than claimPendingGrace, that the claim is still Pending, with the
// latest word on it. nil when the pod started, or every claim is bound.
// The claim's events are read from the API server (at most once per
// failedCreateCache per claim).
func (s *Step) claimProblem(ctx context.Context, job *batchv1.Job, now time.Time) (*statemachine.PodStartProblem, error) {
	for _, p := range s.jobPods(job) {
		if podStarted(&p) {
			return nil, nil
		}
	}
	for _, v := range job.Spec.Template.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		claim, err := s.Listers.Claims.PersistentVolumeClaims(job.Namespace).Get(v.PersistentVolumeClaim.ClaimName)
		if err != nil || claim.Status.Phase != corev1.ClaimPending {
			continue
		}
		warning, latest, err := s.latestEvents(ctx, claim, now)
		if err != nil {
			return nil, err
		}
		what := fmt.Sprintf("claim %s is Pending", claim.Name)
		switch {
		case warning != nil:
			return &statemachine.PodStartProblem{Reason: warning.Reason, Message: truncate(oneLine(what+": "+warning.Message), maxMessage)}, nil
		case now.Sub(job.CreationTimestamp.Time) < claimPendingGrace:
			continue
		case latest != nil:
			what += ": " + latest.Reason + ": " + latest.Message
		}
		return &statemachine.PodStartProblem{Reason: ReasonClaimPending, Message: truncate(oneLine(what), maxMessage)}, nil
	}
	return nil, nil
}

// latestEvents are the latest Warning event and the latest event of any
// type about a claim, from the API server, kept for failedCreateCache.
func (s *Step) latestEvents(ctx context.Context, claim *corev1.PersistentVolumeClaim, now time.Time) (warning, latest *corev1.Event, err error) {
	uid := string(claim.UID)
	s.refusals.mu.Lock()
	defer s.refusals.mu.Unlock()
	if s.refusals.claimEvents == nil {
		s.refusals.claimEvents = map[string]claimEvents{}
	}
	if e, ok := s.refusals.claimEvents[uid]; ok && now.Sub(e.at) < failedCreateCache {
		return e.warning, e.latest, nil
	}
	sel := fields.Set{"involvedObject.uid": uid}.AsSelector().String()
	list, err := s.Kube.CoreV1().Events(claim.Namespace).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return nil, nil, fmt.Errorf("reading the events of claim %s/%s: %w", claim.Namespace, claim.Name, err)
	}
	for i := range list.Items {
		e := &list.Items[i]
		if latest == nil || eventTime(*e).After(eventTime(*latest)) {
			latest = e
		}
		if e.Type == corev1.EventTypeWarning && (warning == nil || eventTime(*e).After(eventTime(*warning))) {
			warning = e
		}
	}
	for id, e := range s.refusals.claimEvents {
		if now.Sub(e.at) >= failedCreateCache {
			delete(s.refusals.claimEvents, id)
		}
	}
	s.refusals.claimEvents[uid] = claimEvents{at: now, warning: warning, latest: latest}
	return warning, latest, nil
}

// claimEvents is what a claim's events said when they were last read.
type claimEvents struct {
	at              time.Time
	warning, latest *corev1.Event
}
