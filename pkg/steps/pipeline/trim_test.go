package pipeline

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/test/builders"
)

// fullChildren are m's children as the API server returns them, with the
// fields the step does not read filled in as well.
func fullChildren(m *v1alpha1.VirtualMachineMigration, vmName string, phase kubevirtv1.VirtualMachineInstancePhase) []runtime.Object {
	managed := []metav1.ManagedFieldsEntry{{Manager: "virt-controller", Operation: metav1.ManagedFieldsOperationUpdate}}
	vm := builders.VirtualMachine(m, vmName, kubevirtv1.RunStrategyAlways)
	vm.ManagedFields = managed
	vm.Spec.Template = &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: kubevirtv1.VirtualMachineInstanceSpec{
		Domain: kubevirtv1.DomainSpec{CPU: &kubevirtv1.CPU{Cores: 4}}}}
	vm.Status.PrintableStatus, vm.Status.Created, vm.Status.Ready = kubevirtv1.VirtualMachineStatusRunning, true, true
	vm.Status.Conditions = []kubevirtv1.VirtualMachineCondition{{Type: kubevirtv1.VirtualMachineReady, Status: corev1.ConditionTrue}}
	vmi := builders.VirtualMachineInstance(m, vmName, phase)
	vmi.Spec.Domain.CPU = &kubevirtv1.CPU{Cores: 4}
	vmi.Status.Conditions = []kubevirtv1.VirtualMachineInstanceCondition{{Type: "AgentConnected", Status: corev1.ConditionTrue,
		Reason: "Connected", Message: "the guest agent connected", LastTransitionTime: metav1.Now()}}
	vm.Annotations = map[string]string{"kubevirt.io/latest-observed-api-version": "v1"}
	vmi.Annotations = map[string]string{"kubevirt.io/latest-observed-api-version": "v1"}
	vmi.Status.NodeName = "node-1"
	vmi.Status.Interfaces = []kubevirtv1.VirtualMachineInstanceNetworkInterface{{Name: "net-0", MAC: "00:50:56:aa:bb:01",
		IP: "192.168.10.21", IPs: []string{"192.168.10.21", "fe80::250:56ff:feaa:bb01"}, InterfaceName: "ens192",
		InfoSource: "domain, guest-agent", PodInterfaceName: "pod6b86b273ff3", QueueCount: 1, LinkState: "up"}}
	vmi.Status.Reason = "NodeUnresponsive"
	vmi.DeletionTimestamp = &metav1.Time{Time: builders.T0}
	vmi.Finalizers = []string{"kubevirt.io/virtualMachineControllerFinalize"}
	var objs []runtime.Object
	for i, d := range m.Status.Disks {
		dv := builders.DataVolume(m, d.DataVolume, cdiv1.Succeeded, vm)
		if i == 0 {
			dv.Status.Phase, dv.Status.Progress = cdiv1.CloneInProgress, "42.0%"
			dv.Status.Conditions = []cdiv1.DataVolumeCondition{
				{Type: cdiv1.DataVolumeBound, Status: corev1.ConditionTrue, Reason: "Bound", Message: "PVC bound", LastTransitionTime: metav1.Now()},
				{Type: cdiv1.DataVolumeRunning, Status: corev1.ConditionFalse, Reason: "ErrExceededQuota", Message: "exceeded quota",
					LastHeartbeatTime: metav1.Now()}}
			dv.OwnerReferences = nil
		}
		dv.Spec.Storage = &cdiv1.StorageSpec{StorageClassName: ptr.To("fast")}
		dv.ManagedFields = managed
		claim := builders.StagingClaim(m, d.StagingClaim)
		claim.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}
		claim.Status.Phase = corev1.ClaimBound
		target := builders.StagingClaim(m, d.DataVolume)
		target.Labels[v1alpha1.LabelComponent] = v1alpha1.ComponentImport
		dv.Annotations = map[string]string{"cdi.kubevirt.io/storage.usePopulator": "true"}
		target.Annotations = map[string]string{"cdi.kubevirt.io/storage.pod.phase": "Succeeded"}
		objs = append(objs, dv, claim, target)
	}
	return append(objs, vm, vmi)
}

// trimmed passes copies of objs through the cache transform.
func trimmed(t *testing.T, objs []runtime.Object) []runtime.Object {
	out := make([]runtime.Object, 0, len(objs))
	for _, o := range objs {
		got, err := cacheTransform(o.DeepCopyObject())
		require.NoError(t, err)
		out = append(out, got.(runtime.Object))
	}
	return out
}

// TestTrimmedCachesObserveTheSame: what the step observes, and what it
// decides to patch, from caches trimmed by cacheTransform is what it
// observes from whole objects, in the phases that read the target.
func TestTrimmedCachesObserveTheSame(t *testing.T) {
	tests := []struct {
		name  string
		phase v1alpha1.Phase
		vmi   kubevirtv1.VirtualMachineInstancePhase
	}{
		{"importing", v1alpha1.PhaseImporting, kubevirtv1.Pending},
		{"starting", v1alpha1.PhaseStarting, kubevirtv1.Running},
		{"cleaning up", v1alpha1.PhaseCleaningUp, kubevirtv1.Running},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := migration("web-01", builders.LinuxBIOSInventory(), func(m *v1alpha1.VirtualMachineMigration) { m.Status.Phase = tt.phase })
			objs := fullChildren(m, m.Status.Target.Name, tt.vmi)
			var whole, slim statemachine.Observation
			require.NoError(t, newFakeStep(t, objs...).step.Observe(m, &whole))
			require.NoError(t, newFakeStep(t, trimmed(t, objs)...).step.Observe(m, &slim))
			require.NotNil(t, whole.VM)
			require.NotNil(t, whole.VMI)
			require.NotEmpty(t, whole.DataVolumes)
			assert.Equal(t, []v1alpha1.TargetInterface{{Name: "net-0", MAC: "00:50:56:aa:bb:01", InterfaceName: "ens192",
				IPAddresses: []string{"192.168.10.21", "fe80::250:56ff:feaa:bb01"}, InfoSource: "domain, guest-agent"}},
				whole.VMI.Interfaces, "the interfaces as KubeVirt reports them")
			assert.Equal(t, whole, slim)
		})
	}
}

// TestCacheTransformKeepsLittle: the long-lived kinds lose what the step
// does not read, every kind its managedFields; other kinds keep the rest.
func TestCacheTransformKeepsLittle(t *testing.T) {
	m := migration("web-01", builders.LinuxBIOSInventory())
	objs := trimmed(t, fullChildren(m, m.Status.Target.Name, kubevirtv1.Running))
	for _, o := range objs {
		acc, err := meta.Accessor(o)
		require.NoError(t, err)
		assert.Empty(t, acc.GetManagedFields())
		assert.NotEmpty(t, acc.GetLabels(), "labels are kept")
		assert.Empty(t, acc.GetAnnotations(), "annotations are dropped")
		switch x := o.(type) {
		case *kubevirtv1.VirtualMachine:
			assert.Nil(t, x.Spec.Template)
			assert.Empty(t, x.Status.Conditions, "the VM's conditions are dropped")
			assert.Equal(t, kubevirtv1.VirtualMachineStatusRunning, x.Status.PrintableStatus, "what the VM reports of its instance is kept: the restore reads it")
			assert.True(t, x.Status.Created)
			assert.Equal(t, kubevirtv1.RunStrategyAlways, *x.Spec.RunStrategy)
		case *kubevirtv1.VirtualMachineInstance:
			assert.Nil(t, x.Spec.Domain.CPU)
			assert.Equal(t, "node-1", x.Status.NodeName, "the node is kept: the wait for the instance names it")
			assert.Equal(t, "NodeUnresponsive", x.Status.Reason, "the reason is kept: it says the node was declared lost")
			assert.Equal(t, []kubevirtv1.VirtualMachineInstanceCondition{{Type: "AgentConnected", Status: corev1.ConditionTrue}}, x.Status.Conditions)
		case *cdiv1.DataVolume:
			assert.Nil(t, x.Spec.Storage)
			assert.Equal(t, []cdiv1.DataVolumeCondition{{Type: cdiv1.DataVolumeRunning, Status: corev1.ConditionFalse,
				Reason: "ErrExceededQuota", Message: "exceeded quota"}}, x.Status.Conditions,
				"what says why the import waits is kept; a true condition and the timestamps go")
		case *corev1.PersistentVolumeClaim:
			assert.Empty(t, x.Spec.VolumeName)
			assert.Empty(t, x.Status.Capacity, "of its status, only its phase is kept")
			assert.Empty(t, x.Status.AccessModes)
		}
	}
	cm := builders.ConfigMap(m, "progress", v1alpha1.ComponentTransfer, map[string]string{"progress": "{}"})
	cm.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "vm-transfer"}}
	got, err := cacheTransform(cm)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"progress": "{}"}, got.(*corev1.ConfigMap).Data)
	assert.Empty(t, got.(*corev1.ConfigMap).ManagedFields)
}

// TestCacheTransformKeepsTheClaimsProperties: a claim keeps its class,
// modes and requested size (what a DataVolume adopting it repeats, and
// how the Jobs attach it) and its phase (a Pending claim holds a pod back;
// the in-place read vouches only for a bound claim), nothing else of its
// spec and status.
func TestCacheTransformKeepsTheClaimsProperties(t *testing.T) {
	m := onePass(linuxBIOS())
	claims, err := RenderStagingClaims(m, ClaimDefaults{})
	require.NoError(t, err)
	pvc := claims[0].DeepCopy()
	pvc.Spec.VolumeName = "pv-1"
	pvc.Status.Phase = corev1.ClaimBound
	pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("20Gi")}
	got, err := cacheTransform(pvc)
	require.NoError(t, err)
	slim := got.(*corev1.PersistentVolumeClaim)
	assert.Equal(t, claims[0].Spec, slim.Spec, "class, modes and size kept")
	assert.Equal(t, corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}, slim.Status, "its phase kept, nothing else")
}
