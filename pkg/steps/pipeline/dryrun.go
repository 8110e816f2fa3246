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
// content for DryRunTTL, so a migration in Validating does not send it at
// every reconcile.

// DryRunTTL is how long a dry run's answer serves a migration whose
// objects render the same, right before the stop (Queued).
const DryRunTTL = time.Minute

// dryRunTTL is how long a dry run made in phase serves.
func dryRunTTL(phase v1alpha1.Phase) time.Duration {
	if phase == v1alpha1.PhaseValidating {
		return statemachine.ValidatingDryRunTTL
	}
	return DryRunTTL
}

// ReasonRenderFailed: the objects of the migration could not be rendered.
const ReasonRenderFailed = "RenderFailed"

// dryRunCache keeps the last dry run of each migration.
type dryRunCache struct {
	mu    sync.Mutex
	byUID map[string]cachedDryRun
}

type cachedDryRun struct {
	key    string
	status v1alpha1.DryRunStatus
}

// dryRunOptions are the real creates' options, as a dry run.
var dryRunOptions = metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict, DryRun: []string{metav1.DryRunAll}}

// DryRun answers, for m with its inventory inv, what the API server says
// of each object m creates, asking it again only when the rendered
// objects, the phase, the generation or DryRunTTL changed.
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
	now := s.now()
	if st := s.dryRuns.get(string(m.UID), key, now); st != nil {
		return &statemachine.DryRunObservation{Status: st}
	}
	st := &v1alpha1.DryRunStatus{ObservedGeneration: m.Generation, Phase: m.Status.Phase}
	for _, o := range objs {
		answer, err := s.dryRunOne(ctx, m.Namespace, o)
		if err != nil {
			c := steps.Classify(err)
			return &statemachine.DryRunObservation{Error: &statemachine.ObservedError{Class: statemachine.ErrorTransient, Reason: c.Reason,
				Message: fmt.Sprintf("dry run of %s: %s", describeObject(o), c.Message)}}
		}
		if answer.Outcome == v1alpha1.DryRunRefused {
			st.Refused++
		}
		st.Objects = append(st.Objects, answer)
	}
	st.CheckedAt = metav1.NewTime(s.now()).Rfc3339Copy()
	s.dryRuns.put(string(m.UID), key, *st)
	return &statemachine.DryRunObservation{Status: st}
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

func (c *dryRunCache) get(uid, key string, now time.Time) *v1alpha1.DryRunStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byUID[uid]
	if !ok || e.key != key || now.Sub(e.status.CheckedAt.Time) >= dryRunTTL(e.status.Phase) {
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
	for id, e := range c.byUID {
		if st.CheckedAt.Sub(e.status.CheckedAt.Time) >= dryRunTTL(e.status.Phase) {
			delete(c.byUID, id)
		}
	}
	c.byUID[uid] = cachedDryRun{key: key, status: st}
}

// dryRunOne sends one object's create as a dry run and reads the answer.
// Only a failure to be answered (the API server unavailable, a timeout)
// is an error.
func (s *Step) dryRunOne(ctx context.Context, ns string, o runtime.Object) (v1alpha1.DryRunObject, error) {
	po := plannedObject(o)
	answer := v1alpha1.DryRunObject{APIVersion: po.APIVersion, Kind: po.Kind, Name: po.Name, Outcome: v1alpha1.DryRunAccepted}
	warnings := &warningSink{}
	err := s.sendDryRun(WithWarningSink(ctx, warnings), ns, o)
	switch {
	case err == nil && len(warnings.texts) > 0:
		answer.Outcome, answer.Message = v1alpha1.DryRunWarned, truncate(strings.Join(warnings.texts, "; "), 2048)
	case err == nil:
	case unanswered(err):
		return answer, err
	case apierrors.IsAlreadyExists(err):
		answer.Outcome, answer.Message = v1alpha1.DryRunUnchecked, truncate("it exists already: "+err.Error(), 2048)
	case roleNotYetCreated(o, err):
		role := o.(*rbacv1.RoleBinding).RoleRef.Name
		answer.Outcome = v1alpha1.DryRunUnchecked
		answer.Message = truncate(fmt.Sprintf("it binds Role %s, which the migration creates just before it and a dry run does not create (Role %s's own dry run checked its rules): %v", role, role, err), 2048)
	default:
		answer.Outcome, answer.Message = v1alpha1.DryRunRefused, truncate(err.Error(), 2048)
	}
	return answer, nil
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
