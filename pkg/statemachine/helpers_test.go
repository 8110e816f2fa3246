package statemachine

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/test/builders"
)

// decideCase is one row of a phase table.
type decideCase struct {
	m   *v1alpha1.VirtualMachineMigration
	obs Observation
	now time.Duration // since t0

	phase   v1alpha1.Phase // the phase the decision leaves the migration in
	action  ActionType
	name    string        // the action's name, when set
	requeue time.Duration // the exact RequeueAfter, when set; -1 asks for none
	check   func(t *testing.T, d Decision)
}

func runCases(t *testing.T, cases map[string]decideCase) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := tc.m.DeepCopy()
			d := decideAt(tc.m, tc.obs, tc.now)
			// require.Equal compares with reflect.DeepEqual: strict, as
			// "the input was not mutated" needs.
			require.Equal(t, before, tc.m, "Decide mutated its input migration")
			assert.Equal(t, tc.phase, d.Status.Phase, "the phase the decision leaves the migration in (lastError %+v)", d.Status.LastError)
			assert.Equal(t, tc.action, d.Action.Type, "the action asked for")
			if tc.name != "" {
				assert.Equal(t, tc.name, d.Action.Name, "the name of the action's object")
			}
			switch {
			case tc.requeue < 0:
				assert.Zero(t, d.RequeueAfter, "requeueAfter, want none")
			case tc.requeue > 0:
				assert.Equal(t, tc.requeue, d.RequeueAfter, "requeueAfter")
			}
			assert.Equal(t, tc.m.Generation, d.Status.ObservedGeneration, "observedGeneration, want the migration's generation")
			for _, c := range d.Status.Conditions {
				assert.Equal(t, tc.m.Generation, c.ObservedGeneration, "condition %s observedGeneration, want the migration's generation", c.Type)
			}
			if tc.check != nil {
				tc.check(t, d)
			}
		})
	}
}

// semanticEqual is the comparison the controller makes before it writes
// the status.
func semanticEqual(a, b any) bool { return equality.Semantic.DeepEqual(a, b) }

// assertSemanticEqual is assert.Equal with the comparison the controller
// makes before it writes the status (equality.Semantic: nil and empty
// slices and maps alike, times and quantities by value); testify's Equal
// is reflect.DeepEqual and cannot be told to compare that way.
func assertSemanticEqual(t *testing.T, want, got any, msgAndArgs ...any) bool {
	t.Helper()
	if semanticEqual(want, got) {
		return true
	}
	return assert.Fail(t, fmt.Sprintf("Not semantically equal:\nwant: %+v\ngot:  %+v", want, got), msgAndArgs...)
}

// assertTime asserts that got is set and is the instant want, compared as
// metav1.Time.Equal does (the same instant, whatever the location).
func assertTime(t *testing.T, want metav1.Time, got *metav1.Time, msgAndArgs ...any) bool {
	t.Helper()
	return assert.NotNil(t, got, msgAndArgs...) && assert.WithinDuration(t, want.Time, got.Time, 0, msgAndArgs...)
}

// cond returns the condition of that type, failing the test when absent.
func cond(t *testing.T, d Decision, typ string) metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(d.Status.Conditions, typ)
	require.NotNil(t, c, "want a %s condition in %+v", typ, d.Status.Conditions)
	return *c
}

// wantCond asserts the condition's status and, unless reason is empty, its
// reason; it fails the test at once when the condition is absent.
func wantCond(t *testing.T, d Decision, typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	c := cond(t, d, typ)
	assert.Equal(t, status, c.Status, "%s status (reason %s, message %q)", typ, c.Reason, c.Message)
	if reason != "" {
		assert.Equal(t, reason, c.Reason, "%s reason (status %s, message %q)", typ, c.Status, c.Message)
	}
	return c
}

func wantNoCond(t *testing.T, d Decision, typ string) {
	t.Helper()
	assert.Nil(t, meta.FindStatusCondition(d.Status.Conditions, typ), "want no %s condition", typ)
}

func wantLastError(t *testing.T, d Decision, phase v1alpha1.Phase, reason string) {
	t.Helper()
	e := d.Status.LastError
	require.NotNil(t, e, "lastError is nil, want %s in %s", reason, phase)
	assert.Equal(t, phase, e.Phase, "the phase of lastError %s (%q)", e.Reason, e.Message)
	assert.Equal(t, reason, e.Reason, "the reason of lastError in %s (%q)", e.Phase, e.Message)
}

func wantEvidence(t *testing.T, d Decision, phase v1alpha1.Phase, now time.Duration) {
	t.Helper()
	ev := evidenceFor(d.Status, phase)
	require.NotNil(t, ev, "want evidence for %s", phase)
	assertTime(t, builders.At(now), &ev.ReachedAt, "evidence for %s = %+v, want reached at %s", phase, *ev, builders.At(now))
	assert.NotEmpty(t, ev.Observed, "evidence for %s = %+v, want what was observed", phase, *ev)
}

func wantTime(t *testing.T, what string, got *metav1.Time, want time.Duration) {
	t.Helper()
	assertTime(t, builders.At(want), got, "%s = %v, want %v", what, got, builders.At(want))
}
