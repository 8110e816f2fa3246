package statemachine

import (
	"testing"

	"github.com/stretchr/testify/assert"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/test/builders"
)

// TestCleaningUpWaitsForTransferAccess: a cleanup cut short after the
// staging claims, Jobs and ConfigMaps were deleted but before the transfer
// attempt's ServiceAccount was (a controller crash, seen end to end in
// test/e2e TestControllerCrashes) must delete again, not succeed and leak it.
func TestCleaningUpWaitsForTransferAccess(t *testing.T) {
	left := Observation{Children: Children{TransferAccess: refs(KindServiceAccount, builders.Name+"-transfer-1")}}
	runCases(t, map[string]decideCase{
		"transfer access left: delete staging again": {
			m: newMigration(builders.Reached(v1alpha1.PhaseCleaningUp)), obs: left,
			phase: v1alpha1.PhaseCleaningUp, action: ActionDeleteStaging, requeue: DefaultPollInterval,
		},
		"Retain policy: transfer access kept too": {
			m: newMigration(builders.Retain, builders.Reached(v1alpha1.PhaseCleaningUp)), obs: left,
			phase: v1alpha1.PhaseSucceeded,
		},
	})
	assert.Equal(t, 1, left.Children.Count(), "Count() with one ServiceAccount left, want 1 (cancellation waits on it)")
}
