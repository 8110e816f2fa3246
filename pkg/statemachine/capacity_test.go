package statemachine

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/test/builders"
)

// conversionFull observes every conversion slot taken.
func conversionFull(o *Observation) {
	o.ConversionCapacity = CapacityObservation{Full: true, Message: "4 of 4 conversion slots taken (--max-conversions=4)"}
}

// conversionFree observes a conversion slot free.
func conversionFree(o *Observation) {
	o.ConversionCapacity = CapacityObservation{Message: "2 of 4 conversion slots taken"}
}

// TestQueuedWaitsForConversionCapacity: the source is stopped only when a
// conversion slot is free too; a migration that skips the conversion
// needs none, and a missing transfer slot is said first.
func TestQueuedWaitsForConversionCapacity(t *testing.T) {
	m := func(opts ...builders.MigrationMod) *v1alpha1.VirtualMachineMigration {
		return newMigration(append([]builders.MigrationMod{builders.Reached(v1alpha1.PhaseQueued)}, opts...)...)
	}
	runCases(t, map[string]decideCase{
		"no conversion slot: wait, source untouched": {
			m: m(), obs: newObs(slot(true), conversionFull, sourceOn(true)),
			phase: v1alpha1.PhaseQueued, requeue: DefaultWaitInterval,
			check: func(t *testing.T, d Decision) {
				c := wantCond(t, d, ConditionProgressing, metav1.ConditionFalse, ReasonWaitingForConversionCapacity)
				assert.Contains(t, c.Message, "4 of 4 conversion slots taken", "the Progressing message says what holds the stop")
				assert.Nil(t, d.Status.AppliedSpec, "committed to the cutover (appliedSpec) without a conversion slot")
				assert.Nil(t, d.Status.SourceControl, "committed to the cutover (sourceControl) without a conversion slot")
			},
		},
		"no transfer slot and no conversion slot: the transfer slot is said": {
			m: m(), obs: newObs(slot(false), conversionFull, sourceOn(true)),
			phase: v1alpha1.PhaseQueued, requeue: DefaultWaitInterval,
			check: func(t *testing.T, d Decision) {
				wantCond(t, d, ConditionProgressing, metav1.ConditionFalse, ReasonWaitingForTransferSlot)
			},
		},
		"no conversion slot, conversion skipped: stop": {
			m: m(builders.SkipConversion), obs: newObs(slot(true), conversionFull, sourceOn(true)),
			phase: v1alpha1.PhaseStoppingSource, requeue: ms,
		},
		"conversion slot free: stop, the evidence says how many are taken": {
			m: m(), obs: newObs(slot(true), conversionFree, sourceOn(true)),
			phase: v1alpha1.PhaseStoppingSource, requeue: ms,
			check: func(t *testing.T, d Decision) {
				e := evidenceFor(d.Status, v1alpha1.PhaseQueued)
				if assert.NotNil(t, e, "the Queued evidence") {
					assert.Equal(t, "transfer slot available; conversion slot available (2 of 4 conversion slots taken); source poweredOn", e.Observed)
				}
			},
		},
	})
}

// TestHoldsConversionSlot: from the stop to the end of the conversion,
// unless the conversion is skipped or the migration is being deleted.
func TestHoldsConversionSlot(t *testing.T) {
	for phase, want := range map[v1alpha1.Phase]bool{
		v1alpha1.PhaseQueued: false, v1alpha1.PhaseStoppingSource: true, v1alpha1.PhaseTransferringDisks: true,
		v1alpha1.PhaseConverting: true, v1alpha1.PhaseImporting: false, v1alpha1.PhaseRollingBack: false, v1alpha1.PhaseFailed: false,
	} {
		assert.Equal(t, want, HoldsConversionSlot(newMigration(builders.InPhase(phase))), "phase %s", phase)
	}
	skipped := newMigration(builders.InPhase(v1alpha1.PhaseTransferringDisks), builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
		s.AppliedSpec = &v1alpha1.VirtualMachineMigrationSpec{Conversion: v1alpha1.ConversionSpec{Skip: true}}
	}))
	assert.False(t, HoldsConversionSlot(skipped), "the spec in force skips the conversion")
	assert.False(t, HoldsConversionSlot(newMigration(builders.InPhase(v1alpha1.PhaseConverting), builders.Deleted)), "being deleted")
}
