package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/steps"
)

// The dry run sends every object a migration creates (RenderPlan: the
// functions its own creates use) to the API server with dryRun=All, with
// the clients and strict field validation of the real creates: the API
// server validates, defaults and admits each one (quota, LimitRange,
// PodSecurity's warnings on Jobs, KubeVirt's and CDI's webhooks, which
// declare no side effects) and persists nothing. It needs no RBAC beyond
// the creates'. Its answer is kept per migration, phase and rendered
// content for statemachine.ValidatingDryRunTTL in Validating, so a
// migration waiting in Validating does not send it at every reconcile; an
// answer that refused nothing also serves, for as long, the other
// migrations of its namespace whose objects have its shape (see
// dryRunShape): a wave of one shape sends one dry run in Validating, not
// one per migration. Right before the stop (Queued, once a transfer slot
// is free) every migration asks for its own objects, every time: no kept
// answer serves there, where a stale one could stop a source whose
// objects the cluster now refuses. A dry run the API server did not answer (throttled,
// unavailable, slower than DryRunTimeout) is asked again only after a
// backoff of its own, DryRunRetryMin doubling up to DryRunRetryMax.

// DryRunTTL is how long a dry run's answer is kept outside Validating
// (its own answer right before the stop is never reused: see DryRun).
const DryRunTTL = time.Minute

// DryRunTimeout bounds one dry run of a migration's objects (the wait for
// the client's rate limit included), so that a slow API server holds no
// worker longer.
const DryRunTimeout = 15 * time.Second

// DryRunRetryMin and DryRunRetryMax bound the backoff of a migration's
// dry run after the API server did not answer it.
const (
	DryRunRetryMin = 10 * time.Second
	DryRunRetryMax = 5 * time.Minute
)

// dryRunTTL is how long a dry run made in phase serves.
func dryRunTTL(phase v1alpha1.Phase) time.Duration {
	if phase == v1alpha1.PhaseValidating {
		return statemachine.ValidatingDryRunTTL
	}
	return DryRunTTL
}

// ReasonRenderFailed: the objects of the migration could not be rendered.
const ReasonRenderFailed = "RenderFailed"

// dryRunCache keeps the last dry run of each migration, the answers that
// serve every migration of their shape, and the dry runs not answered.
type dryRunCache struct {
	mu    sync.Mutex
	byUID map[string]cachedDryRun
	// byShape holds anonymized answers by namespace and shape.
	byShape map[string]sharedDryRun
	// failed holds, by migration UID, the dry runs not answered.
	failed map[string]failedDryRun
}

type cachedDryRun struct {
	key    string
	status v1alpha1.DryRunStatus
}

// sharedDryRun is an answer for the objects of one shape, its identifiers
// replaced by placeholders, and the migration that asked it (which its own
// answer serves, with its generation in the key).
type sharedDryRun struct {
	askedBy string
	status  v1alpha1.DryRunStatus
}

// failedDryRun is a dry run the API server did not answer: its error
// serves until retryAt.
type failedDryRun struct {
	key      string
	failures int
	retryAt  time.Time
	err      statemachine.ObservedError
}

// dryRunOptions are the real creates' options, as a dry run.
var dryRunOptions = metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict, DryRun: []string{metav1.DryRunAll}}

// DryRun answers, for m with its inventory inv, what the API server says
// of each object m creates, asking it again only when the rendered
// objects, the phase, the generation or DryRunTTL changed, and not while
// an answer for objects of the same shape in the namespace serves.
func (s *Step) DryRun(ctx context.Context, m *v1alpha1.VirtualMachineMigration, inv *v1alpha1.SourceInventory) *statemachine.DryRunObservation {
	mp := m.DeepCopy()
	mp.Status.Source = inv
	objs, err := RenderPlan(mp, s.Config)
	if err != nil {
		return &statemachine.DryRunObservation{Error: &statemachine.ObservedError{Class: statemachine.ErrorPermanent, Reason: ReasonRenderFailed,
			Message: fmt.Sprintf("rendering the objects this migration creates: %v", err)}}
	}
	key, err := dryRunKey(m, objs)
	if err != nil {
		return &statemachine.DryRunObservation{Error: &statemachine.ObservedError{Class: statemachine.ErrorPermanent, Reason: ReasonRenderFailed, Message: err.Error()}}
	}
	uid, now := string(m.UID), s.now()
	// Right before the stop (Queued) the answer must be the API server's
	// of now, for this migration's own objects: an answer of a minute ago
	// (its own, or another's of its shape) may predate the quota another
	// migration just spent, and a webhook may refuse a name by its value,
	// which a shape hides. Only where a stale answer cannot lead to a
	// stop (Validating: Queued asks again) does a kept answer serve.
	beforeStop := m.Status.Phase == v1alpha1.PhaseQueued
	if st := s.dryRuns.get(uid, key, now); st != nil && !beforeStop {
		return &statemachine.DryRunObservation{Status: st}
	}
	if e := s.dryRuns.backingOff(uid, key, now); e != nil {
		return &statemachine.DryRunObservation{Error: e}
	}
	ids := identities(m, inv)
	shape, err := dryRunShape(m.Status.Phase, objs, ids)
	if err != nil {
		return &statemachine.DryRunObservation{Error: &statemachine.ObservedError{Class: statemachine.ErrorPermanent, Reason: ReasonRenderFailed, Message: err.Error()}}
	}
	shape = m.Namespace + "/" + shape
	if st := s.dryRuns.getShared(uid, shape, ids, now); st != nil && !beforeStop {
		st.ObservedGeneration = m.Generation
		s.dryRuns.put(uid, key, *st)
		return &statemachine.DryRunObservation{Status: st}
	}
	st, shareable, e := s.ask(ctx, m, objs)
	if e != nil {
		return &statemachine.DryRunObservation{Error: s.dryRuns.putFailed(uid, key, *e, s.now())}
	}
	s.dryRuns.put(uid, key, *st)
	if shareable && !beforeStop {
		s.dryRuns.putShared(uid, shape, anonymizeAnswer(*st, ids))
	}
	return &statemachine.DryRunObservation{Status: st}
}

// ask sends the dry run of objs, within DryRunTimeout, and says whether
// its answer may serve other migrations of its shape: one that refused
// nothing and met no object of the migration's own.
func (s *Step) ask(ctx context.Context, m *v1alpha1.VirtualMachineMigration, objs []runtime.Object) (*v1alpha1.DryRunStatus, bool, *statemachine.ObservedError) {
	ctx, cancel := context.WithTimeout(ctx, DryRunTimeout)
	defer cancel()
	st := &v1alpha1.DryRunStatus{ObservedGeneration: m.Generation, Phase: m.Status.Phase}
	shareable := true
	for _, o := range objs {
		answer, exists, err := s.dryRunOne(ctx, m.Namespace, o)
		if err != nil {
			c := steps.Classify(err)
			return nil, false, &statemachine.ObservedError{Class: statemachine.ErrorTransient, Reason: c.Reason,
				Message: fmt.Sprintf("dry run of %s: %s", describeObject(o), c.Message)}
		}
		if answer.Outcome == v1alpha1.DryRunRefused {
			st.Refused++
			shareable = false
		}
		shareable = shareable && !exists
		st.Objects = append(st.Objects, answer)
	}
	st.CheckedAt = metav1.NewTime(s.now()).Rfc3339Copy()
	return st, shareable, nil
}

// dryRunKey identifies what was dry-run: the phase, the spec's generation
// (a changed spec is asked about again, even where its objects render the
// same: a migration refused before the stop and edited validates again
// with the cluster's answer of now) and the rendered objects.
func dryRunKey(m *v1alpha1.VirtualMachineMigration, objs []runtime.Object) (string, error) {
	data, err := json.Marshal(objs)
	if err != nil {
		return "", fmt.Errorf("encoding the objects for their dry run: %w", err)
	}
	sum := sha256.Sum256(append(fmt.Appendf(nil, "%s\n%d\n", m.Status.Phase, m.Generation), data...))
	return hex.EncodeToString(sum[:]), nil
}

// fresh says an answer checked in phase at checkedAt still serves at now.
func fresh(phase v1alpha1.Phase, checkedAt metav1.Time, now time.Time) bool {
	return now.Sub(checkedAt.Time) < dryRunTTL(phase)
}

func (c *dryRunCache) get(uid, key string, now time.Time) *v1alpha1.DryRunStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byUID[uid]
	if !ok || e.key != key || !fresh(e.status.Phase, e.status.CheckedAt, now) {
		return nil
	}
	return e.status.DeepCopy()
}

func (c *dryRunCache) put(uid, key string, st v1alpha1.DryRunStatus) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byUID == nil {
		c.byUID = map[string]cachedDryRun{}
	}
	dropStale(c.byUID, st.CheckedAt.Time, func(e cachedDryRun) *v1alpha1.DryRunStatus { return &e.status })
	c.byUID[uid] = cachedDryRun{key: key, status: st}
	delete(c.failed, uid)
}

// getShared is the answer for shape, with ids' values in it, if another
// migration asked it and it still serves.
func (c *dryRunCache) getShared(uid, shape string, ids []identity, now time.Time) *v1alpha1.DryRunStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byShape[shape]
	if !ok || e.askedBy == uid || !fresh(e.status.Phase, e.status.CheckedAt, now) {
		return nil
	}
	st := personalizeAnswer(e.status, ids)
	return &st
}

func (c *dryRunCache) putShared(uid, shape string, st v1alpha1.DryRunStatus) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byShape == nil {
		c.byShape = map[string]sharedDryRun{}
	}
	dropStale(c.byShape, st.CheckedAt.Time, func(e sharedDryRun) *v1alpha1.DryRunStatus { return &e.status })
	c.byShape[shape] = sharedDryRun{askedBy: uid, status: st}
}

// dropStale deletes the entries of m whose answer no longer serves at now.
func dropStale[E any](m map[string]E, now time.Time, answer func(E) *v1alpha1.DryRunStatus) {
	for k, e := range m {
		if st := answer(e); !fresh(st.Phase, st.CheckedAt, now) {
			delete(m, k)
		}
	}
}

// backingOff is the error of the migration's last dry run of key, while
// its backoff lasts.
func (c *dryRunCache) backingOff(uid, key string, now time.Time) *statemachine.ObservedError {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.failed[uid]
	if !ok || f.key != key || !now.Before(f.retryAt) {
		return nil
	}
	e := f.err
	return &e
}

// putFailed records a dry run not answered and returns its error, which
// names when it is asked again.
func (c *dryRunCache) putFailed(uid, key string, e statemachine.ObservedError, now time.Time) *statemachine.ObservedError {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failed == nil {
		c.failed = map[string]failedDryRun{}
	}
	for id, f := range c.failed {
		if now.Sub(f.retryAt) > DryRunRetryMax {
			delete(c.failed, id)
		}
	}
	f := c.failed[uid]
	if f.key != key {
		f = failedDryRun{key: key}
	}
	f.failures++
	delay := DryRunRetryMin
	for i := 1; i < f.failures && delay < DryRunRetryMax; i++ {
		delay *= 2
	}
	delay = min(delay, DryRunRetryMax)
	f.retryAt = now.Add(delay)
	e.Message = fmt.Sprintf("%s; asking again after %s", e.Message, f.retryAt.UTC().Format(time.RFC3339))
	f.err = e
	c.failed[uid] = f
	return &e
}

// dryRunOne sends one object's create as a dry run and reads the answer.
// Only a failure to be answered (the API server unavailable, a timeout)
// is an error.
func (s *Step) dryRunOne(ctx context.Context, ns string, o runtime.Object) (answer v1alpha1.DryRunObject, exists bool, err error) {
	po := plannedObject(o)
	answer = v1alpha1.DryRunObject{APIVersion: po.APIVersion, Kind: po.Kind, Name: po.Name, Outcome: v1alpha1.DryRunAccepted}
	warnings := &warningSink{}
	err = s.sendDryRun(WithWarningSink(ctx, warnings), ns, o)
	switch {
	case err == nil && len(warnings.texts) > 0:
		answer.Outcome, answer.Message = v1alpha1.DryRunWarned, truncate(strings.Join(warnings.texts, "; "), 2048)
	case err == nil:
	case unanswered(err):
		return answer, false, err
	case apierrors.IsAlreadyExists(err):
		answer.Outcome, answer.Message = v1alpha1.DryRunUnchecked, truncate("it exists already: "+err.Error(), 2048)
		exists = true
	case roleNotYetCreated(o, err):
		role := o.(*rbacv1.RoleBinding).RoleRef.Name
		answer.Outcome = v1alpha1.DryRunUnchecked
		answer.Message = truncate(fmt.Sprintf("it binds Role %s, which the migration creates just before it and a dry run does not create (Role %s's own dry run checked its rules): %v", role, role, err), 2048)
	default:
		answer.Outcome, answer.Message = v1alpha1.DryRunRefused, truncate(err.Error(), 2048)
	}
	return answer, exists, nil
}

// unanswered says the API server did not answer the request.
func unanswered(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || apierrors.IsTimeout(err) ||
		apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err) || apierrors.IsServiceUnavailable(err) ||
		steps.Classify(err).Reason == steps.ReasonAPIUnavailable && !apierrors.IsInternalError(err)
}

// roleNotYetCreated says a RoleBinding was refused only because the Role
// it binds does not exist yet: the API server resolves the Role to check
// that binding it escalates nothing, and answers NotFound (or Forbidden)
// when it is not there.
func roleNotYetCreated(o runtime.Object, err error) bool {
	rb, ok := o.(*rbacv1.RoleBinding)
	return ok && (apierrors.IsNotFound(err) || apierrors.IsForbidden(err)) && strings.Contains(err.Error(), fmt.Sprintf("%q not found", rb.RoleRef.Name))
}

// sendDryRun creates o as a dry run through the client of its kind.
func (s *Step) sendDryRun(ctx context.Context, ns string, o runtime.Object) error {
	var err error
	switch obj := o.(type) {
	case *corev1.PersistentVolumeClaim:
		_, err = s.Kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, obj, dryRunOptions)
	case *corev1.ConfigMap:
		_, err = s.Kube.CoreV1().ConfigMaps(ns).Create(ctx, obj, dryRunOptions)
	case *corev1.ServiceAccount:
		_, err = s.Kube.CoreV1().ServiceAccounts(ns).Create(ctx, obj, dryRunOptions)
	case *rbacv1.Role:
		_, err = s.Kube.RbacV1().Roles(ns).Create(ctx, obj, dryRunOptions)
	case *rbacv1.RoleBinding:
		_, err = s.Kube.RbacV1().RoleBindings(ns).Create(ctx, obj, dryRunOptions)
	case *batchv1.Job:
		_, err = s.Kube.BatchV1().Jobs(ns).Create(ctx, obj, dryRunOptions)
	case *cdiv1.DataVolume:
		_, err = s.CDI.CdiV1beta1().DataVolumes(ns).Create(ctx, obj, dryRunOptions)
	case *kubevirtv1.VirtualMachine:
		_, err = s.KubeVirt.KubevirtV1().VirtualMachines(ns).Create(ctx, obj, dryRunOptions)
	default:
		return fmt.Errorf("no dry run for %T", o)
	}
	return err
}

// describeObject names a rendered object: "Job web-01-transfer-1".
func describeObject(o runtime.Object) string {
	po := plannedObject(o)
	return po.Kind + " " + po.Name
}

// warningSink collects the warnings of the requests made with its context.
type warningSink struct {
	mu    sync.Mutex
	texts []string
}

type warningSinkKey struct{}

// WithWarningSink returns a context whose requests' warnings go to sink.
func WithWarningSink(ctx context.Context, sink *warningSink) context.Context {
	return context.WithValue(ctx, warningSinkKey{}, sink)
}

// WarningCollector is a client-go warning handler (rest.Config's
// WarningHandlerWithContext) that hands a request's warnings to the sink
// of its context, for the dry run to read, and the others to Next.
type WarningCollector struct {
	// Next handles the warnings of requests without a sink; nil drops them.
	Next rest.WarningHandlerWithContext
}

// HandleWarningHeaderWithContext implements rest.WarningHandlerWithContext.
func (w WarningCollector) HandleWarningHeaderWithContext(ctx context.Context, code int, agent, text string) {
	if sink, ok := ctx.Value(warningSinkKey{}).(*warningSink); ok {
		sink.mu.Lock()
		sink.texts = append(sink.texts, text)
		sink.mu.Unlock()
		return
	}
	if w.Next != nil {
		w.Next.HandleWarningHeaderWithContext(ctx, code, agent, text)
	}
}
