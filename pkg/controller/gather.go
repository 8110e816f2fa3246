package controller

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/pkg/statemachine"
)

// gather builds the observation the decision needs. It never changes
// anything. Failures of the source are returned inside the observation,
// classified; only a failure to read the controller's own caches is an error.
func (c *Controller) gather(ctx context.Context, m *v1alpha1.VirtualMachineMigration) (statemachine.Observation, error) {
	var obs statemachine.Observation
	queued := m.Status.Phase == v1alpha1.PhaseQueued && m.DeletionTimestamp == nil
	if queued {
		slot, err := c.transferSlot(m)
		if err != nil {
			return obs, err
		}
		obs.TransferSlot = slot
	}
	need := statemachine.NeedsSource(m)
	if queued && !obs.TransferSlot.Available {
		// A migration waiting for a slot does not look at its source.
		need = statemachine.SourceNeedNothing
	}
	if need != statemachine.SourceNeedNothing {
		if c.steps.Source == nil {
			return obs, fmt.Errorf("no vSphere source step is configured")
		}
		obs.Source = c.steps.Source.Observe(ctx, m, need)
		if need == statemachine.SourceNeedInventory && obs.Source.Error == nil && obs.Source.Inventory != nil {
			findings, err := c.steps.Source.Preflight(ctx, m, obs.Source.Inventory)
			if err != nil {
				obs.Source.Error = &statemachine.ObservedError{Class: statemachine.ErrorTransient, Reason: "PreflightCheckFailed", Message: err.Error()}
			}
			obs.Preflight = findings
		}
	}
	if err := c.gatherChildren(ctx, m, &obs); err != nil {
		return obs, err
	}
	return obs, c.gatherTarget(m, &obs)
}

// ownSelector selects the objects carrying this migration's UID.
func ownSelector(m *v1alpha1.VirtualMachineMigration) labels.Selector {
	return labels.SelectorFromSet(labels.Set{v1alpha1.LabelMigrationUID: string(m.UID)})
}

func (c *Controller) gatherChildren(ctx context.Context, m *v1alpha1.VirtualMachineMigration, obs *statemachine.Observation) error {
	sel := ownSelector(m)
	claims, err := c.claims.PersistentVolumeClaims(m.Namespace).List(sel)
	if err != nil {
		return fmt.Errorf("listing staging claims: %w", err)
	}
	for _, pvc := range claims {
		// Only staging volumes: CDI copies a DataVolume's labels to the
		// target disk's claim, which must never be taken for staging.
		if pvc.Labels[v1alpha1.LabelComponent] == v1alpha1.ComponentStaging && pvc.DeletionTimestamp == nil {
			obs.Children.StagingClaims = append(obs.Children.StagingClaims, pvc.Name)
		}
	}
	jobs, err := c.jobs.Jobs(m.Namespace).List(sel)
	if err != nil {
		return fmt.Errorf("listing jobs: %w", err)
	}
	for _, job := range jobs {
		if job.DeletionTimestamp == nil {
			obs.Children.Jobs = append(obs.Children.Jobs, job.Name)
		}
	}
	cms, err := c.configMaps.ConfigMaps(m.Namespace).List(sel)
	if err != nil {
		return fmt.Errorf("listing config maps: %w", err)
	}
	for _, cm := range cms {
		if cm.DeletionTimestamp == nil {
			obs.Children.ConfigMaps = append(obs.Children.ConfigMaps, cm.Name)
		}
	}
	if m.Status.Transfer != nil && (m.DeletionTimestamp != nil || m.Status.Phase == v1alpha1.PhaseCleaningUp) {
		left, err := c.transferAccessLeft(ctx, m)
		if err != nil {
			return err
		}
		obs.Children.TransferAccess = left
	}
	if !readsJobs(m) {
		return nil
	}
	if t := m.Status.Transfer; t != nil {
		obs.TransferJob = c.readJob(ctx, m, t.JobName)
	}
	if cv := m.Status.Conversion; cv != nil && !cv.Skipped {
		obs.ConversionJob = c.readJob(ctx, m, cv.JobName)
	}
	return nil
}

// readsJobs reports whether the decision looks at the transfer and
// conversion Jobs: only while they run or may run (reading a Job reads its
// pods and progress from the API server, so finished ones are not re-read).
func readsJobs(m *v1alpha1.VirtualMachineMigration) bool {
	if m.DeletionTimestamp != nil || m.Spec.Policy.Paused {
		return false
	}
	switch m.Status.Phase {
	case v1alpha1.PhaseTransferringDisks, v1alpha1.PhaseConverting, v1alpha1.PhaseRollingBack:
		return true
	}
	return false
}

// transferAccessLeft lists the ServiceAccounts of the migration's transfer
// attempts that still exist, read by their deterministic names (the
// controller may not list ServiceAccounts). Deleting the staging objects
// ends with them, so a cleanup cut short (a crash, an error) between the
// ConfigMaps and the ServiceAccount is seen and finished.
func (c *Controller) transferAccessLeft(ctx context.Context, m *v1alpha1.VirtualMachineMigration) ([]string, error) {
	var left []string
	for attempt := int32(1); attempt <= m.Status.Transfer.Attempt; attempt++ {
		name := naming.TransferAccess(m.Name, attempt)
		sa, err := c.clients.Kube.CoreV1().ServiceAccounts(m.Namespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("reading service account %s: %w", name, err)
		case sa.Labels[v1alpha1.LabelMigrationUID] == string(m.UID):
			left = append(left, name)
		}
	}
	return left, nil
}

// readJob observes a Job of this migration by name; nil when absent.
func (c *Controller) readJob(ctx context.Context, m *v1alpha1.VirtualMachineMigration, name string) *statemachine.JobObservation {
	job, err := c.jobs.Jobs(m.Namespace).Get(name)
	if err != nil || job.Labels[v1alpha1.LabelMigrationUID] != string(m.UID) || job.DeletionTimestamp != nil {
		return nil
	}
	var o statemachine.JobObservation
	if c.steps.Pipeline != nil {
		o = c.steps.Pipeline.ReadJob(ctx, m, job)
	} else {
		o = JobState(job)
	}
	o.Name = job.Name
	return &o
}

// JobState reads a Job's terminal conditions into an observation.
func JobState(job *batchv1.Job) statemachine.JobObservation {
	o := statemachine.JobObservation{Name: job.Name}
	for _, cond := range job.Status.Conditions {
		if cond.Status != corev1.ConditionTrue {
			continue
		}
		switch cond.Type {
		case batchv1.JobComplete:
			o.Succeeded = true
		case batchv1.JobFailed:
			o.Failed = true
			o.Message = fmt.Sprintf("%s: %s", cond.Reason, cond.Message)
		}
	}
	return o
}

func (c *Controller) gatherTarget(m *v1alpha1.VirtualMachineMigration, obs *statemachine.Observation) error {
	if m.Status.Target == nil || m.Status.Target.Name == "" {
		return nil
	}
	name := m.Status.Target.Name
	dvs, err := c.dataVolumes.DataVolumes(m.Namespace).List(ownSelector(m))
	if err != nil {
		return fmt.Errorf("listing data volumes: %w", err)
	}
	for _, dv := range dvs {
		if dv.Labels[v1alpha1.LabelComponent] != v1alpha1.ComponentImport || dv.DeletionTimestamp != nil {
			continue
		}
		owner := metav1.GetControllerOf(dv)
		owned := owner != nil && owner.Kind == "VirtualMachine" && owner.Name == name
		if obs.DataVolumes == nil {
			obs.DataVolumes = map[string]statemachine.DataVolumeObservation{}
		}
		obs.DataVolumes[dv.Name] = statemachine.DataVolumeObservation{
			Phase: string(dv.Status.Phase), Progress: string(dv.Status.Progress), OwnedByVM: owned,
		}
		if !owned {
			obs.Children.DataVolumes = append(obs.Children.DataVolumes, dv.Name)
		}
	}
	vm, err := c.vms.VirtualMachines(m.Namespace).Get(name)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("reading virtual machine %s: %w", name, err)
	case vm.DeletionTimestamp == nil:
		strategy := ""
		if vm.Spec.RunStrategy != nil {
			strategy = string(*vm.Spec.RunStrategy)
		}
		obs.VM = &statemachine.VMObservation{
			Ours:        vm.Labels[v1alpha1.LabelMigrationUID] == string(m.UID),
			UID:         string(vm.UID),
			RunStrategy: strategy,
		}
	}
	vmi, err := c.vmis.VirtualMachineInstances(m.Namespace).Get(name)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("reading virtual machine instance %s: %w", name, err)
	default:
		agent := false
		for _, cond := range vmi.Status.Conditions {
			if cond.Type == "AgentConnected" && cond.Status == corev1.ConditionTrue {
				agent = true
			}
		}
		obs.VMI = &statemachine.VMIObservation{Phase: string(vmi.Status.Phase), AgentConnected: agent}
	}
	return nil
}
