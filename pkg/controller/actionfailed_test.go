package controller

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/steps"
	"platform.example/vm-migration/test/builders"
)

// TestFailingActionRetriesWithoutWritingStatus: an action that keeps
// failing (staging claims refused by a ResourceQuota) is retried once a
// wait interval, and a retry that fails as before writes no status. Each
// status write brings the migration back through its informer at once: a
// retry that flipped Progressing to Working before the action and back to
// the failure's reason after it wrote twice, and so ran in a hot loop
// (the e2e quota scenario saw about 24 creates a second, and the events of
// the migration's later transitions dropped by the recorder's spam filter).
func TestFailingActionRetriesWithoutWritingStatus(t *testing.T) {
	m := builders.Migration(builders.WithFinalizer, builders.Reached(v1alpha1.PhaseTransferringDisks))
	m.Status.Transfer, m.Status.Progress = nil, ""
	f := newFixture(t, &fakeSource{}, m)
	quota := errors.New("exceeded quota: no-claims, requested: persistentvolumeclaims=1, used: persistentvolumeclaims=0, limited: persistentvolumeclaims=0")
	// Ahead of the fake cluster's own reactors: the refused creates are
	// counted here, not in f.writes.
	refused := 0
	f.kube.PrependReactor("create", "persistentvolumeclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
		refused++
		name := a.(k8stesting.CreateAction).GetObject().(metav1.Object).GetName()
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "persistentvolumeclaims"}, name, quota)
	})

	after := f.sync(m)
	assert.Equal(t, statemachine.DefaultWaitInterval, after, "a refused create is tried again after the wait interval")
	cur := f.get(m)
	cond := condition(cur, statemachine.ConditionProgressing)
	require.NotNil(t, cond)
	assert.Equal(t, metav1.ConditionFalse, cond.Status)
	assert.Equal(t, steps.ReasonQuotaExceeded, cond.Reason)
	assert.Contains(t, cond.Message, "CreateStagingClaims failed")
	assert.Equal(t, 1, refused)

	for i := range 3 {
		f.clock.Step(statemachine.DefaultWaitInterval)
		after = f.sync(cur)
		assert.Equal(t, 2+i, refused, "retry %d: the create again", i+1)
		assert.Empty(t, f.writes, "retry %d: a retry that fails as before writes no status", i+1)
		assert.Equal(t, statemachine.DefaultWaitInterval, after, "retry %d", i+1)
		cur = f.get(m)
		assert.Equal(t, cond, condition(cur, statemachine.ConditionProgressing), "retry %d: the wait's condition stays as it was", i+1)
	}

	// Once the quota allows it, the claims are created; the reconcile
	// their events bring goes on, and says so.
	f.kube.ReactionChain = f.kube.ReactionChain[1:]
	f.clock.Step(statemachine.DefaultWaitInterval)
	f.sync(cur)
	assert.Contains(t, f.writes, "create persistentvolumeclaims")
	f.sync(f.get(m))
	cur = f.get(m)
	assert.True(t, hasCondition(cur, statemachine.ConditionProgressing, metav1.ConditionTrue, statemachine.ReasonWorking), "%+v", cur.Status.Conditions)
	assert.Contains(t, f.writes, "create jobs", "the transfer starts")
}

// hasCondition reports whether m has the condition with that status and reason.
func hasCondition(m *v1alpha1.VirtualMachineMigration, t string, status metav1.ConditionStatus, reason string) bool {
	c := condition(m, t)
	return c != nil && c.Status == status && c.Reason == reason
}
