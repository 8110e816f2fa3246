package controller

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/preflight"
	"platform.example/vm-migration/pkg/statemachine"
)

// ConditionInvalidDuration is true while a duration of the policy in force
// is out of range (stored under the schema of an older release, which
// admitted values Go cannot hold): the message names each field, its
// stored value and the value used instead. Validation fails such a
// migration before its source is touched (preflight); one already past
// it goes on with the values the message names.
const ConditionInvalidDuration = "InvalidDuration"

// reasonDurationsInRange clears ConditionInvalidDuration.
const reasonDurationsInRange = "DurationsInRange"

// markDurations sets or clears ConditionInvalidDuration on the decision's
// status, from the spec in force, and adds a warning event when it turns
// true. It is pure, like the decision it completes.
func markDurations(m *v1alpha1.VirtualMachineMigration, dec *statemachine.Decision, now metav1.Time) {
	problems := m.SpecInForce().Policy.DurationProblems()
	conds := &dec.Status.Conditions
	if len(problems) == 0 {
		if c := meta.FindStatusCondition(*conds, ConditionInvalidDuration); c != nil && c.Status != metav1.ConditionFalse {
			meta.SetStatusCondition(conds, metav1.Condition{Type: ConditionInvalidDuration, Status: metav1.ConditionFalse,
				Reason: reasonDurationsInRange, Message: "every duration of the policy is in range", ObservedGeneration: m.Generation, LastTransitionTime: now})
		}
		return
	}
	msg := strings.Join(problems, "; ")
	if c := meta.FindStatusCondition(*conds, ConditionInvalidDuration); c == nil || c.Status != metav1.ConditionTrue || c.Message != msg {
		dec.Events = append(dec.Events, statemachine.Event{Warning: true, Reason: preflight.ReasonDurationOutOfRange, Message: msg})
	}
	meta.SetStatusCondition(conds, metav1.Condition{Type: ConditionInvalidDuration, Status: metav1.ConditionTrue,
		Reason: preflight.ReasonDurationOutOfRange, Message: msg, ObservedGeneration: m.Generation, LastTransitionTime: now})
}
