package pipeline

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"platform.example/vm-migration/pkg/statemachine"
)

// Why a pod of ours has not started, in the cluster's words.
const (
	// ReasonUnschedulable is the scheduler's: no node can run the pod.
	ReasonUnschedulable = "Unschedulable"
	// ReasonFailedCreate is the Job controller's event when the API
	// server refused the pod (admission: PodSecurity, an SCC, quota,
	// LimitRange, a webhook).
	ReasonFailedCreate = "FailedCreate"
)

// startProblemReasons are the container waiting reasons the kubelet gives
// for what a person must fix: an image it cannot pull, a container it
// cannot create from the pod's spec.
var startProblemReasons = []string{
	"ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName",
	"CreateContainerConfigError", "CreateContainerError",
}

// StartProblem says why a pod has not started when it is for a reason a
// person must fix: a container waiting with a pull or configuration error
// (the kubelet's reason and message), or no node to run it (the
// scheduler's). nil for no pod, a pod that started (a container ran), or
// one that waits for what comes by itself (its volumes, an image being
// pulled).
func StartProblem(pod *corev1.Pod) *statemachine.PodStartProblem {
	if pod == nil || podStarted(pod) {
		return nil
	}
	for _, cs := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses) {
		if w := cs.State.Waiting; w != nil && slices.Contains(startProblemReasons, w.Reason) {
			return &statemachine.PodStartProblem{Reason: w.Reason, Message: truncate(oneLine(w.Message), maxMessage)}
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return &statemachine.PodStartProblem{Reason: ReasonUnschedulable, Message: truncate(oneLine(c.Message), maxMessage)}
		}
	}
	return nil
}

// podStarted says whether a container of the pod ran, or the pod ended.
// Init containers do not count: the conversion pod's copies vm-transfer
// in and ends, and its main container may still wait on an image it
// cannot pull.
func podStarted(pod *corev1.Pod) bool {
	if podTerminated(pod) {
		return true
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Running != nil || cs.State.Terminated != nil || cs.LastTerminationState.Terminated != nil {
			return true
		}
	}
	return false
}

// failedCreateGrace is how long a Job may have no pod before the
// refusal of its pod is looked for in its events, and failedCreateCache
// how long an answer is reused.
const (
	failedCreateGrace = 2 * time.Second
	failedCreateCache = 5 * time.Second
)

// refusals remembers, per Job, the last answer of its events.
type refusals struct {
	mu      sync.Mutex
	byJobID map[string]refusal
	// claimEvents holds, per claim UID, what its events said last.
	claimEvents map[string]claimEvents
}

type refusal struct {
	at      time.Time
	problem *statemachine.PodStartProblem
}

// failedCreate is why the API server refused a Job's pod, from the Job
// controller's FailedCreate events on it (the latest); nil when it has a
// pod, is younger than failedCreateGrace, or has no such event.
func (s *Step) failedCreate(ctx context.Context, job *batchv1.Job, now time.Time) (*statemachine.PodStartProblem, error) {
	if len(s.jobPods(job)) > 0 || now.Sub(job.CreationTimestamp.Time) < failedCreateGrace {
		return nil, nil
	}
	s.refusals.mu.Lock()
	defer s.refusals.mu.Unlock()
	if s.refusals.byJobID == nil {
		s.refusals.byJobID = map[string]refusal{}
	}
	if r, ok := s.refusals.byJobID[string(job.UID)]; ok && now.Sub(r.at) < failedCreateCache {
		return r.problem, nil
	}
	sel := fields.Set{"involvedObject.uid": string(job.UID), "reason": ReasonFailedCreate}.AsSelector().String()
	list, err := s.Kube.CoreV1().Events(job.Namespace).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("reading the events of job %s/%s: %w", job.Namespace, job.Name, err)
	}
	var problem *statemachine.PodStartProblem
	var latest time.Time
	for _, e := range list.Items {
		if t := eventTime(e); problem == nil || t.After(latest) {
			problem, latest = &statemachine.PodStartProblem{Reason: ReasonFailedCreate, Message: truncate(oneLine(e.Message), maxMessage)}, t
		}
	}
	for id, r := range s.refusals.byJobID {
		if now.Sub(r.at) >= failedCreateCache {
			delete(s.refusals.byJobID, id)
		}
	}
	s.refusals.byJobID[string(job.UID)] = refusal{at: now, problem: problem}
	return problem, nil
}

// eventTime is when an event last happened.
func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}
