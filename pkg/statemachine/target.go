package statemachine

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// ConditionTargetNodeLost is true when the source was powered on again
// while the target's VirtualMachineInstance still existed, because
// KubeVirt declared its node lost.
const ConditionTargetNodeLost = "TargetNodeLost"

// Reasons of the wait for the target's instance.
const (
	// ReasonWaitingForTargetInstance: the source stays off until the
	// halted target's instance is gone.
	ReasonWaitingForTargetInstance = "WaitingForTargetInstance"
	// ReasonTargetNodeLost: KubeVirt declared the instance's node lost.
	ReasonTargetNodeLost = "TargetNodeLost"
)

// VMINodeLost is the status.reason KubeVirt's node controller gives an
// instance it fails because its node's virt-handler stopped answering and
// its pod is down (the node was declared lost: deleted, or tainted
// node.kubernetes.io/out-of-service, and its pods removed).
const VMINodeLost = "NodeUnresponsive"

// awaitTargetGone keeps the source off while the target's instance
// exists: halting the target VM asks KubeVirt to stop it, which takes its
// termination grace period (and forever on a node that does not answer).
// Powering the source on before would run two copies of the machine with
// the same MAC addresses. An instance whose node KubeVirt declared lost no
// longer holds the source back; the TargetNodeLost condition says so.
//
// The instance cache can lag behind KubeVirt (an instance created just
// before the halt, not delivered yet while the VM's informer already shows
// Halted). So when the decision may power the source on and the cache has
// no instance (NeedsLiveTargetInstance), the instance read live from the
// API server must say there is none too, and the VM itself must not report
// one (status.created, printableStatus); a live read that failed, or was
// not made, keeps the source off until a later poll reads it.
func (d *decider) awaitTargetGone() bool {
	if !d.needsRestore() {
		return false
	}
	name := fmt.Sprintf("%s/%s", d.m.Namespace, d.targetName())
	vmi := d.obs.VMI
	if needsLiveTargetInstance(d.m, &d.obs) {
		switch {
		case d.obs.LiveVMI == nil:
			d.waitForTarget(fmt.Sprintf("the source VM stays off until VirtualMachineInstance %s is read from the API server and found gone or failed with its node: "+
				"the controller's cache of instances can lag behind KubeVirt", name))
			return true
		case d.obs.LiveVMI.Error != nil:
			d.waitForTarget(fmt.Sprintf("the source VM stays off: reading VirtualMachineInstance %s from the API server failed (%s: %s); "+
				"the controller's cache of instances can lag behind KubeVirt, so only the API server can say it is gone",
				name, d.obs.LiveVMI.Error.Reason, d.obs.LiveVMI.Error.Message))
			return true
		}
		vmi = d.obs.LiveVMI.VMI
	}
	if vmi == nil {
		if reported := vmReportsInstance(d.obs.VM); reported != "" {
			d.waitForTarget(fmt.Sprintf("the source VM stays off while VirtualMachine %s reports an instance (%s), though none is seen yet: "+
				"two copies must never run with the same MAC addresses. KubeVirt clears the report once the instance is gone; "+
				"if it does not, check that KubeVirt's virt-controller runs", name, reported))
			return true
		}
		return false
	}
	if nodeLost(vmi) {
		d.targetNodeLost(name, vmi)
		return false
	}
	state := "phase " + vmi.Phase
	if vmi.NodeName != "" {
		state += " on node " + vmi.NodeName
	}
	if vmi.Deleting {
		state += ", being deleted"
	}
	d.waitForTarget(fmt.Sprintf("the source VM stays off until VirtualMachineInstance %s is gone (%s): "+
		"two copies must never run with the same MAC addresses. KubeVirt stops it within its termination grace period; "+
		"if its node is lost, declare it so (delete the Node, or taint it node.kubernetes.io/out-of-service) and KubeVirt fails the instance", name, state))
	return true
}

// waitForTarget keeps the source off for a poll, saying why.
func (d *decider) waitForTarget(message string) {
	d.wait(ReasonWaitingForTargetInstance, message, d.cfg.PollInterval)
}

// NeedsLiveTargetInstance reports whether the target's instance must be
// read from the API server itself before deciding for m with obs (the
// observation so far: the caches and the source), into obs.LiveVMI: the
// decision may power the source on again (the migration rolls back or is
// cancelled, the source it stopped is not restored yet and was seen not
// running) and the cache holds no instance of the target, or one KubeVirt
// failed with its node (which no longer holds the source back, as far as
// the cache knows). The decision
// keeps the source off while such a read is missing.
func NeedsLiveTargetInstance(m *v1alpha1.VirtualMachineMigration, obs *Observation) bool {
	return needsLiveTargetInstance(m, obs)
}

func needsLiveTargetInstance(m *v1alpha1.VirtualMachineMigration, obs *Observation) bool {
	st := &m.Status
	src := obs.Source
	return (st.Phase == v1alpha1.PhaseRollingBack || st.Phase == v1alpha1.PhaseCancelling) && needsRestore(st) &&
		st.Target != nil && st.Target.Name != "" && (obs.VMI == nil || nodeLost(obs.VMI)) &&
		src.Observed && src.Error == nil && src.PowerState != PowerStateOn
}

// nodeLost says KubeVirt failed an instance because its node was lost:
// such an instance no longer holds the source back, but only as the API
// server has it (KubeVirt may have replaced it under its name since the
// cache saw it).
func nodeLost(vmi *VMIObservation) bool {
	return vmi.Phase == VMIFailed && vmi.Reason == VMINodeLost
}

// vmReportsInstance says what the target VM reports of an instance of
// it, or "" when it reports none: status.created, or a printableStatus
// other than those KubeVirt gives a VM without one (no status yet,
// Stopped, or still waiting for its volumes). A status unknown here
// counts as an instance.
func vmReportsInstance(vm *VMObservation) string {
	switch {
	case vm == nil:
		return ""
	case vm.Created:
		return fmt.Sprintf("status.created, printableStatus %q", vm.PrintableStatus)
	}
	switch vm.PrintableStatus {
	case "", "Stopped", "Provisioning", "WaitingForVolumeBinding", "DataVolumeError", "ErrorPvcNotFound", "WaitingForReceiver":
		return ""
	}
	return fmt.Sprintf("printableStatus %q", vm.PrintableStatus)
}

// targetNodeLost records, once, that the source is powered on beside an
// instance whose node KubeVirt declared lost.
func (d *decider) targetNodeLost(name string, vmi *VMIObservation) {
	msg := fmt.Sprintf("VirtualMachineInstance %s still exists, but KubeVirt declared its node %s lost (phase %s, reason %s): the source VM is powered on again",
		name, vmi.NodeName, vmi.Phase, vmi.Reason)
	if c := meta.FindStatusCondition(d.st.Conditions, ConditionTargetNodeLost); c == nil || c.Status != metav1.ConditionTrue {
		d.out.Events = append(d.out.Events, Event{Warning: true, Reason: ReasonTargetNodeLost, Message: msg})
	}
	d.setCondition(ConditionTargetNodeLost, metav1.ConditionTrue, ReasonTargetNodeLost, msg)
}
