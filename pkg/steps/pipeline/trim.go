package pipeline

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// cacheTransform is the transform of every child cache (ChildInformers).
// Every object loses its managedFields, which nothing reads. The kinds a
// migration leaves behind for good, its target VirtualMachine and instance,
// their DataVolumes and claims (which carry the migration's labels), keep
// only what the step reads of them: their metadata without annotations
// (KubeVirt's and CDI's), a claim's class, modes and requested size (what
// the DataVolume that adopts it repeats), a VM's run strategy and what it reports of its
// instance (status.created, printableStatus), an instance's phase, reason,
// node, interfaces (name, MAC, name in the guest, addresses, info source)
// and whether its guest agent connected (agentConnected), a
// DataVolume's phase, progress and the reasons and messages of its
// conditions that are not true (they say why an import waits; see
// dataVolumeMessage).
// A controller of thousands of finished migrations then holds a little of
// each rather than every VM's template and every instance's spec and status
// (bench-scale). Everything else the step reads (Jobs, their pods,
// ConfigMaps) lives only while its migration runs and is kept whole.
func cacheTransform(obj any) (any, error) {
	switch o := obj.(type) {
	case *kubevirtv1.VirtualMachine:
		t := &kubevirtv1.VirtualMachine{TypeMeta: o.TypeMeta, ObjectMeta: o.ObjectMeta}
		t.Spec.RunStrategy, t.Spec.Running = o.Spec.RunStrategy, o.Spec.Running
		t.Status.Created, t.Status.PrintableStatus = o.Status.Created, o.Status.PrintableStatus
		obj = t
	case *kubevirtv1.VirtualMachineInstance:
		t := &kubevirtv1.VirtualMachineInstance{TypeMeta: o.TypeMeta, ObjectMeta: o.ObjectMeta}
		t.Status.Phase, t.Status.Reason, t.Status.NodeName = o.Status.Phase, o.Status.Reason, o.Status.NodeName
		t.Status.Interfaces = trimInterfaces(o.Status.Interfaces)
		for _, c := range o.Status.Conditions {
			if c.Type == kubevirtv1.VirtualMachineInstanceAgentConnected {
				t.Status.Conditions = []kubevirtv1.VirtualMachineInstanceCondition{{Type: c.Type, Status: c.Status}}
			}
		}
		obj = t
	case *cdiv1.DataVolume:
		t := &cdiv1.DataVolume{TypeMeta: o.TypeMeta, ObjectMeta: o.ObjectMeta}
		t.Status.Phase, t.Status.Progress, t.Status.Conditions = o.Status.Phase, o.Status.Progress, trimDataVolumeConditions(o.Status.Conditions)
		obj = t
	case *corev1.PersistentVolumeClaim:
		t := &corev1.PersistentVolumeClaim{TypeMeta: o.TypeMeta, ObjectMeta: o.ObjectMeta}
		// What a DataVolume that adopts the claim repeats, and how the
		// Jobs attach it: class, modes, size.
		t.Spec.StorageClassName, t.Spec.VolumeMode, t.Spec.AccessModes = o.Spec.StorageClassName, o.Spec.VolumeMode, o.Spec.AccessModes
		t.Spec.Resources.Requests = o.Spec.Resources.Requests
		// Whether it is bound: a claim Pending holds a pod back
		// (claimProblem), and the in-place read vouches only for a
		// bound claim.
		t.Status.Phase = o.Status.Phase
		obj = t
	default:
		if acc, err := meta.Accessor(obj); err == nil {
			acc.SetManagedFields(nil)
		}
		return obj, nil
	}
	if acc, err := meta.Accessor(obj); err == nil {
		acc.SetManagedFields(nil)
		acc.SetAnnotations(nil)
	}
	return obj, nil
}

// trimDataVolumeConditions keeps of a DataVolume's conditions what
// dataVolumeMessage reads: the type, status, reason and message of those
// not true that say something. A finished import's Bound and Ready
// conditions, and every condition's timestamps, go.
func trimDataVolumeConditions(in []cdiv1.DataVolumeCondition) []cdiv1.DataVolumeCondition {
	var out []cdiv1.DataVolumeCondition
	for _, c := range in {
		if c.Status != corev1.ConditionTrue && (c.Message != "" || c.Reason != "") {
			out = append(out, cdiv1.DataVolumeCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message})
		}
	}
	return out
}

// trimInterfaces keeps of a VMI's interfaces what the network identity
// check reads: name, MAC, name in the guest, addresses, info source.
func trimInterfaces(in []kubevirtv1.VirtualMachineInstanceNetworkInterface) []kubevirtv1.VirtualMachineInstanceNetworkInterface {
	if len(in) == 0 {
		return nil
	}
	out := make([]kubevirtv1.VirtualMachineInstanceNetworkInterface, len(in))
	for i, x := range in {
		out[i] = kubevirtv1.VirtualMachineInstanceNetworkInterface{Name: x.Name, MAC: x.MAC, InterfaceName: x.InterfaceName,
			IP: x.IP, IPs: x.IPs, InfoSource: x.InfoSource}
	}
	return out
}

// transformChild sets cacheTransform on an informer. An informer that
// already runs refuses it and keeps its objects whole.
func transformChild(informer cache.SharedIndexInformer) {
	_ = informer.SetTransform(cacheTransform)
}
