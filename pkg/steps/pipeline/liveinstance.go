package pipeline

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/steps"
)

// ReadTargetInstance reads the target's VirtualMachineInstance from the
// API server itself, not the cache, which can lag behind KubeVirt: the
// decision powers a rolled-back source on again only when this read too
// finds none (statemachine.NeedsLiveTargetInstance says when it is
// asked for). An instance that provably belongs to something else (the
// label of another migration, or a VirtualMachine owner that is not the
// target) counts as none; any other of the target's name counts. A
// failed read is returned classified, and keeps the source off.
func (s *Step) ReadTargetInstance(ctx context.Context, m *v1alpha1.VirtualMachineMigration) *statemachine.LiveVMIObservation {
	if m.Status.Target == nil || m.Status.Target.Name == "" {
		return &statemachine.LiveVMIObservation{}
	}
	name := m.Status.Target.Name
	vmi, err := s.KubeVirt.KubevirtV1().VirtualMachineInstances(m.Namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return &statemachine.LiveVMIObservation{}
	case err != nil:
		e := steps.Classify(fmt.Errorf("reading virtual machine instance %s/%s from the API server: %w", m.Namespace, name, err))
		return &statemachine.LiveVMIObservation{Error: &e}
	case foreignInstance(vmi, m):
		return &statemachine.LiveVMIObservation{}
	}
	return &statemachine.LiveVMIObservation{VMI: vmiObservation(vmi)}
}

// foreignInstance says an instance provably is not the target's: it
// carries another migration's UID label, or its controller is a
// VirtualMachine other than the target (whose UID status records).
func foreignInstance(vmi *kubevirtv1.VirtualMachineInstance, m *v1alpha1.VirtualMachineMigration) bool {
	if uid, ok := vmi.Labels[v1alpha1.LabelMigrationUID]; ok && uid != string(m.UID) {
		return true
	}
	owner := metav1.GetControllerOf(vmi)
	target := m.Status.Target.UID
	return owner != nil && owner.Kind == "VirtualMachine" && target != "" && owner.UID != target
}

// vmiObservation is what the decisions read of an instance.
func vmiObservation(vmi *kubevirtv1.VirtualMachineInstance) *statemachine.VMIObservation {
	return &statemachine.VMIObservation{Phase: string(vmi.Status.Phase), AgentConnected: agentConnected(vmi.Status.Conditions),
		Reason: vmi.Status.Reason, NodeName: vmi.Status.NodeName, Deleting: vmi.DeletionTimestamp != nil,
		Interfaces: vmiInterfaces(vmi.Status.Interfaces)}
}
