package pipeline

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
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
	assert.Equal(t, len(objs), len(*sent), "not sent again")
	queued := m.DeepCopy()
	queued.Status.Phase = v1alpha1.PhaseQueued
	f.step.DryRun(context.Background(), queued, inv)
	assert.Equal(t, 2*len(objs), len(*sent), "right before the stop: sent again")
	clock.SetTime(t0.Add(3 * time.Minute))
	f.step.DryRun(context.Background(), queued, inv)
	assert.Equal(t, 3*len(objs), len(*sent), "an old answer: sent again")
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
	assert.Equal(t, once, len(*sent), "still validating, minutes later: not sent again")
	clock.SetTime(t0.Add(statemachine.ValidatingDryRunTTL))
	f.step.DryRun(context.Background(), m, inv)
	assert.Equal(t, 2*once, len(*sent), "after ValidatingDryRunTTL: sent again")
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
	assert.Equal(t, 2*once, len(*sent), "the new generation: sent again")
	require.NotNil(t, obs.Status)
	assert.Equal(t, m.Generation, obs.Status.ObservedGeneration)
}

// waveMember is the i-th migration of a wave of one shape: its own name,
// UID, VM (name, managed object, UUIDs, host, disk file, MAC, address),
// everything else as linuxBIOS.
func waveMember(i int) (*v1alpha1.VirtualMachineMigration, *v1alpha1.SourceInventory) {
	m := validating(fmt.Sprintf("web-%02d-migration", i))
	inv := m.Status.Source.DeepCopy()
	m.Status.Source = nil
	vm := fmt.Sprintf("web-%02d", i)
	inv.Name, inv.MoRef, inv.InventoryPath = vm, fmt.Sprintf("vm-%d", 40+i), "/dc1/vm/web/"+vm
	inv.BIOSUUID, inv.InstanceUUID = waveUUID(i, "bios"), waveUUID(i, "instance")
	inv.Host = fmt.Sprintf("esxi-%02d.example.com", i%3)
	inv.Disks[0].FileName = fmt.Sprintf("[datastore1] %s/%s.vmdk", vm, vm)
	inv.NICs[0].MAC = strings.ToUpper(fmt.Sprintf("00:50:56:%s:%s:%s", inv.BIOSUUID[0:2], inv.BIOSUUID[2:4], inv.BIOSUUID[4:6]))
	inv.NICs[0].Guest.IPAddresses[0].IP = fmt.Sprintf("192.168.10.%d", 20+i)
	m.Spec.Source.VM.Name = vm
	m.Status.AppliedSpec = nil
	return m, inv
}

// waveUUID is a UUID of its own for the i-th member of a wave, as vSphere
// gives them: hexadecimal digits and letters in no set pattern.
func waveUUID(i int, what string) string {
	h := fmt.Sprintf("%x", sha256.Sum256([]byte(fmt.Sprintf("%s-%d", what, i))))
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// TestDryRunServesAWaveOfOneShape (issue 32): the migrations of one
// namespace whose objects differ only by their own identifiers send one
// dry run per phase between them, and each reads the answer with its own
// objects' names; a different size, another namespace or an old answer is
// asked again, and a refusal serves only the migration it refused.
func TestDryRunServesAWaveOfOneShape(t *testing.T) {
	f := newFakeStep(t)
	f.step.Config.TransferProgress = true
	clock := clocktesting.NewFakePassiveClock(t0)
	f.step.Clock = clock
	refuseClaims := false
	sent := dryRunAnswers(t, f, func(resource, name string) error {
		if refuseClaims && resource == "persistentvolumeclaims" {
			return apierrors.NewForbidden(schema.GroupResource{Resource: resource}, name, fmt.Errorf("exceeded quota: claims"))
		}
		return nil
	})
	first, inv := waveMember(1)
	objs, err := RenderPlan(plannedWith(first, inv), f.step.Config)
	require.NoError(t, err)
	once := len(objs)
	for i := 1; i <= 20; i++ {
		m, inv := waveMember(i)
		got := f.step.DryRun(context.Background(), m, inv)
		require.Nil(t, got.Error, "%+v", got.Error)
		require.Len(t, got.Status.Objects, once)
		mine, err := RenderPlan(plannedWith(m, inv), f.step.Config)
		require.NoError(t, err)
		for j, o := range got.Status.Objects {
			assert.Equal(t, plannedObject(mine[j]).Name, o.Name, "migration %d reads its own objects' names", i)
		}
		if o := got.Status.Objects[len(objs)-1]; i == 7 {
			assert.Contains(t, o.Name, "web-07", "its own VM's name")
		}
	}
	assert.Equal(t, once, len(*sent), "twenty migrations of one shape: one dry run")

	bigger, inv := waveMember(21)
	inv.Disks[0].CapacityBytes *= 2
	f.step.DryRun(context.Background(), bigger, inv)
	assert.Equal(t, 2*once, len(*sent), "a bigger disk is another shape")
	longer, inv := waveMember(100)
	f.step.DryRun(context.Background(), longer, inv)
	assert.Equal(t, 3*once, len(*sent), "names one character longer: another shape")
	elsewhere, inv := waveMember(22)
	elsewhere.Namespace = "other-team"
	f.step.DryRun(context.Background(), elsewhere, inv)
	assert.Equal(t, 4*once, len(*sent), "another namespace asks for itself")
	queued, inv := waveMember(3)
	queued.Status.Phase = v1alpha1.PhaseQueued
	f.step.DryRun(context.Background(), queued, inv)
	assert.Equal(t, 5*once, len(*sent), "right before the stop: asked again")
	queued, inv = waveMember(4)
	queued.Status.Phase = v1alpha1.PhaseQueued
	f.step.DryRun(context.Background(), queued, inv)
	assert.Equal(t, 6*once, len(*sent), "right before the stop, each migration asks for its own objects")

	clock.SetTime(t0.Add(statemachine.ValidatingDryRunTTL))
	late, inv := waveMember(23)
	f.step.DryRun(context.Background(), late, inv)
	assert.Equal(t, 7*once, len(*sent), "an old answer serves no one")

	refuseClaims = true
	for i := 24; i <= 25; i++ {
		m, inv := waveMember(i)
		m.Spec.Target.Storage.Default = &v1alpha1.StorageTarget{StorageClassName: "refused-class"}
		got := f.step.DryRun(context.Background(), m, inv)
		require.NotNil(t, got.Status)
		assert.Equal(t, int32(1), got.Status.Refused)
	}
	assert.Equal(t, 9*once, len(*sent), "a refusal is asked by each migration itself")
}

// TestDryRunRightBeforeTheStopIsItsOwn (issue 46): the dry run right
// before the stop (Queued) is never served from another migration's
// answer, nor from the migration's own earlier one: once a migration of
// the same shape spent the namespace's quota, the next one is refused
// before its source is stopped, not after.
func TestDryRunRightBeforeTheStopIsItsOwn(t *testing.T) {
	f := newFakeStep(t)
	f.step.Clock = clocktesting.NewFakePassiveClock(t0)
	quotaSpent := false
	sent := dryRunAnswers(t, f, func(resource, name string) error {
		if quotaSpent && resource == "persistentvolumeclaims" {
			return apierrors.NewForbidden(schema.GroupResource{Resource: resource}, name, fmt.Errorf("exceeded quota: claims"))
		}
		return nil
	})
	first, inv1 := waveMember(1)
	first.Status.Phase = v1alpha1.PhaseQueued
	got := f.step.DryRun(context.Background(), first, inv1)
	require.NotNil(t, got.Status)
	require.Zero(t, got.Status.Refused)
	once := len(*sent)

	quotaSpent = true // the first migration's claims took the quota
	second, inv2 := waveMember(2)
	second.Status.Phase = v1alpha1.PhaseQueued
	got = f.step.DryRun(context.Background(), second, inv2)
	require.NotNil(t, got.Status)
	assert.Equal(t, int32(1), got.Status.Refused, "the same shape, seconds later: asked, and refused")
	assert.Equal(t, 2*once, len(*sent))

	got = f.step.DryRun(context.Background(), first, inv1)
	require.NotNil(t, got.Status)
	assert.Equal(t, int32(1), got.Status.Refused, "its own answer of a moment ago is not reused either")
	assert.Equal(t, 3*once, len(*sent))
}

// TestDryRunUnansweredBacksOff (issue 32): a dry run the API server did not
// answer is not sent again at every look, but after 10 s, then 20 s, up to
// 5 minutes; an answer ends the backoff.
func TestDryRunUnansweredBacksOff(t *testing.T) {
	m := validating("web-01")
	inv := m.Status.Source
	f := newFakeStep(t)
	clock := clocktesting.NewFakePassiveClock(t0)
	f.step.Clock = clock
	throttled := true
	sent := dryRunAnswers(t, f, func(string, string) error {
		if throttled {
			return apierrors.NewTooManyRequests("slow down", 1)
		}
		return nil
	})
	got := f.step.DryRun(context.Background(), m, inv)
	require.NotNil(t, got.Error)
	assert.Equal(t, statemachine.ErrorTransient, got.Error.Class)
	assert.Contains(t, got.Error.Message, "asking again after "+t0.Add(DryRunRetryMin).UTC().Format(time.RFC3339))
	assert.Equal(t, 1, len(*sent), "the first refused request ends the dry run")
	clock.SetTime(t0.Add(DryRunRetryMin - time.Second))
	again := f.step.DryRun(context.Background(), m, inv)
	assert.Equal(t, got.Error, again.Error, "within the backoff: the same error, nothing sent")
	assert.Len(t, *sent, 1)
	at := t0.Add(DryRunRetryMin)
	clock.SetTime(at)
	again = f.step.DryRun(context.Background(), m, inv)
	assert.Equal(t, 2, len(*sent), "after it: asked again")
	assert.Contains(t, again.Error.Message, "asking again after "+at.Add(2*DryRunRetryMin).UTC().Format(time.RFC3339), "the backoff doubles")
	for i := 0; i < 10; i++ {
		at = at.Add(DryRunRetryMax)
		clock.SetTime(at)
		again = f.step.DryRun(context.Background(), m, inv)
	}
	assert.Contains(t, again.Error.Message, "asking again after "+at.Add(DryRunRetryMax).UTC().Format(time.RFC3339), "at most DryRunRetryMax")
	throttled = false
	clock.SetTime(at.Add(DryRunRetryMax))
	ok := f.step.DryRun(context.Background(), m, inv)
	require.Nil(t, ok.Error)
	assert.NotNil(t, ok.Status)
}
