package statemachine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/test/builders"
)

func planOnly(m *v1alpha1.VirtualMachineMigration) { m.Spec.PlanOnly = true }

// planned is a migration that validated with spec.planOnly.
func planned(mods ...builders.MigrationMod) *v1alpha1.VirtualMachineMigration {
	return newMigration(append([]builders.MigrationMod{planOnly, builders.Reached(v1alpha1.PhaseQueued), builders.InPhase(v1alpha1.PhasePlanned),
		builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
			s.AppliedSpec, s.SourceControl = nil, nil
			s.Plan = &v1alpha1.PlanStatus{ConfigMapName: naming.PlanConfigMap(builders.Name)}
		})}, mods...)...)
}

func storedPlan(o *Observation) {
	o.Plan = &PlanObservation{Ref: ref(KindConfigMap, naming.PlanConfigMap(builders.Name)), RenderedAt: builders.At(-time.Second),
		Objects: []v1alpha1.PlannedObject{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine", Name: builders.DefaultTarget}}}
}

func TestPlanOnly(t *testing.T) {
	runCases(t, map[string]decideCase{
		"validated with planOnly: Planned, never Queued": {
			m: newMigration(planOnly, builders.Reached(v1alpha1.PhaseValidating)), obs: newObs(sourceInventory),
			phase: v1alpha1.PhasePlanned, requeue: time.Millisecond,
			check: func(t *testing.T, d Decision) {
				require.NotNil(t, d.Status.Plan)
				assert.Equal(t, naming.PlanConfigMap(builders.Name), d.Status.Plan.ConfigMapName)
				assert.Nil(t, d.Status.AppliedSpec, "a plan commits to nothing")
				assert.Nil(t, d.Status.SourceControl, "a plan never touches the source")
			},
		},
		"Planned without its plan: store it": {
			m: planned(), obs: newObs(),
			phase: v1alpha1.PhasePlanned, action: ActionCreatePlan, name: naming.PlanConfigMap(builders.Name),
		},
		"Planned with its plan: rest, say where it is": {
			m: planned(), obs: newObs(storedPlan),
			phase: v1alpha1.PhasePlanned, requeue: -1,
			check: func(t *testing.T, d Decision) {
				wantCond(t, d, ConditionProgressing, metav1.ConditionFalse, ReasonPlanOnly)
				require.NotNil(t, d.Status.Plan)
				assert.Len(t, d.Status.Plan.Objects, 1)
				require.NotNil(t, d.Status.Plan.RenderedAt)
				assert.Equal(t, builders.At(-time.Second), *d.Status.Plan.RenderedAt)
			},
		},
		"planOnly turned off: validate again, then migrate": {
			m:     planned(builders.WithGeneration(2), builders.WithSpec(func(s *v1alpha1.VirtualMachineMigrationSpec) { s.PlanOnly = false })),
			obs:   newObs(storedPlan),
			phase: v1alpha1.PhaseValidating, requeue: time.Millisecond,
		},
		"spec changed while planning only: the stale plan goes first": {
			m: planned(builders.WithGeneration(2), builders.TargetName("renamed")), obs: newObs(storedPlan),
			phase: v1alpha1.PhasePlanned, action: ActionDeletePlan,
		},
		"spec changed, stale plan gone: validate and plan again": {
			m: planned(builders.WithGeneration(2), builders.TargetName("renamed")), obs: newObs(),
			phase: v1alpha1.PhaseValidating,
		},
	})
}

// TestPlannedStatus: the status a dry run renders from names every child
// as the migration itself names them.
func TestPlannedStatus(t *testing.T) {
	m := newMigration(planOnly, builders.Reached(v1alpha1.PhaseQueued), builders.InPhase(v1alpha1.PhasePlanned))
	st := PlannedStatus(m)
	require.Len(t, st.Disks, 2)
	for i, d := range st.Disks {
		assert.Equal(t, naming.DataVolume(builders.DefaultTarget, i), d.StagingClaim, "written in place, into the claim its DataVolume adopts")
		assert.Equal(t, naming.DataVolume(builders.DefaultTarget, i), d.DataVolume)
	}
	assert.Equal(t, naming.TransferJob(builders.Name, 1), st.Transfer.JobName)
	assert.Equal(t, naming.ConversionJob(builders.Name, 1), st.Conversion.JobName)
	require.NotNil(t, st.AppliedSpec)
	assert.Nil(t, m.Status.Transfer, "the migration itself is not changed")

	skip := PlannedStatus(newMigration(planOnly, builders.SkipConversion, builders.Reached(v1alpha1.PhaseQueued)))
	assert.Nil(t, skip.Conversion)
}
