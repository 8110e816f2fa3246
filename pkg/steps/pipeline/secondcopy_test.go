package pipeline

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// TestSecondCopyGetsNewMACs (issue 50, item 3): a second copy of a source
// already migrated, asked for with spec.target.secondCopy, never keeps
// the source's MAC addresses (the first copy runs with them), whatever
// preserveMACAddresses says; KubeVirt gives its interfaces new ones.
func TestSecondCopyGetsNewMACs(t *testing.T) {
	m := linuxBIOS()
	vm, err := RenderVirtualMachine(m)
	require.NoError(t, err)
	require.NotEmpty(t, vm.Spec.Template.Spec.Domain.Devices.Interfaces)
	assert.NotEmpty(t, vm.Spec.Template.Spec.Domain.Devices.Interfaces[0].MacAddress, "a first copy keeps the source's MAC")

	for _, s := range []*v1alpha1.VirtualMachineMigrationSpec{&m.Spec, m.Status.AppliedSpec} {
		if s != nil {
			s.Target.SecondCopy, s.Target.PreserveMACAddresses = true, ptrTo(true)
		}
	}
	vm, err = RenderVirtualMachine(m)
	require.NoError(t, err)
	for _, iface := range vm.Spec.Template.Spec.Domain.Devices.Interfaces {
		assert.Empty(t, iface.MacAddress, "interface %s of a second copy keeps the source's MAC", iface.Name)
	}
	assert.False(t, m.SpecInForce().Target.PreserveMACs(), "PreserveMACs of a second copy")
}

// TestVMCarriesSourceInstanceUUID: the migrated VM carries its source's
// instance UUID, by which a later migration of the same source finds it.
func TestVMCarriesSourceInstanceUUID(t *testing.T) {
	m := linuxBIOS()
	vm, err := RenderVirtualMachine(m)
	require.NoError(t, err)
	assert.Equal(t, m.Status.Source.InstanceUUID, vm.Annotations[v1alpha1.AnnotationSourceInstanceUUID], "the VM's annotations %v", vm.Annotations)
}

// TestReleaseTargetSaysTheOutcome: the VM a deleted migration hands over
// says how that migration ended, so that the next migration of the same
// source tells a migrated VM from a failed attempt's kept copy.
func TestReleaseTargetSaysTheOutcome(t *testing.T) {
	for phase, want := range map[v1alpha1.Phase]string{
		v1alpha1.PhaseSucceeded:  v1alpha1.OutcomeSucceeded,
		v1alpha1.PhaseFailed:     v1alpha1.OutcomeFailed,
		v1alpha1.PhaseCancelling: v1alpha1.OutcomeCancelled,
	} {
		t.Run(string(phase), func(t *testing.T) {
			ctx := context.Background()
			m := windowsEFI()
			m.Status.Phase = phase
			f := newFakeStep(t)
			require.NoError(t, f.step.CreateDataVolumes(ctx, m), "CreateDataVolumes")
			require.NoError(t, f.step.CreateVM(ctx, m), "CreateVM")
			f.sync()
			require.NoError(t, f.step.ReleaseTarget(ctx, m), "ReleaseTarget")
			vm, err := f.KV.KubevirtV1().VirtualMachines("apps").Get(ctx, m.Status.Target.Name, metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, want, vm.Annotations[v1alpha1.AnnotationOutcome], "the released VM's annotations %v", vm.Annotations)
		})
	}
}
