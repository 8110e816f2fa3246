package pipeline

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/transfer/wire"
)

// proofCache keeps the proofs' results by key: a passed proof serves
// every migration of its key until it is older than the TTL; a failed one
// serves only the migration whose pod failed (another may come once a
// person fixed the cause).
type proofCache struct {
	mu    sync.Mutex
	byKey map[string]cachedProof
}

type cachedProof struct {
	proof v1alpha1.ImageProof
	owner string // the migration UID a failed proof belongs to
}

// get returns a result for key that uid may use, fresh at now.
func (c *proofCache) get(key, uid string, now time.Time, ttl time.Duration) *v1alpha1.ImageProof {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[key]
	if !ok || now.Sub(e.proof.CheckedAt.Time) >= ttl {
		return nil
	}
	if e.proof.Result != v1alpha1.ProofPassed && e.owner != uid {
		return nil
	}
	p := e.proof
	return &p
}

// put keeps a result, and forgets those older than ttl.
func (c *proofCache) put(p v1alpha1.ImageProof, uid string, now time.Time, ttl time.Duration) {
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
	c.byKey[p.Key] = cachedProof{proof: p, owner: uid}
}

// observeProofs fills obs.Proofs in Validating when proofs are on: per
// component, its proof's objects, and its result when known (a recent
// result of the same key, from the step's memory or m's status, else the
// outcome of its Job).
func (s *Step) observeProofs(m *v1alpha1.VirtualMachineMigration, obs *statemachine.Observation) error {
	if !s.Config.ImageProofs || m.DeletionTimestamp != nil || m.Status.Phase != v1alpha1.PhaseValidating {
		return nil
	}
	for _, component := range ProofComponents(m) {
		p, err := s.observeProof(m, component)
		if err != nil {
			return err
		}
		obs.Proofs = append(obs.Proofs, p)
	}
	return nil
}

// observeProof observes one component's proof.
func (s *Step) observeProof(m *v1alpha1.VirtualMachineMigration, component string) (statemachine.ProofObservation, error) {
	p := statemachine.ProofObservation{Component: component, JobName: naming.ProofJob(m.Name, component)}
	job, err := s.proofObjects(m, component, &p)
	if err != nil {
		return p, err
	}
	key := ""
	if m.Status.Source != nil {
		j, _, err := RenderProof(m, component, s.Config)
		if err != nil {
			// Nothing to prove: the render's own failure shows in the
			// dry run and the preflight rules.
			p.NotRun = fmt.Sprintf("its pod cannot be rendered: %v", err)
			return p, nil
		}
		key = j.Annotations[annotationProofKey]
	}
	now, ttl := s.now(), s.Config.proofTTL()
	if r := s.knownProof(m, component, key, now, ttl); r != nil {
		p.Result = r
		return p, nil
	}
	if job == nil {
		s.peerProof(m, component, key, &p)
		return p, nil
	}
	if key != "" && job.Annotations[annotationProofKey] != key || ofAnotherValidation(job, m) {
		// A proof of another shape (the spec changed since), or of an
		// earlier validation (the migration was refused, then its spec
		// changed): it goes, and the image is proven again.
		p.Stale = true
		return p, nil
	}
	res, waiting := ProofOutcome(component, job, s.jobPods(job), now, s.Config.proofTimeout())
	if res == nil {
		p.Waiting = waiting
		return p, nil
	}
	res.Key, res.CheckedAt.Time = key, now
	s.proofs.put(*res, string(m.UID), now, ttl)
	p.Result = res
	return p, nil
}

// peerProof looks, for a migration without a proof Job of its own, for
// the proof Job of another migration of the namespace with the same key
// (migrations created together prove the same pods once): while it runs,
// p waits for it (Running, with none of its objects); once it passed, its
// result serves p. A peer's failure does not: p then runs its own.
func (s *Step) peerProof(m *v1alpha1.VirtualMachineMigration, component, key string, p *statemachine.ProofObservation) {
	if key == "" {
		return
	}
	sel := labels.SelectorFromSet(labels.Set{v1alpha1.LabelComponent: v1alpha1.ComponentProof, v1alpha1.LabelProofOf: component})
	jobs, err := s.Listers.Jobs.Jobs(m.Namespace).List(sel)
	if err != nil {
		return
	}
	for _, job := range jobs {
		if job.Annotations[annotationProofKey] != key || ours(job, m.UID) || job.DeletionTimestamp != nil {
			continue
		}
		now := s.now()
		res, waiting := ProofOutcome(component, job, s.jobPods(job), now, s.Config.proofTimeout())
		switch {
		case res == nil:
			p.Running, p.Waiting = true, fmt.Sprintf("waiting for the proof of migration %s (job %s), of the same image and pod shape: %s",
				job.Labels[v1alpha1.LabelMigrationName], job.Name, waiting)
			return
		case res.Result == v1alpha1.ProofPassed && job.Status.CompletionTime != nil && now.Sub(job.Status.CompletionTime.Time) < s.Config.proofTTL():
			// As old as the peer's run, not as this look at it.
			res.Key, res.CheckedAt = key, *job.Status.CompletionTime
			s.proofs.put(*res, string(m.UID), now, s.Config.proofTTL())
			res.JobName = job.Name
			p.Result = res
			return
		}
	}
}

// knownProof is a recent result for key: the step's, or m's own in status.
// A failure serves only the validation it was made in (a migration
// refused before the stop whose spec changed proves its images again); a
// pass serves for the TTL.
func (s *Step) knownProof(m *v1alpha1.VirtualMachineMigration, component, key string, now time.Time, ttl time.Duration) *v1alpha1.ImageProof {
	if key == "" {
		return nil
	}
	serves := func(r *v1alpha1.ImageProof) bool {
		return r.Result == v1alpha1.ProofPassed || !madeBefore(r.CheckedAt.Time, m)
	}
	if r := s.proofs.get(key, string(m.UID), now, ttl); r != nil && serves(r) {
		r.Component, r.JobName = component, naming.ProofJob(m.Name, component)
		return r
	}
	for _, r := range m.Status.ImageProofs {
		if r.Component == component && r.Key == key && now.Sub(r.CheckedAt.Time) < ttl && serves(&r) {
			r := r
			return &r
		}
	}
	return nil
}

// proofObjects finds a component's proof Job and ServiceAccount in the
// caches and lists them (when they are this migration's) in p.
func (s *Step) proofObjects(m *v1alpha1.VirtualMachineMigration, component string, p *statemachine.ProofObservation) (*batchv1.Job, error) {
	var found *batchv1.Job
	job, err := s.Listers.Jobs.Jobs(m.Namespace).Get(p.JobName)
	if err == nil && ours(job, m.UID) && job.DeletionTimestamp == nil {
		found = job
		p.Running = true
		p.Objects = append(p.Objects, refTo(statemachine.KindJob, job))
	}
	if component != v1alpha1.ComponentTransfer {
		return found, nil
	}
	sa, err := s.Listers.ServiceAccounts.ServiceAccounts(m.Namespace).Get(naming.ProofAccess(m.Name))
	if err == nil && ours(sa, m.UID) && sa.DeletionTimestamp == nil {
		p.Objects = append(p.Objects, refTo(statemachine.KindServiceAccount, sa))
	}
	return found, nil
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
		res.Message = fmt.Sprintf("the self-check exited with code %d: %s", term.ExitCode, selfCheckProblems(component, term.Message))
	case o.StartProblem != nil && (o.StartProblem.Reason != ReasonUnschedulable || now.Sub(o.CreatedAt) >= timeout):
		res.Result, res.Reason, res.Message = v1alpha1.ProofFailed, o.StartProblem.Reason, o.StartProblem.Message
	case o.Failed:
		res.Result, res.Reason = v1alpha1.ProofFailed, ReasonNotStarted
		res.Message = joinNonEmpty(": ", "the proof pod did not run", o.Message)
	default:
		return nil, podWaiting(pod, job.Spec.Template.Spec.Containers[0].Name)
	}
	res.Output = truncate(strings.TrimSpace(termMessage(term)), 4096)
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

// ofAnotherValidation says whether a proof Job of m was made for an
// earlier validation than its current one (annotationProofValidation;
// a Job without the annotation says nothing). The annotation, not the
// Job's creation time, is compared: that is the API server's clock.
func ofAnotherValidation(job *batchv1.Job, m *v1alpha1.VirtualMachineMigration) bool {
	made, ok := job.Annotations[annotationProofValidation]
	return ok && m.Status.Phase == v1alpha1.PhaseValidating && made != validationStart(m)
}

// validationStart names m's current validation: when it began, as
// status.phaseStartTime says ("" when unknown).
func validationStart(m *v1alpha1.VirtualMachineMigration) string {
	if t := m.Status.PhaseStartTime; t != nil && m.Status.Phase == v1alpha1.PhaseValidating {
		return t.UTC().Format(time.RFC3339)
	}
	return ""
}
