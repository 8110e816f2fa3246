package controller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/steps"
	"platform.example/vm-migration/test/builders"
)

// TestBusyEndpointDecidesNothing: a migration whose endpoint ran its limit
// of operations is looked at again in a moment, with no decision and no
// status written (nothing was learnt).
func TestBusyEndpointDecidesNothing(t *testing.T) {
	m := builders.Migration(builders.WithFinalizer, builders.InPhase(v1alpha1.PhaseValidating))
	src := &fakeSource{obs: statemachine.SourceObservation{Error: &statemachine.ObservedError{
		Class: statemachine.ErrorTransient, Reason: steps.ReasonEndpointBusy, Message: "vSphere endpoint vc:443 already runs 2 operations",
	}}}
	f := newFixture(t, src, m)
	after := f.sync(m)
	assert.Empty(t, f.writes)
	assert.GreaterOrEqual(t, after, time.Second)
	assert.Less(t, after, 3*time.Second)
}
