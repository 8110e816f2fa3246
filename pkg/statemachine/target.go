package statemachine

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
func (d *decider) awaitTargetGone() bool {
	vmi := d.obs.VMI
	if vmi == nil || !d.needsRestore() {
		return false
	}
	name := fmt.Sprintf("%s/%s", d.m.Namespace, d.targetName())
	if vmi.Phase == VMIFailed && vmi.Reason == VMINodeLost {
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
	d.wait(ReasonWaitingForTargetInstance, fmt.Sprintf("the source VM stays off until VirtualMachineInstance %s is gone (%s): "+
		"two copies must never run with the same MAC addresses. KubeVirt stops it within its termination grace period; "+
		"if its node is lost, declare it so (delete the Node, or taint it node.kubernetes.io/out-of-service) and KubeVirt fails the instance", name, state),
		d.cfg.PollInterval)
	return true
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
