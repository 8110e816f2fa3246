package pipeline

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
)

// TestNoDryRunWhileWaitingForConversionCapacity (issue 50 item 4): the dry
// run right before the stop is sent once the stop may come, not at every
// look of a migration waiting in Queued for a transfer slot or for
// conversion capacity (a paced wave sent each waiting migration's dry run
// every wait interval: 156 API requests per migration instead of 75 in
// bench-scale).
func TestNoDryRunWhileWaitingForConversionCapacity(t *testing.T) {
	m := validating("web-01")
	m.Status.Phase = v1alpha1.PhaseQueued
	f := newFakeStep(t)
	f.step.Config.DryRun = true
	sent := dryRunAnswers(t, f, func(string, string) error { return nil })
	for name, tc := range map[string]struct {
		obs  statemachine.Observation
		sent bool
	}{
		"no transfer slot": {obs: statemachine.Observation{}},
		"no conversion capacity": {obs: statemachine.Observation{TransferSlot: statemachine.SlotObservation{Available: true},
			ConversionCapacity: statemachine.CapacityObservation{Full: true, Message: "2 of 2 conversion slots taken"}}},
		"both free: right before the stop": {obs: statemachine.Observation{TransferSlot: statemachine.SlotObservation{Available: true}}, sent: true},
	} {
		*sent = nil
		obs := tc.obs
		_, err := f.step.ObserveCluster(context.Background(), m, m.Status.Source, &obs)
		require.NoError(t, err, name)
		assert.Equal(t, tc.sent, obs.DryRun != nil, "%s: a dry run observed", name)
		assert.Equal(t, tc.sent, len(*sent) > 0, "%s: dry run requests sent: %v", name, *sent)
	}
}
