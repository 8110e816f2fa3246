package controller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/test/builders"
)

// TestMarkDurations: a duration stored out of range gives the condition
// (and one event) whatever the phase; back in range clears it.
func TestMarkDurations(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	m := builders.Migration()
	m.Status.Phase = v1alpha1.PhaseTransferringDisks
	huge := v1alpha1.ParseDuration("9999999999h")
	m.Spec.Policy.StallTimeout = &huge

	dec := statemachine.Decision{Status: *m.Status.DeepCopy()}
	markDurations(m, &dec, now)
	c := meta.FindStatusCondition(dec.Status.Conditions, ConditionInvalidDuration)
	require.NotNil(t, c)
	assert.Equal(t, metav1.ConditionTrue, c.Status)
	assert.Contains(t, c.Message, `spec.policy.stallTimeout "9999999999h"`)
	require.Len(t, dec.Events, 1)
	assert.True(t, dec.Events[0].Warning)

	// Written: the next decision keeps it without a new event.
	m.Status = dec.Status
	dec = statemachine.Decision{Status: *m.Status.DeepCopy()}
	markDurations(m, &dec, now)
	assert.Empty(t, dec.Events)

	m.Spec.Policy.StallTimeout = v1alpha1.DurationOf(time.Hour)
	dec = statemachine.Decision{Status: *m.Status.DeepCopy()}
	markDurations(m, &dec, now)
	c = meta.FindStatusCondition(dec.Status.Conditions, ConditionInvalidDuration)
	require.NotNil(t, c)
	assert.Equal(t, metav1.ConditionFalse, c.Status)

	// A migration that never had it gets none.
	fresh := builders.Migration()
	dec = statemachine.Decision{Status: *fresh.Status.DeepCopy()}
	markDurations(fresh, &dec, now)
	assert.Nil(t, meta.FindStatusCondition(dec.Status.Conditions, ConditionInvalidDuration))
}
