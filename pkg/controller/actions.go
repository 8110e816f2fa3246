package controller

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/pkg/statemachine"
)

// execute carries out the one action a decision asked for.
func (c *Controller) execute(ctx context.Context, m *v1alpha1.VirtualMachineMigration, a statemachine.Action) error {
	switch a.Type {
	case statemachine.ActionAddFinalizer:
		return c.setFinalizer(ctx, m, true)
	case statemachine.ActionRemoveFinalizer:
		return c.setFinalizer(ctx, m, false)
	case statemachine.ActionDeleteJob:
		return c.deleteJobs(ctx, m, []string{a.Name})
	case statemachine.ActionDeleteDataVolume:
		return c.deleteDataVolumes(ctx, m, []string{a.Name})
	case statemachine.ActionDeleteStaging, statemachine.ActionDeleteChildren:
		return c.deleteChildren(ctx, m, a.Type == statemachine.ActionDeleteChildren)
	case statemachine.ActionDeleteVM:
		return c.deleteVM(ctx, m)
	case statemachine.ActionShutdownGuest, statemachine.ActionPowerOffSource, statemachine.ActionPowerOnSource, statemachine.ActionRemoveSnapshot:
		return c.executeSource(ctx, m, a)
	default:
		return c.executePipeline(ctx, m, a)
	}
}

func (c *Controller) executeSource(ctx context.Context, m *v1alpha1.VirtualMachineMigration, a statemachine.Action) error {
	s := c.steps.Source
	if s == nil {
		return fmt.Errorf("no vSphere source step is configured")
	}
	switch a.Type {
	case statemachine.ActionShutdownGuest:
		return s.ShutdownGuest(ctx, m)
	case statemachine.ActionPowerOffSource:
		return s.PowerOff(ctx, m)
	case statemachine.ActionPowerOnSource:
		return s.PowerOn(ctx, m)
	default:
		return s.RemoveSnapshot(ctx, m, a.Name)
	}
}

func (c *Controller) executePipeline(ctx context.Context, m *v1alpha1.VirtualMachineMigration, a statemachine.Action) error {
	p := c.steps.Pipeline
	if p == nil {
		return fmt.Errorf("no pipeline step is configured")
	}
	switch a.Type {
	case statemachine.ActionCreateStagingClaims:
		return p.CreateStagingClaims(ctx, m)
	case statemachine.ActionCreateTransferJob:
		return p.CreateTransferJob(ctx, m, a.Attempt)
	case statemachine.ActionCreateConversionJob:
		return p.CreateConversionJob(ctx, m, a.Attempt)
	case statemachine.ActionCreateDataVolumes:
		return p.CreateDataVolumes(ctx, m)
	case statemachine.ActionCreateVM:
		return p.CreateVM(ctx, m)
	case statemachine.ActionAdoptDataVolumes:
		return p.AdoptDataVolumes(ctx, m)
	case statemachine.ActionStartVM:
		return p.SetRunStrategy(ctx, m, statemachine.RunStrategyAlways)
	case statemachine.ActionHaltVM:
		return p.SetRunStrategy(ctx, m, statemachine.RunStrategyHalted)
	default:
		return fmt.Errorf("unknown action %q", a.Type)
	}
}

// setFinalizer adds or removes the controller's finalizer.
func (c *Controller) setFinalizer(ctx context.Context, m *v1alpha1.VirtualMachineMigration, present bool) error {
	has := slices.Contains(m.Finalizers, v1alpha1.FinalizerName)
	if has == present {
		return nil
	}
	upd := m.DeepCopy()
	if present {
		upd.Finalizers = append(upd.Finalizers, v1alpha1.FinalizerName)
	} else {
		upd.Finalizers = slices.DeleteFunc(upd.Finalizers, func(f string) bool { return f == v1alpha1.FinalizerName })
	}
	_, err := c.clients.Migration.MigrationV1alpha1().VirtualMachineMigrations(m.Namespace).Update(ctx, upd, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("updating finalizers: %w", err)
	}
	return nil
}

var background = metav1.DeletePropagationBackground

// deleteOptions deletes an object only if it is still the one observed.
func deleteOptions(uid types.UID) metav1.DeleteOptions {
	opts := metav1.DeleteOptions{PropagationPolicy: &background}
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	return opts
}

func ignoreGone(err error) error {
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

func (c *Controller) deleteJobs(ctx context.Context, m *v1alpha1.VirtualMachineMigration, names []string) error {
	for _, name := range names {
		job, err := c.jobs.Jobs(m.Namespace).Get(name)
		if apierrors.IsNotFound(err) || (err == nil && job.Labels[v1alpha1.LabelMigrationUID] != string(m.UID)) {
			continue
		}
		if err != nil {
			return fmt.Errorf("reading job %s: %w", name, err)
		}
		if err := ignoreGone(c.clients.Kube.BatchV1().Jobs(m.Namespace).Delete(ctx, name, deleteOptions(job.UID))); err != nil {
			return fmt.Errorf("deleting job %s: %w", name, err)
		}
	}
	return nil
}

func (c *Controller) deleteDataVolumes(ctx context.Context, m *v1alpha1.VirtualMachineMigration, names []string) error {
	for _, name := range names {
		dv, err := c.dataVolumes.DataVolumes(m.Namespace).Get(name)
		if apierrors.IsNotFound(err) || (err == nil && dv.Labels[v1alpha1.LabelMigrationUID] != string(m.UID)) {
			continue
		}
		if err != nil {
			return fmt.Errorf("reading data volume %s: %w", name, err)
		}
		if err := ignoreGone(c.clients.CDI.CdiV1beta1().DataVolumes(m.Namespace).Delete(ctx, name, deleteOptions(dv.UID))); err != nil {
			return fmt.Errorf("deleting data volume %s: %w", name, err)
		}
	}
	return nil
}

// deleteChildren deletes the staging objects (staging volumes, Jobs,
// ConfigMaps) and, with all, the DataVolumes no VM owns yet.
func (c *Controller) deleteChildren(ctx context.Context, m *v1alpha1.VirtualMachineMigration, all bool) error {
	var obs statemachine.Observation
	if err := c.gatherChildren(ctx, m, &obs); err != nil {
		return err
	}
	if err := c.deleteJobs(ctx, m, obs.Children.Jobs); err != nil {
		return err
	}
	for _, name := range obs.Children.ConfigMaps {
		if err := ignoreGone(c.clients.Kube.CoreV1().ConfigMaps(m.Namespace).Delete(ctx, name, deleteOptions(""))); err != nil {
			return fmt.Errorf("deleting config map %s: %w", name, err)
		}
	}
	for _, name := range obs.Children.StagingClaims {
		if err := ignoreGone(c.clients.Kube.CoreV1().PersistentVolumeClaims(m.Namespace).Delete(ctx, name, deleteOptions(""))); err != nil {
			return fmt.Errorf("deleting staging claim %s: %w", name, err)
		}
	}
	if err := c.deleteTransferAccess(ctx, m); err != nil {
		return err
	}
	if !all {
		return nil
	}
	if err := c.gatherTarget(m, &obs); err != nil {
		return err
	}
	return c.deleteDataVolumes(ctx, m, obs.Children.DataVolumes)
}

// deleteVM deletes the target VM, only if it is this migration's.
func (c *Controller) deleteVM(ctx context.Context, m *v1alpha1.VirtualMachineMigration) error {
	if m.Status.Target == nil {
		return nil
	}
	name := m.Status.Target.Name
	vm, err := c.vms.VirtualMachines(m.Namespace).Get(name)
	if apierrors.IsNotFound(err) || (err == nil && vm.Labels[v1alpha1.LabelMigrationUID] != string(m.UID)) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading virtual machine %s: %w", name, err)
	}
	if err := ignoreGone(c.clients.KubeVirt.KubevirtV1().VirtualMachines(m.Namespace).Delete(ctx, name, deleteOptions(vm.UID))); err != nil {
		return fmt.Errorf("deleting virtual machine %s: %w", name, err)
	}
	return nil
}

// deleteTransferAccess deletes the ServiceAccount, Role and RoleBinding of
// every transfer attempt, found by their deterministic names (the
// controller may not list them).
func (c *Controller) deleteTransferAccess(ctx context.Context, m *v1alpha1.VirtualMachineMigration) error {
	if m.Status.Transfer == nil {
		return nil
	}
	for attempt := int32(1); attempt <= m.Status.Transfer.Attempt; attempt++ {
		name := naming.TransferAccess(m.Name, attempt)
		deletes := []func() error{
			func() error {
				return c.clients.Kube.RbacV1().RoleBindings(m.Namespace).Delete(ctx, name, deleteOptions(""))
			},
			func() error { return c.clients.Kube.RbacV1().Roles(m.Namespace).Delete(ctx, name, deleteOptions("")) },
			func() error {
				return c.clients.Kube.CoreV1().ServiceAccounts(m.Namespace).Delete(ctx, name, deleteOptions(""))
			},
		}
		for _, del := range deletes {
			if err := ignoreGone(del()); err != nil {
				return fmt.Errorf("deleting transfer access %s: %w", name, err)
			}
		}
	}
	return nil
}
