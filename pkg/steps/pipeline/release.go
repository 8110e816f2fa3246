package pipeline

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// migrationLabels are the labels that tie an object to a live migration.
var migrationLabels = []string{v1alpha1.LabelMigrationName, v1alpha1.LabelMigrationUID, v1alpha1.LabelComponent}

// ReleaseTarget hands the target VM that a deleted migration keeps over
// to its owner: the migration's labels leave its DataVolumes, the VM and
// the VM's instance template, annotation AnnotationMigratedBy names the
// migration and AnnotationOutcome says how it ended (the VM's source
// annotations stay: a later migration of the same source tells a
// migrated VM from a failed attempt's kept copy by them). The VM goes last:
// once released it leaves the controller's caches and is not asked for
// again. An object already released, gone, or not this migration's is
// left alone. The claims CDI made keep the labels it copied from their
// DataVolumes, and a running instance those of the template it started
// from (the next start has none): the controller may not patch claims or
// instances, and is not given that right for labels.
func (s *Step) ReleaseTarget(ctx context.Context, m *v1alpha1.VirtualMachineMigration) error {
	meta := releasedMeta(m)
	for _, d := range m.Status.Disks {
		if d.DataVolume == "" {
			continue
		}
		if err := s.releaseDataVolume(ctx, m, d.DataVolume, meta); err != nil {
			return err
		}
	}
	vm, err := s.ourVM(ctx, m)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	// The cache keeps no template (trimmed): every VM of ours has one.
	patch := map[string]any{
		"metadata": withVersion(meta, vm.ResourceVersion),
		"spec":     map[string]any{"template": map[string]any{"metadata": map[string]any{"labels": nullLabels()}}},
	}
	return s.patchReleased("virtual machine", vm.Name, patch, func(p []byte) error {
		_, err := s.KubeVirt.KubevirtV1().VirtualMachines(m.Namespace).Patch(ctx, vm.Name, types.MergePatchType, p, strictPatch)
		return err
	})
}

// releaseDataVolume releases one of the target's DataVolumes.
func (s *Step) releaseDataVolume(ctx context.Context, m *v1alpha1.VirtualMachineMigration, name string, meta map[string]any) error {
	dv, err := s.Listers.DataVolumes.DataVolumes(m.Namespace).Get(name)
	if apierrors.IsNotFound(err) || (err == nil && !ours(dv, m.UID)) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading data volume %s/%s: %w", m.Namespace, name, err)
	}
	return s.patchReleased("data volume", name, map[string]any{"metadata": withVersion(meta, dv.ResourceVersion)}, func(p []byte) error {
		_, err := s.CDI.CdiV1beta1().DataVolumes(m.Namespace).Patch(ctx, name, types.MergePatchType, p, strictPatch)
		return err
	})
}

// patchReleased encodes and sends one release patch; an object deleted
// meanwhile needs none.
func (s *Step) patchReleased(what, name string, patch map[string]any, send func([]byte) error) error {
	data, err := json.Marshal(patch)
	if err != nil {
		return fmt.Errorf("encoding the release patch of %s %s: %w", what, name, err)
	}
	if err := send(data); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("handing %s %s over: %w", what, name, err)
	}
	return nil
}

// releasedMeta is the metadata merge patch of a released object: the
// migration's labels removed, AnnotationMigratedBy and AnnotationOutcome
// set.
func releasedMeta(m *v1alpha1.VirtualMachineMigration) map[string]any {
	return map[string]any{
		"labels": nullLabels(),
		"annotations": map[string]any{
			v1alpha1.AnnotationMigratedBy: m.Namespace + "/" + m.Name,
			v1alpha1.AnnotationOutcome:    outcome(m.Status.Phase),
		},
	}
}

// outcome is how a deleted migration in phase p ended, as
// AnnotationOutcome says it: it succeeded, it failed (its target kept
// because it had been started), or it was deleted before it ended.
func outcome(p v1alpha1.Phase) string {
	switch p {
	case v1alpha1.PhaseSucceeded:
		return v1alpha1.OutcomeSucceeded
	case v1alpha1.PhaseFailed:
		return v1alpha1.OutcomeFailed
	}
	return v1alpha1.OutcomeCancelled
}

// nullLabels removes the migration's labels in a merge patch.
func nullLabels() map[string]any {
	out := map[string]any{}
	for _, l := range migrationLabels {
		out[l] = nil
	}
	return out
}

// withVersion adds a resourceVersion precondition to a metadata patch.
func withVersion(meta map[string]any, version string) map[string]any {
	patched := map[string]any{"resourceVersion": version}
	for k, v := range meta {
		patched[k] = v
	}
	return patched
}
