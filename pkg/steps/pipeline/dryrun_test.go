package pipeline

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/pkg/statemachine"
)

// dryRunAnswers answers every create as a dry run must be sent (dryRun=All,
// strict field validation), persisting nothing: refuse decides per
// resource, nil accepting it.
func dryRunAnswers(t *testing.T, f *fakeStep, refuse func(resource, name string) error) *[]string {
	var sent []string
	react := func(a k8stesting.Action) (bool, runtime.Object, error) {
		c := a.(k8stesting.CreateActionImpl)
		assert.Equal(t, []string{metav1.DryRunAll}, c.CreateOptions.DryRun, "%s sent for real", a.GetResource().Resource)
		assert.Equal(t, metav1.FieldValidationStrict, c.CreateOptions.FieldValidation, "the real creates' field validation")
		name := c.Object.(metav1.Object).GetName()
		sent = append(sent, a.GetResource().Resource+"/"+name)
		return true, c.Object, refuse(a.GetResource().Resource, name)
	}
	f.Kube.PrependReactor("create", "*", react)
	f.KV.PrependReactor("create", "*", react)
	f.CDI.PrependReactor("create", "*", react)
	return &sent
}

func TestDryRun(t *testing.T) {
	m := validating("web-01")
	inv := m.Status.Source
	m.Status.Source = nil // in the first Validating pass, the inventory is only observed
	f := newFakeStep(t)
	f.step.Config.TransferProgress = true
	clock := clocktesting.NewFakePassiveClock(t0)
	f.step.Clock = clock
	objs, err := RenderPlan(plannedWith(m, inv), f.step.Config)
	require.NoError(t, err)
	quota := apierrors.NewForbidden(schema.GroupResource{Resource: "persistentvolumeclaims"}, "x", nil)
	quota.ErrStatus.Message = `persistentvolumeclaims "web-01-staging-2000" is forbidden: exceeded quota: no-claims`
	sent := dryRunAnswers(t, f, func(resource, name string) error {
		switch resource {
		case "persistentvolumeclaims":
			return quota
		case "rolebindings":
			return apierrors.NewForbidden(schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "rolebindings"}, name,
				apierrors.NewNotFound(schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "roles"}, name))
		}
		return nil
	})

	got := f.step.DryRun(context.Background(), m, inv)
	require.Nil(t, got.Error, "%+v", got.Error)
	st := got.Status
	require.Len(t, st.Objects, len(objs), "one answer per object the migration creates")
	assert.Len(t, *sent, len(objs))
	assert.Equal(t, int32(1), st.Refused)
	outcomes := map[string]v1alpha1.DryRunOutcome{}
	for _, o := range st.Objects {
		outcomes[o.Kind] = o.Outcome
		if o.Kind == "PersistentVolumeClaim" {
			assert.Equal(t, quota.Error(), o.Message, "the API server's words")
		}
		if o.Kind == "RoleBinding" {
			// Issue 34: the row said "a Role" without naming it.
			assert.Contains(t, o.Message, "it binds Role "+naming.TransferAccess(m.Name, 1)+", which the migration creates just before it",
				"the Role it could not check, by name")
		}
	}
	assert.Equal(t, v1alpha1.DryRunRefused, outcomes["PersistentVolumeClaim"])
	assert.Equal(t, v1alpha1.DryRunUnchecked, outcomes["RoleBinding"], "its Role is not created by a dry run")
	assert.Equal(t, v1alpha1.DryRunAccepted, outcomes["VirtualMachine"])
	assert.Equal(t, v1alpha1.DryRunAccepted, outcomes["DataVolume"])
	assert.Equal(t, v1alpha1.PhaseValidating, st.Phase)

	clock.SetTime(t0.Add(30 * time.Second))
	again := f.step.DryRun(context.Background(), m, inv)
	assert.Equal(t, st, again.Status, "the same objects within a minute: the same answer")
	assert.Len(t, *sent, len(objs), "not sent again")
	queued := m.DeepCopy()
	queued.Status.Phase = v1alpha1.PhaseQueued
	f.step.DryRun(context.Background(), queued, inv)
	assert.Len(t, *sent, 2*len(objs), "right before the stop: sent again")
	clock.SetTime(t0.Add(3 * time.Minute))
	f.step.DryRun(context.Background(), queued, inv)
	assert.Len(t, *sent, 3*len(objs), "an old answer: sent again")
}

func TestDryRunUnanswered(t *testing.T) {
	m := validating("web-01")
	f := newFakeStep(t)
	dryRunAnswers(t, f, func(string, string) error {
		return apierrors.NewGenericServerResponse(http.StatusServiceUnavailable, "create", schema.GroupResource{}, "", "try later", 1, true)
	})
	got := f.step.DryRun(context.Background(), m, m.Status.Source)
	require.NotNil(t, got.Error, "no answer is no refusal")
	assert.Equal(t, statemachine.ErrorTransient, got.Error.Class)

	broken := validating("web-02")
	broken.Spec.Target.Networks = nil
	got = f.step.DryRun(context.Background(), broken, broken.Status.Source)
	require.NotNil(t, got.Error)
	assert.Equal(t, ReasonRenderFailed, got.Error.Reason)
}

// TestWarningCollector: the warnings of a request made with a sink go to
// it, the others on.
func TestWarningCollector(t *testing.T) {
	var passed []string
	w := WarningCollector{Next: warningFunc(func(text string) { passed = append(passed, text) })}
	sink := &warningSink{}
	w.HandleWarningHeaderWithContext(WithWarningSink(context.Background(), sink), 299, "-", `would violate PodSecurity "restricted:latest"`)
	w.HandleWarningHeaderWithContext(context.Background(), 299, "-", "other")
	assert.Equal(t, []string{`would violate PodSecurity "restricted:latest"`}, sink.texts)
	assert.Equal(t, []string{"other"}, passed)
}

type warningFunc func(string)

func (f warningFunc) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	f(text)
}

func plannedWith(m *v1alpha1.VirtualMachineMigration, inv *v1alpha1.SourceInventory) *v1alpha1.VirtualMachineMigration {
	mp := m.DeepCopy()
	mp.Status.Source = inv
	return mp
}

// TestDryRunServesValidatingLonger: a migration waiting in Validating is
// not dry-run again every minute (a thousand of them outran the API rate
// limit), only after statemachine.ValidatingDryRunTTL; Queued keeps DryRunTTL.
func TestDryRunServesValidatingLonger(t *testing.T) {
	m := validating("web-01")
	inv := m.Status.Source
	f := newFakeStep(t)
	clock := clocktesting.NewFakePassiveClock(t0)
	f.step.Clock = clock
	sent := dryRunAnswers(t, f, func(string, string) error { return nil })
	f.step.DryRun(context.Background(), m, inv)
	once := len(*sent)
	require.NotZero(t, once)
	clock.SetTime(t0.Add(3 * DryRunTTL))
	f.step.DryRun(context.Background(), m, inv)
	assert.Len(t, *sent, once, "still validating, minutes later: not sent again")
	clock.SetTime(t0.Add(statemachine.ValidatingDryRunTTL))
	f.step.DryRun(context.Background(), m, inv)
	assert.Len(t, *sent, 2*once, "after ValidatingDryRunTTL: sent again")
}

// TestDryRunAskedAgainForANewSpec: a change of the spec (a new
// generation) is asked about again, even where its objects render the
// same: a migration refused before the stop and edited validates again,
// and the answer it gets is the cluster's of now (a quota since raised).
func TestDryRunAskedAgainForANewSpec(t *testing.T) {
	m := validating("web-01")
	inv := m.Status.Source
	f := newFakeStep(t)
	f.step.Clock = clocktesting.NewFakePassiveClock(t0)
	sent := dryRunAnswers(t, f, func(string, string) error { return nil })
	f.step.DryRun(context.Background(), m, inv)
	once := len(*sent)
	require.NotZero(t, once)
	m.Generation++
	obs := f.step.DryRun(context.Background(), m, inv)
	assert.Len(t, *sent, 2*once, "the new generation: sent again")
	require.NotNil(t, obs.Status)
	assert.Equal(t, m.Generation, obs.Status.ObservedGeneration)
}
