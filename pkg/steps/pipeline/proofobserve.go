package pipeline

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/transfer/wire"
	"platform.example/vm-migration/pkg/untrusted"
)

// proofCache keeps the proofs' results by key, as this controller first
// read them: a passed proof serves every migration of its key until it is
// older than the TTL; a failed one serves (refuses) every migration whose
// validation began before the failure was known, and no later one (a
// person fixed the cause and changed the spec, or a new migration): that
// one proves again. It also remembers the proof Jobs it just created, so
// that migrations of a wave reconciled before the informer shows the Job
// wait for it instead of each creating it again.
type proofCache struct {
	mu      sync.Mutex
	byKey   map[string]cachedProof
	started map[string]time.Time
}

type cachedProof struct {
	proof  v1alpha1.ImageProof
	jobUID types.UID // the proof Job the result was read from
}

// proofJustCreated is how long a proof Job this controller created is
// taken to exist without the informer showing it.
const proofJustCreated = 30 * time.Second

// get returns a result for key that m may use, fresh at now.
func (c *proofCache) get(key string, m *v1alpha1.VirtualMachineMigration, now time.Time, ttl time.Duration) *v1alpha1.ImageProof {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[key]
	if !ok || now.Sub(e.proof.CheckedAt.Time) >= ttl {
		return nil
	}
	if e.proof.Result != v1alpha1.ProofPassed && madeBefore(e.proof.CheckedAt.Time, m) {
		return nil
	}
	p := e.proof
	return &p
}

// failedAt is when this controller first knew the failure of the proof
// Job jobUID of key, if it did.
func (c *proofCache) failedAt(key string, jobUID types.UID) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[key]
	if !ok || e.jobUID != jobUID || e.proof.Result == v1alpha1.ProofPassed {
		return time.Time{}, false
	}
	return e.proof.CheckedAt.Time, true
}

// put keeps a result read from the Job jobUID, and forgets those older
// than ttl. A failure already known of the same Job keeps its time.
func (c *proofCache) put(p v1alpha1.ImageProof, jobUID types.UID, now time.Time, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byKey == nil {
		c.byKey = map[string]cachedProof{}
	}
	for k, e := range c.byKey {
		if now.Sub(e.proof.CheckedAt.Time) >= ttl {
			delete(c.byKey, k)
		}
	}
	if e, ok := c.byKey[p.Key]; ok && e.jobUID == jobUID && e.proof.Result == p.Result {
		return
	}
	c.byKey[p.Key] = cachedProof{proof: p, jobUID: jobUID}
	delete(c.started, p.Key)
}

// forget drops the result read from the Job jobUID of key (deleted as
// stale).
func (c *proofCache) forget(key string, jobUID types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[key]; ok && e.jobUID == jobUID {
		delete(c.byKey, key)
	}
}

// created notes that this controller created (or found) the proof Job of
// key at now.
func (c *proofCache) created(key string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started == nil {
		c.started = map[string]time.Time{}
	}
	for k, t := range c.started {
		if now.Sub(t) >= proofJustCreated {
			delete(c.started, k)
		}
	}
	c.started[key] = now
}

// justCreated reports whether this controller created the proof Job of
// key within proofJustCreated.
func (c *proofCache) justCreated(key string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.started[key]
	return ok && now.Sub(t) < proofJustCreated
}

// observeProofs fills obs.Proofs in Validating when proofs are on: per
// component, its shared proof Job and its result when known (a recent
// result of the same key, from the step's memory or m's status, else the
// outcome of the Job).
func (s *Step) observeProofs(m *v1alpha1.VirtualMachineMigration, obs *statemachine.Observation) {
	if !s.Config.ImageProofs || m.DeletionTimestamp != nil || m.Status.Phase != v1alpha1.PhaseValidating {
		return
	}
	obs.Proofs = nil
	for _, component := range ProofComponents(m) {
		obs.Proofs = append(obs.Proofs, s.observeProof(m, component))
	}
}

// observeProof observes one component's proof: the Job of its key, read
// by every migration of that key.
func (s *Step) observeProof(m *v1alpha1.VirtualMachineMigration, component string) statemachine.ProofObservation {
	p := statemachine.ProofObservation{Component: component}
	if m.Status.Source == nil {
		// No key yet: the decision reads the inventory first.
		return p
	}
	rendered, _, err := RenderProof(m, component, s.Config)
	if err != nil {
		// Nothing to prove: the render's own failure shows in the
		// dry run and the preflight rules.
		p.NotRun = fmt.Sprintf("its pod cannot be rendered: %v", err)
		return p
	}
	key := rendered.Labels[v1alpha1.LabelProofKey]
	p.JobName = rendered.Name
	now, ttl := s.now(), s.Config.proofTTL()
	if r := s.knownProof(m, component, key, now, ttl); r != nil {
		r.JobName = rendered.Name
		p.Result = r
		return p
	}
	job, err := s.Listers.Jobs.Jobs(m.Namespace).Get(rendered.Name)
	if err != nil || !isProofObject(job, key) {
		// None yet: the first migration of the key that needs it
		// creates it; one this controller just created is waited for.
		// (A foreign object of the name: creating it says so.)
		if s.proofs.justCreated(key, now) {
			p.Running, p.Waiting = true, "its Job was just created"
		}
		return p
	}
	if job.DeletionTimestamp != nil {
		// A stale one on its way out, proven again once it is gone.
		p.Running, p.Waiting = true, "its stale Job is being deleted; proving again once it is gone"
		return p
	}
	pods := s.jobPods(job)
	if resultLost(job, pods, now) {
		// Its pod, which held the result, is gone and no result was
		// kept: proven again, not taken for a failure.
		p.Stale = ptr.To(refTo(statemachine.KindJob, job))
		return p
	}
	p.Running = true
	res, waiting := ProofOutcome(component, job, pods, now, s.Config.proofTimeout())
	if res == nil {
		p.Waiting = waiting
		if o := ObserveJob(job, pods, nil); o.StartProblem != nil {
			p.StartProblem, p.FailsAt = o.StartProblem, o.CreatedAt.Add(s.Config.proofTimeout())
		}
		return p
	}
	res.Key, res.CheckedAt = key, metav1.NewTime(proofTime(s, key, job, res, now))
	if s.staleProof(m, res, now, ttl) {
		ref := refTo(statemachine.KindJob, job)
		p.Running, p.Stale = false, &ref
		return p
	}
	s.proofs.put(*res, job.UID, now, ttl)
	p.Running, p.Result = false, res
	return p
}

// resultLost reports whether a proof Job ended after a pod of it ran
// (succeeded or failed), JobResultGrace ago or more, and no pod of it is
// left: the result, its pod's termination message, is lost. A Job that
// failed without any pod having run (its deadline passed with the pod
// never created) lost nothing: ProofOutcome says so.
func resultLost(job *batchv1.Job, pods []corev1.Pod, now time.Time) bool {
	if len(pods) > 0 || job.Status.Succeeded+job.Status.Failed == 0 {
		return false
	}
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			ended := c.LastTransitionTime.Time
			if t := job.Status.CompletionTime; c.Type == batchv1.JobComplete && t != nil {
				ended = t.Time
			}
			return now.Sub(ended) >= statemachine.JobResultGrace
		}
	}
	return false
}

// proofTime is when a proof's result came: a pass at its Job's
// completion; a failure when this controller first knew it, else at the
// Job's failure (its condition), else now.
func proofTime(s *Step, key string, job *batchv1.Job, res *v1alpha1.ImageProof, now time.Time) time.Time {
	if res.Result == v1alpha1.ProofPassed {
		if t := job.Status.CompletionTime; t != nil {
			return t.Time
		}
		return now
	}
	if t, ok := s.proofs.failedAt(key, job.UID); ok {
		return t
	}
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time
		}
	}
	return now
}

// staleProof reports whether a proof Job's result serves m no longer: a
// pass older than the TTL, or a failure from before m's validation began
// (then m proves its image again).
func (s *Step) staleProof(m *v1alpha1.VirtualMachineMigration, res *v1alpha1.ImageProof, now time.Time, ttl time.Duration) bool {
	if res.Result == v1alpha1.ProofPassed {
		return now.Sub(res.CheckedAt.Time) >= ttl
	}
	return madeBefore(res.CheckedAt.Time, m)
}

// knownProof is a recent result for key: the step's, or m's own in status.
// A failure serves the migrations whose validation began before it (a
// migration refused before the stop whose spec changed proves its images
// again); a pass serves for the TTL.
func (s *Step) knownProof(m *v1alpha1.VirtualMachineMigration, component, key string, now time.Time, ttl time.Duration) *v1alpha1.ImageProof {
	if key == "" {
		return nil
	}
	if r := s.proofs.get(key, m, now, ttl); r != nil {
		r.Component = component
		return r
	}
	for _, r := range m.Status.ImageProofs {
		if r.Component == component && r.Key == key && now.Sub(r.CheckedAt.Time) < ttl &&
			(r.Result == v1alpha1.ProofPassed || !madeBefore(r.CheckedAt.Time, m)) {
			r := r
			return &r
		}
	}
	return nil
}

// ProofOutcome reads a proof Job and its pods: the result once there is
// one (without its key and time), else what the pod waits on. A pod that
// cannot start for a reason a person must fix fails the proof at once,
// one that waits for a node fails it once the Job is older than timeout.
func ProofOutcome(component string, job *batchv1.Job, pods []corev1.Pod, now time.Time, timeout time.Duration) (*v1alpha1.ImageProof, string) {
	res := &v1alpha1.ImageProof{Component: component, Image: jobImage(job), JobName: job.Name}
	o := ObserveJob(job, pods, nil)
	pod := latestPod(pods)
	term, _ := containerState(pod, job.Spec.Template.Spec.Containers[0].Name)
	switch {
	case o.Succeeded && term == nil && now.Sub(o.CompletedAt) < statemachine.JobResultGrace:
		return nil, "its Job completed; waiting for its pod's termination message"
	case o.Succeeded || (term != nil && term.ExitCode == 0):
		readSelfCheck(res, component, termMessage(term))
	case term != nil:
		res.Result, res.Reason = v1alpha1.ProofFailed, ReasonSelfCheckFailed
		res.Message = untrusted.CleanCut(fmt.Sprintf("the self-check exited with code %d: %s", term.ExitCode, selfCheckProblems(component, term.Message)), maxMessage)
	case o.StartProblem != nil && (o.StartProblem.Reason != ReasonUnschedulable || now.Sub(o.CreatedAt) >= timeout):
		res.Result, res.Reason, res.Message = v1alpha1.ProofFailed, o.StartProblem.Reason, o.StartProblem.Message
	case o.Failed:
		res.Result, res.Reason = v1alpha1.ProofFailed, ReasonNotStarted
		res.Message = joinNonEmpty(": ", "the proof pod did not run", o.Message)
	default:
		return nil, podWaiting(pod, job.Spec.Template.Spec.Containers[0].Name)
	}
	res.Output = truncate(strings.TrimSpace(termMessage(term)), v1alpha1.MaxProofOutput)
	return res, ""
}

// jobImage is a Job's (first) container image.
func jobImage(job *batchv1.Job) string {
	if cs := job.Spec.Template.Spec.Containers; len(cs) > 0 {
		return cs[0].Image
	}
	return ""
}

func termMessage(term *corev1.ContainerStateTerminated) string {
	if term == nil {
		return ""
	}
	return term.Message
}

// podWaiting says what a proof pod (its container named container) waits on.
func podWaiting(pod *corev1.Pod, container string) string {
	if pod == nil {
		return "no pod yet"
	}
	if p := StartProblem(pod); p != nil {
		return fmt.Sprintf("pod %s: %s: %s", pod.Name, p.Reason, p.Message)
	}
	_, w := containerState(pod, container)
	if w != nil && w.Reason != "" {
		return fmt.Sprintf("pod %s: %s", pod.Name, joinNonEmpty(": ", w.Reason, w.Message))
	}
	return fmt.Sprintf("pod %s %s", pod.Name, orDefault(string(pod.Status.Phase), "Pending"))
}

// readSelfCheck judges a self-check that exited 0 by what it printed:
// vm-transfer must read the job spec format this controller writes; the
// conversion image's self-check must say it can convert.
func readSelfCheck(res *v1alpha1.ImageProof, component, out string) {
	res.Result = v1alpha1.ProofPassed
	// The image printed it: kept without control characters.
	defer func() { res.Message = untrusted.CleanCut(res.Message, maxMessage) }()
	switch component {
	case v1alpha1.ComponentTransfer:
		v, err := wire.ParseVersion(out)
		switch {
		case err != nil:
			res.Result, res.Reason = v1alpha1.ProofFailed, ReasonIncompatibleImage
			res.Message = fmt.Sprintf("the image's %s --version printed no version this controller reads (%v): it is not a transfer image of this project", wire.CommandName, err)
		case v.SpecVersion != wire.SpecVersion:
			res.Result, res.Reason = v1alpha1.ProofFailed, ReasonIncompatibleImage
			res.Message = fmt.Sprintf("the image's %s %s reads job spec %s; this controller writes %s", wire.CommandName, v.Version, v.SpecVersion, wire.SpecVersion)
		}
	case v1alpha1.ComponentConversion:
		sc, err := ParseConversionSelfCheck(out)
		if err != nil || !sc.OK {
			res.Result, res.Reason = v1alpha1.ProofFailed, ReasonSelfCheckFailed
			res.Message = selfCheckProblems(component, out)
		}
	}
}

// selfCheckProblems says why a self-check failed: the conversion image's
// problems, else its output.
func selfCheckProblems(component, out string) string {
	if component == v1alpha1.ComponentConversion {
		if sc, err := ParseConversionSelfCheck(out); err == nil && len(sc.Problems) > 0 {
			return strings.Join(sc.Problems, "; ")
		}
	}
	return truncate(oneLine(out), maxMessage)
}

// ConversionSelfCheckReport is what the conversion image's self-check
// prints, as one JSON line (docs/operators/conversion-image.md); fields this
// controller does not read are left out.
type ConversionSelfCheckReport struct {
	VirtV2V         string `json:"virtV2V"`
	OutputXMLOption bool   `json:"outputXMLOption"`
	// VirtioWin is nil when the image said nothing of it (an image
	// without the project's self-check).
	VirtioWin *struct {
		Path    string `json:"path"`
		Present bool   `json:"present"`
	} `json:"virtioWin"`
	OK       bool     `json:"ok"`
	Problems []string `json:"problems"`
}

// ParseConversionSelfCheck reads the self-check's last JSON line.
func ParseConversionSelfCheck(out string) (*ConversionSelfCheckReport, error) {
	line := wire.LastJSONLine(out)
	if line == "" {
		return nil, fmt.Errorf("the self-check printed no JSON line: %q", truncate(oneLine(out), 256))
	}
	var r ConversionSelfCheckReport
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		return nil, fmt.Errorf("reading the self-check's line %q: %w", line, err)
	}
	return &r, nil
}

// madeBefore says whether a proof's result, checked at t by this
// controller's clock, comes from before m's current validation began (its
// status.phaseStartTime in Validating); an unknown time does not.
func madeBefore(t time.Time, m *v1alpha1.VirtualMachineMigration) bool {
	start := m.Status.PhaseStartTime
	return m.Status.Phase == v1alpha1.PhaseValidating && start != nil && !t.IsZero() && t.Before(start.Time)
}
