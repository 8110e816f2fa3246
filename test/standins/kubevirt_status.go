package standins

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// setPhase sets the instance's phase, recording the transition's time
// when it changes.
func setPhase(st *kubevirtv1.VirtualMachineInstanceStatus, phase kubevirtv1.VirtualMachineInstancePhase) {
	if st.Phase == phase {
		return
	}
	st.Phase = phase
	st.PhaseTransitionTimestamps = append(st.PhaseTransitionTimestamps,
		kubevirtv1.VirtualMachineInstancePhaseTransitionTimestamp{Phase: phase, PhaseTransitionTimestamp: metav1.Now()})
}

// setCondition sets a condition of the instance (its transition time
// changes with its status).
func setCondition(st *kubevirtv1.VirtualMachineInstanceStatus, t kubevirtv1.VirtualMachineInstanceConditionType, ok bool, reason, msg string) {
	status := corev1.ConditionFalse
	if ok {
		status = corev1.ConditionTrue
	}
	for i := range st.Conditions {
		c := &st.Conditions[i]
		if c.Type != t {
			continue
		}
		if c.Status != status {
			c.LastTransitionTime = metav1.Now()
		}
		c.Status, c.Reason, c.Message = status, reason, msg
		return
	}
	st.Conditions = append(st.Conditions, kubevirtv1.VirtualMachineInstanceCondition{
		Type: t, Status: status, Reason: reason, Message: msg, LastTransitionTime: metav1.Now()})
}

// removeCondition removes a condition of the instance.
func removeCondition(st *kubevirtv1.VirtualMachineInstanceStatus, t kubevirtv1.VirtualMachineInstanceConditionType) {
	kept := st.Conditions[:0]
	for _, c := range st.Conditions {
		if c.Type != t {
			kept = append(kept, c)
		}
	}
	st.Conditions = kept
}

// podReady says whether the pod's Ready condition is true.
func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// terminationMessage is what the launcher container left as its
// termination message, or its exit reason.
func terminationMessage(pod *corev1.Pod) string {
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			if msg := strings.TrimSpace(t.Message); msg != "" {
				return msg
			}
			return t.Reason
		}
	}
	return pod.Status.Reason
}

// startingStatus is the VM's printable status while its launcher pod
// starts: the image or scheduling problem KubeVirt names, else Starting.
func startingStatus(pod *corev1.Pod) kubevirtv1.VirtualMachinePrintableStatus {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return kubevirtv1.VirtualMachineStatusUnschedulable
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			switch w.Reason {
			case "ErrImagePull", "ErrImageNeverPull":
				return kubevirtv1.VirtualMachineStatusErrImagePull
			case "ImagePullBackOff":
				return kubevirtv1.VirtualMachineStatusImagePullBackOff
			}
		}
	}
	return kubevirtv1.VirtualMachineStatusStarting
}

// ptrIfSet is a pointer to the pod's QoS class, nil when unset.
func ptrIfSet(q corev1.PodQOSClass) *corev1.PodQOSClass {
	if q == "" {
		return nil
	}
	return &q
}
