package statemachine

import (
	"fmt"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
)

// planned: a dry run (spec.planOnly) validated the migration and stored the
// plan of every object it would create; it rests here, the source
// untouched, until spec.planOnly is turned off (the real migration then
// validates again) or the spec changes (the plan is made again).
func (d *decider) planned() {
	plan := d.obs.Plan
	if !d.spec.PlanOnly || d.specChangedBeforeCutover() {
		if d.spec.PlanOnly && plan != nil {
			// The stored plan is stale: it goes before a new one is made.
			d.remove(ActionDeletePlan, plan.Ref.Name, plan.Ref)
			d.working("deleting the stale plan "+plan.Ref.Name, d.cfg.PollInterval)
			return
		}
		why := "spec.planOnly is off: validating again before the migration"
		if d.spec.PlanOnly {
			why = "the spec changed: validating and planning again"
		}
		d.setPhase(v1alpha1.PhaseValidating, why)
		return
	}
	if d.st.Plan == nil {
		d.st.Plan = &v1alpha1.PlanStatus{ConfigMapName: naming.PlanConfigMap(d.m.Name)}
	}
	p := d.st.Plan
	if plan == nil {
		d.act(ActionCreatePlan, p.ConfigMapName, 0)
		d.working("storing the plan in ConfigMap "+p.ConfigMapName, d.cfg.PollInterval)
		return
	}
	renderedAt := plan.RenderedAt
	p.RenderedAt, p.Objects = &renderedAt, plan.Objects
	d.wait(ReasonPlanOnly, fmt.Sprintf("the plan of the %d objects this migration would create is in ConfigMap %s (kubectl vmm plan %s); the source was not touched: set spec.planOnly to false to migrate",
		len(plan.Objects), p.ConfigMapName, d.m.Name), 0)
}

// PlannedStatus is the status m would have, on its way to success, when
// it creates each of its children: the disks and their staging claims, the
// first transfer and conversion attempts, the DataVolumes, the target VM,
// and the spec applied. The dry run renders the children from it, with
// the same functions the migration itself uses, so the plan is what a run
// creates. m must have been validated (status.source).
func PlannedStatus(m *v1alpha1.VirtualMachineMigration) v1alpha1.VirtualMachineMigrationStatus {
	d := newDecider(Input{Migration: m})
	d.st.AppliedSpec = m.Spec.DeepCopy()
	d.initDisks()
	d.st.Transfer = transferAttempt(m.Name, 1)
	if !d.spec.Conversion.Skip {
		d.st.Conversion = conversionAttempt(m.Name, 1)
	}
	d.nameDataVolumes()
	d.st.Verification = verificationAttempt(m.Name, 1)
	return *d.st
}
