package statemachine

import (
	"reflect"
	"testing"
	"time"

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
			if !equalObjects(before, tc.m) {
				t.Fatalf("Decide mutated its input migration")
			}
			if d.Status.Phase != tc.phase {
				t.Errorf("phase = %s, want %s (lastError %+v)", d.Status.Phase, tc.phase, d.Status.LastError)
			}
			if d.Action.Type != tc.action {
				t.Errorf("action = %q, want %q", d.Action.Type, tc.action)
			}
			if tc.name != "" && d.Action.Name != tc.name {
				t.Errorf("action name = %q, want %q", d.Action.Name, tc.name)
			}
			switch {
			case tc.requeue < 0 && d.RequeueAfter != 0:
				t.Errorf("requeueAfter = %s, want none", d.RequeueAfter)
			case tc.requeue > 0 && d.RequeueAfter != tc.requeue:
				t.Errorf("requeueAfter = %s, want %s", d.RequeueAfter, tc.requeue)
			}
			if d.Status.ObservedGeneration != tc.m.Generation {
				t.Errorf("observedGeneration = %d, want %d", d.Status.ObservedGeneration, tc.m.Generation)
			}
			for _, c := range d.Status.Conditions {
				if c.ObservedGeneration != tc.m.Generation {
					t.Errorf("condition %s observedGeneration = %d, want %d", c.Type, c.ObservedGeneration, tc.m.Generation)
				}
			}
			if tc.check != nil {
				tc.check(t, d)
			}
		})
	}
}

// equalObjects is strict equality, for "the input was not mutated".
func equalObjects(a, b any) bool { return reflect.DeepEqual(a, b) }

// semanticEqual is the comparison the controller makes before it writes
// the status.
func semanticEqual(a, b any) bool { return equality.Semantic.DeepEqual(a, b) }

// cond returns the condition of that type, failing the test when absent.
func cond(t *testing.T, d Decision, typ string) metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(d.Status.Conditions, typ)
	if c == nil {
		t.Fatalf("no %s condition in %+v", typ, d.Status.Conditions)
	}
	return *c
}

func wantCond(t *testing.T, d Decision, typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	c := cond(t, d, typ)
	if c.Status != status || (reason != "" && c.Reason != reason) {
		t.Errorf("%s = %s/%s (%q), want %s/%s", typ, c.Status, c.Reason, c.Message, status, reason)
	}
	return c
}

func wantNoCond(t *testing.T, d Decision, typ string) {
	t.Helper()
	if c := meta.FindStatusCondition(d.Status.Conditions, typ); c != nil {
		t.Errorf("unexpected condition %+v", *c)
	}
}

func wantLastError(t *testing.T, d Decision, phase v1alpha1.Phase, reason string) {
	t.Helper()
	e := d.Status.LastError
	if e == nil {
		t.Fatalf("lastError is nil, want %s in %s", reason, phase)
	}
	if e.Phase != phase || e.Reason != reason {
		t.Errorf("lastError = %s/%s (%q), want %s/%s", e.Phase, e.Reason, e.Message, phase, reason)
	}
}

func wantEvidence(t *testing.T, d Decision, phase v1alpha1.Phase, now time.Duration) {
	t.Helper()
	ev := evidenceFor(d.Status, phase)
	if ev == nil {
		t.Fatalf("no evidence for %s", phase)
	}
	if !ev.ReachedAt.Equal(ptrTime(builders.At(now))) || ev.Observed == "" {
		t.Errorf("evidence for %s = %+v, want reached at %s with what was observed", phase, *ev, builders.At(now))
	}
}

func ptrTime(t metav1.Time) *metav1.Time { return &t }

func wantTime(t *testing.T, what string, got *metav1.Time, want time.Duration) {
	t.Helper()
	if got == nil || !got.Equal(builders.TP(want)) {
		t.Errorf("%s = %v, want %v", what, got, builders.At(want))
	}
}
