package pipeline

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// TestReleaseTarget: the kept target VM, its instance template and its
// DataVolumes lose the migration's labels and gain an annotation naming
// it; the VM's source annotations stay; a DataVolume of the same name
// that is not the migration's is left alone; releasing twice is harmless
// (issue 25: a VM kept after a cancel carried the deleted migration's
// labels).
func TestReleaseTarget(t *testing.T) {
	ctx := context.Background()
	m := windowsEFI()
	f := newFakeStep(t)
	require.NoError(t, f.step.CreateDataVolumes(ctx, m), "CreateDataVolumes")
	require.NoError(t, f.step.CreateVM(ctx, m), "CreateVM")
	foreign, err := f.CDI.CdiV1beta1().DataVolumes("apps").Get(ctx, m.Status.Disks[1].DataVolume, metav1.GetOptions{})
	require.NoError(t, err)
	foreign.Labels[v1alpha1.LabelMigrationUID] = "another-migration"
	_, err = f.CDI.CdiV1beta1().DataVolumes("apps").Update(ctx, foreign, metav1.UpdateOptions{})
	require.NoError(t, err)

	for i := range 2 {
		f.sync()
		// The caches hold VMs as the controller's do: trimmed, without
		// their template.
		vms := f.step.Listers.Caches["virtualmachines"]
		for _, o := range vms.List() {
			trimmed, err := cacheTransform(o)
			require.NoError(t, err)
			require.NoError(t, vms.Update(trimmed))
		}
		require.NoError(t, f.step.ReleaseTarget(ctx, m), "ReleaseTarget, run %d", i+1)
	}

	want := m.Namespace + "/" + m.Name
	vm, err := f.KV.KubevirtV1().VirtualMachines("apps").Get(ctx, m.Status.Target.Name, metav1.GetOptions{})
	require.NoError(t, err)
	for _, l := range migrationLabels {
		assert.NotContains(t, vm.Labels, l, "the VM's labels")
		assert.NotContains(t, vm.Spec.Template.ObjectMeta.Labels, l, "the VM template's labels")
	}
	assert.Equal(t, want, vm.Annotations[v1alpha1.AnnotationMigratedBy])
	assert.Equal(t, m.Status.Source.Name, vm.Annotations[v1alpha1.AnnotationSourceVM], "the source annotations stay")
	for i, d := range m.Status.Disks {
		dv, err := f.CDI.CdiV1beta1().DataVolumes("apps").Get(ctx, d.DataVolume, metav1.GetOptions{})
		require.NoError(t, err)
		if i == 1 {
			assert.Equal(t, "another-migration", dv.Labels[v1alpha1.LabelMigrationUID], "a DataVolume that is not the migration's")
			assert.NotContains(t, dv.Annotations, v1alpha1.AnnotationMigratedBy)
			continue
		}
		for _, l := range migrationLabels {
			assert.NotContains(t, dv.Labels, l, "DataVolume %s's labels", dv.Name)
		}
		assert.Equal(t, want, dv.Annotations[v1alpha1.AnnotationMigratedBy], "DataVolume %s", dv.Name)
	}

	// Gone already: nothing to do.
	require.NoError(t, f.KV.KubevirtV1().VirtualMachines("apps").Delete(ctx, vm.Name, metav1.DeleteOptions{}))
	f.sync()
	assert.NoError(t, f.step.ReleaseTarget(ctx, m), "a VM that is gone")
}
