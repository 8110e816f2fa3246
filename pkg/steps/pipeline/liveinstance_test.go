package pipeline

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/test/builders"
)

// TestReadTargetInstanceAsksTheAPIServer: the target's instance is read
// from the API server, not the cache: one the cache has not delivered is
// found; none is none; one that provably belongs to something else (the
// label of another migration, another VM as its controller) is not the
// target's; one of the target's name that proves nothing either way is.
func TestReadTargetInstanceAsksTheAPIServer(t *testing.T) {
	m := migration("web-01", builders.LinuxBIOSInventory())
	m.Status.Phase, m.Status.Target.UID = v1alpha1.PhaseRollingBack, builders.TargetUID
	name := m.Status.Target.Name
	targetVM := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: m.Namespace, UID: builders.TargetUID}}
	otherVM := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: m.Namespace, UID: "uid-someone-elses"}}
	instance := func(mod func(*kubevirtv1.VirtualMachineInstance)) *kubevirtv1.VirtualMachineInstance {
		vmi := builders.VirtualMachineInstance(m, name, kubevirtv1.Running)
		vmi.Status.NodeName = "worker-2"
		if mod != nil {
			mod(vmi)
		}
		return vmi
	}
	owned := func(vm *kubevirtv1.VirtualMachine) func(*kubevirtv1.VirtualMachineInstance) {
		return func(vmi *kubevirtv1.VirtualMachineInstance) {
			delete(vmi.Labels, v1alpha1.LabelMigrationUID)
			vmi.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(vm, kubevirtv1.GroupVersion.WithKind("VirtualMachine"))}
		}
	}
	tests := map[string]struct {
		vmi   *kubevirtv1.VirtualMachineInstance
		found bool
	}{
		"the target's instance":               {vmi: instance(nil), found: true},
		"controlled by the target VM":         {vmi: instance(owned(targetVM)), found: true},
		"no label, no owner: it may be ours":  {vmi: instance(func(v *kubevirtv1.VirtualMachineInstance) { v.Labels = nil }), found: true},
		"none":                                {},
		"another migration's":                 {vmi: instance(func(v *kubevirtv1.VirtualMachineInstance) { v.Labels[v1alpha1.LabelMigrationUID] = "uid-other" })},
		"controlled by a VM that is not ours": {vmi: instance(owned(otherVM))},
	}
	for tn, tc := range tests {
		t.Run(tn, func(t *testing.T) {
			f := newFakeStep(t)
			if tc.vmi != nil {
				// Not mirrored into the caches: only the API server has it.
				tc.vmi.UID = types.UID("uid-vmi")
				f.Add(tc.vmi)
			}
			got := f.step.ReadTargetInstance(context.Background(), m)
			require.NotNil(t, got)
			require.Nil(t, got.Error)
			if !tc.found {
				assert.Nil(t, got.VMI)
				return
			}
			require.NotNil(t, got.VMI)
			assert.Equal(t, "Running", got.VMI.Phase)
			assert.Equal(t, "worker-2", got.VMI.NodeName)
		})
	}
}
