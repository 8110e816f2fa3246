package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
)

// act carries out the one action a decision asked for. A conflict (the
// object changed under it) is not a failure: the informer brings the
// change and a new reconcile.
func (c *Controller) act(ctx context.Context, m *v1alpha1.VirtualMachineMigration, a statemachine.Action) error {
	if a.Type == statemachine.ActionNone {
		return nil
	}
	klog.FromContext(ctx).V(2).Info("acting", "action", a.Type, "name", a.Name, "attempt", a.Attempt, "objects", len(a.Objects))
	err := c.execute(ctx, m, a)
	recordAction(a.Type, err)
	if apierrors.IsConflict(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", a.Type, err)
	}
	actionsTotal.WithLabelValues(string(a.Type)).Inc()
	return nil
}

// execute dispatches an action to the step that owns what it changes.
func (c *Controller) execute(ctx context.Context, m *v1alpha1.VirtualMachineMigration, a statemachine.Action) error {
	src, p := c.steps.Source, c.steps.Pipeline
	switch a.Type {
	case statemachine.ActionAddFinalizer:
		return c.setFinalizer(ctx, m, true)
	case statemachine.ActionRemoveFinalizer:
		return c.setFinalizer(ctx, m, false)
	case statemachine.ActionShutdownGuest:
		return src.ShutdownGuest(ctx, m)
	case statemachine.ActionPowerOffSource:
		return src.PowerOff(ctx, m)
	case statemachine.ActionPowerOnSource:
		return src.PowerOn(ctx, m)
	case statemachine.ActionRemoveSnapshot:
		return src.RemoveSnapshot(ctx, m, a.Name)
	case statemachine.ActionDeleteJob, statemachine.ActionDeleteDataVolume, statemachine.ActionDeleteVM,
		statemachine.ActionDeleteStaging, statemachine.ActionDeleteChildren, statemachine.ActionDeletePlan:
		return p.Delete(ctx, m, a.Objects)
	case statemachine.ActionDeleteStaleProof:
		return p.DeleteStaleProof(ctx, m, a.Objects)
	}
	return c.executeCreate(ctx, m, a)
}

// executeCreate dispatches the pipeline's create and change actions.
func (c *Controller) executeCreate(ctx context.Context, m *v1alpha1.VirtualMachineMigration, a statemachine.Action) error {
	p := c.steps.Pipeline
	switch a.Type {
	case statemachine.ActionCreateStagingClaims:
		return p.CreateStagingClaims(ctx, m)
	case statemachine.ActionCreateTransferJob:
		return p.CreateTransferJob(ctx, m, a.Attempt)
	case statemachine.ActionCreateConversionJob:
		return p.CreateConversionJob(ctx, m, a.Attempt)
	case statemachine.ActionCreateDataVolumes:
		return p.CreateDataVolumes(ctx, m)
	case statemachine.ActionCreateVerificationJob:
		return p.CreateVerificationJob(ctx, m, a.Attempt)
	case statemachine.ActionCreateVM:
		return p.CreateVM(ctx, m)
	case statemachine.ActionAdoptDataVolumes:
		return p.AdoptDataVolumes(ctx, m)
	case statemachine.ActionStartVM:
		return p.SetRunStrategy(ctx, m, statemachine.RunStrategyAlways)
	case statemachine.ActionHaltVM:
		return p.SetRunStrategy(ctx, m, statemachine.RunStrategyHalted)
	case statemachine.ActionReleaseTarget:
		return p.ReleaseTarget(ctx, m)
	case statemachine.ActionCreatePlan:
		return p.CreatePlan(ctx, m)
	case statemachine.ActionCreateProofJob:
		return p.CreateProofJob(ctx, m, a.Name)
	}
	return fmt.Errorf("unknown action %q", a.Type)
}

// setFinalizer adds or removes the controller's finalizer with a merge
// patch of metadata.finalizers (and the resourceVersion, so it applies to
// the object observed): a typed Update would send back the whole spec as
// the client re-encodes it, and the API server would count that as a spec
// change (a new generation nobody made).
func (c *Controller) setFinalizer(ctx context.Context, m *v1alpha1.VirtualMachineMigration, present bool) error {
	has := slices.Contains(m.Finalizers, v1alpha1.FinalizerName)
	if has == present {
		return nil
	}
	if isSummary(m) {
		return errSummaryWrite
	}
	finalizers := slices.DeleteFunc(slices.Clone(m.Finalizers), func(f string) bool { return f == v1alpha1.FinalizerName })
	if present {
		finalizers = append(finalizers, v1alpha1.FinalizerName)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"finalizers": finalizers, "resourceVersion": m.ResourceVersion}})
	if err != nil {
		return fmt.Errorf("encoding the finalizers patch: %w", err)
	}
	_, err = c.clients.Migration.MigrationV1alpha1().VirtualMachineMigrations(m.Namespace).Patch(ctx, m.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("updating finalizers: %w", err)
	}
	return nil
}
