package cli

import (
	"fmt"
	"strings"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/pkg/statemachine"
)

// nextStep says in one sentence what the controller waits for and what
// the user can do about it; one line, cleaned, though it quotes status.
func nextStep(m *v1alpha1.VirtualMachineMigration) string {
	return clean(nextSentence(m))
}

func nextSentence(m *v1alpha1.VirtualMachineMigration) string {
	switch {
	case m.DeletionTimestamp != nil:
		return cancellingStep(m)
	case isTerminal(m):
		return terminalStep(m)
	case m.Spec.Policy.Paused:
		return fmt.Sprintf("The controller holds the migration at %s (spec.policy.paused; running jobs go on): resume it with kubectl vmm resume %s -n %s.",
			phaseOf(m), m.Name, m.Namespace)
	case m.Status.PodWaiting != nil:
		return podWaitingStep(m, m.Status.PodWaiting)
	case isTrue(m, statemachine.ConditionStalled):
		return stalledStep(m)
	}
	phase := phaseOf(m)
	restingPhase := phase == v1alpha1.PhaseAwaitingApproval || phase == v1alpha1.PhasePlanned
	if reason, message, ok := waiting(m); ok && !restingPhase {
		return waitingStep(m, reason, message)
	}
	if explain, ok := phaseSteps[phase]; ok {
		return explain(m)
	}
	return fmt.Sprintf("The controller works toward %s; nothing to do.", phase)
}

// phaseSteps explain, per phase, what a migration that is not held up
// waits for.
var phaseSteps = map[v1alpha1.Phase]func(*v1alpha1.VirtualMachineMigration) string{
	v1alpha1.PhasePending: func(*v1alpha1.VirtualMachineMigration) string {
		return "The controller is setting the migration up (finalizer, status); nothing to do."
	},
	v1alpha1.PhaseValidating: func(m *v1alpha1.VirtualMachineMigration) string {
		if c := condition(m, statemachine.ConditionProgressing); c != nil && c.Message != "" {
			return fmt.Sprintf("The controller validates the migration before it touches the source VM (inventory, preflight checks, the cluster's dry run and image proofs), now %s.",
				strings.TrimSuffix(clean(c.Message), "."))
		}
		return "The controller validates the migration before it touches the source VM (inventory, preflight checks, the cluster's dry run and image proofs); nothing to do."
	},
	v1alpha1.PhasePlanned: func(m *v1alpha1.VirtualMachineMigration) string {
		return fmt.Sprintf("Nothing runs and the source is untouched: review the plan with kubectl vmm plan %s -n %s, then migrate with kubectl patch vmm %s -n %s --type merge -p '{\"spec\":{\"planOnly\":false}}'.",
			m.Name, m.Namespace, m.Name, m.Namespace)
	},
	v1alpha1.PhaseAwaitingApproval: func(m *v1alpha1.VirtualMachineMigration) string {
		return fmt.Sprintf("The controller waits for your approval before it stops the source VM: kubectl vmm approve %s -n %s.", m.Name, m.Namespace)
	},
	v1alpha1.PhaseQueued: func(*v1alpha1.VirtualMachineMigration) string {
		return "The controller is about to stop the source VM (a transfer slot is free); nothing to do."
	},
	v1alpha1.PhaseStoppingSource: func(m *v1alpha1.VirtualMachineMigration) string {
		return fmt.Sprintf("The controller waits for the source VM to power off (a guest shutdown first, then a hard power-off after %s); nothing to do.",
			humanDuration(m.Spec.Policy.ShutdownTimeout()))
	},
	v1alpha1.PhaseTransferringDisks: transferStep,
	v1alpha1.PhaseConverting:        conversionStep,
	v1alpha1.PhaseImporting:         importStep,
	v1alpha1.PhaseCreatingVM: func(m *v1alpha1.VirtualMachineMigration) string {
		return fmt.Sprintf("The controller is creating VirtualMachine %s and handing it its disks; nothing to do.", orNone(targetNameOf(m)))
	},
	v1alpha1.PhaseStarting: func(m *v1alpha1.VirtualMachineMigration) string {
		vmi := "not created yet"
		if t := m.Status.Target; t != nil && t.VMIPhase != "" {
			vmi = t.VMIPhase
		}
		return fmt.Sprintf("The controller waits for VirtualMachine %s to run (instance %s, at most %s); if it does not, see kubectl get vmi %s -n %s.",
			orNone(targetNameOf(m)), vmi, m.Spec.Policy.StartDeadline(), orNone(targetNameOf(m)), m.Namespace)
	},
	v1alpha1.PhaseCleaningUp: func(*v1alpha1.VirtualMachineMigration) string {
		return "The controller is deleting the staging volumes, Jobs and ConfigMaps (spec.policy.cleanup); nothing to do."
	},
	v1alpha1.PhaseRollingBack: func(m *v1alpha1.VirtualMachineMigration) string {
		return "After the failure below, the controller stops what still runs and restores the source VM as it found it before ending Failed; nothing to do."
	},
	v1alpha1.PhaseCancelling: cancellingStep,
}

func transferStep(m *v1alpha1.VirtualMachineMigration) string {
	job := "its transfer Job"
	if t := m.Status.Transfer; t != nil {
		job = fmt.Sprintf("transfer Job %s (attempt %d)", t.JobName, t.Attempt)
	}
	var done, total int64
	for _, d := range m.Status.Disks {
		done, total = done+d.BytesTransferred, total+d.CapacityBytes
	}
	copied := fmt.Sprintf("%s of %s copied", humanBytes(done), humanBytes(total))
	if e := overallETA(m); e != nil {
		copied += ", about " + humanETA(e) + " left"
	}
	return fmt.Sprintf("The controller waits for %s to copy %s (%s); follow it with kubectl vmm get %s -n %s --watch.",
		job, pluralize(len(m.Status.Disks), "disk"), copied, m.Name, m.Namespace)
}

func conversionStep(m *v1alpha1.VirtualMachineMigration) string {
	if c := m.Status.Conversion; c != nil && c.JobName != "" {
		return fmt.Sprintf("The controller waits for conversion Job %s (virt-v2v, attempt %d) to convert the guest; its log: kubectl logs -n %s job/%s.",
			c.JobName, c.Attempt, m.Namespace, c.JobName)
	}
	return "The controller is starting the guest conversion (virt-v2v); nothing to do."
}

func importStep(m *v1alpha1.VirtualMachineMigration) string {
	done := 0
	for _, d := range m.Status.Disks {
		if d.ImportPhase == statemachine.DataVolumeSucceeded {
			done++
		}
	}
	return fmt.Sprintf("The controller waits for CDI to populate the target DataVolumes (%d of %d done); see kubectl get dv -n %s -l %s=%s.",
		done, len(m.Status.Disks), m.Namespace, v1alpha1.LabelMigrationName, m.Name)
}

func stalledStep(m *v1alpha1.VirtualMachineMigration) string {
	c := condition(m, statemachine.ConditionStalled)
	where := ""
	switch {
	case m.Status.Phase == v1alpha1.PhaseTransferringDisks && m.Status.Transfer != nil:
		where = fmt.Sprintf("; look at kubectl logs -n %s job/%s", m.Namespace, m.Status.Transfer.JobName)
	case m.Status.Phase == v1alpha1.PhaseConverting && m.Status.Conversion != nil && m.Status.Conversion.JobName != "":
		where = fmt.Sprintf("; look at kubectl logs -n %s job/%s", m.Namespace, m.Status.Conversion.JobName)
	}
	return fmt.Sprintf("Stalled: %s (spec.policy.stallTimeout %s)%s; kubectl vmm cancel %s -n %s stops it and restores the source.",
		clean(c.Message), humanDuration(m.Spec.Policy.StallAfter()), where, m.Name, m.Namespace)
}

// podWaitingStep says what to do about a pod that has not started for a
// reason a person must fix.
func podWaitingStep(m *v1alpha1.VirtualMachineMigration, w *v1alpha1.PodWaiting) string {
	if component := naming.ProofComponent(w.Job); component != "" && phaseOf(m) == v1alpha1.PhaseValidating {
		return proofWaitingStep(m, w, component)
	}
	when := "after the controller's --pod-start-timeout"
	if w.AttemptFailsAt != nil {
		when = "at " + timestamp(w.AttemptFailsAt)
	}
	return fmt.Sprintf("The controller waits for the pod of %s to start (%s): fix what the cluster says (kubectl describe pod -n %s -l job-name=%s); %s the attempt counts as failed and, while the retry budget lasts, a new one starts.",
		jobTitle(m, w.Job), clean(w.Reason), m.Namespace, w.Job, when)
}

// proofWaitingStep says what to do about an image proof's pod that has
// not started (in Validating: no node can run it yet): no spec field
// places it, and the proof fails, refusing the migration with its source
// untouched, if it has not started in time.
func proofWaitingStep(m *v1alpha1.VirtualMachineMigration, w *v1alpha1.PodWaiting, component string) string {
	when := "after the controller's --image-proof-timeout"
	if w.AttemptFailsAt != nil {
		when = "at " + timestamp(w.AttemptFailsAt)
	}
	fix := "fix what the cluster says"
	if w.Reason == "Unschedulable" {
		fix = "no spec field places it: make room for it on a node"
	}
	return fmt.Sprintf("The controller waits for the pod of proof Job %s (the %s image's self-check, run before the source VM is touched) to start (%s): %s (kubectl describe pod -n %s -l job-name=%s says why); if it has not started %s, the proof fails and the migration is refused, its source untouched.",
		w.Job, component, clean(w.Reason), fix, m.Namespace, w.Job, when)
}

func waitingStep(m *v1alpha1.VirtualMachineMigration, reason, message string) string {
	switch reason {
	case statemachine.ReasonWaitingForTransferSlot:
		return fmt.Sprintf("The controller waits for a transfer slot (%s); the migration starts on its own when one frees, and its source stays untouched meanwhile.", clean(message))
	case statemachine.ReasonWaitingForConversionCapacity:
		return fmt.Sprintf("The controller waits for conversion capacity before it stops the source (%s); the migration starts on its own when a conversion ends, and its source stays untouched meanwhile.", clean(message))
	}
	return fmt.Sprintf("The controller waits: %s: %s; fix that and it looks again on its own, until the retry deadline (%s after the start).",
		clean(reason), clean(message), humanDuration(m.Spec.Policy.RetryDeadline()))
}

func cancellingStep(m *v1alpha1.VirtualMachineMigration) string {
	if isTerminal(m) {
		return "The migration is being deleted: the controller deletes its staging objects, then releases the finalizer; nothing to do."
	}
	msg := "The migration is being cancelled: the controller deletes its staging objects and a target VM that never ran (a started one is halted and kept), and restores the source VM before it releases the finalizer"
	if reason, message, ok := waiting(m); ok {
		return fmt.Sprintf("%s; it waits: %s: %s.", msg, clean(reason), clean(message))
	}
	return msg + "; nothing to do."
}

func terminalStep(m *v1alpha1.VirtualMachineMigration) string {
	if phaseOf(m) == v1alpha1.PhaseSucceeded {
		return fmt.Sprintf("Nothing left to wait for: the VM now lives in VirtualMachine %s/%s; deleting this migration keeps it.",
			m.Namespace, orNone(targetNameOf(m)))
	}
	if statemachine.RefusedBeforeCutover(&m.Status) {
		return refusedStep(m)
	}
	return fmt.Sprintf("Nothing left to wait for: fix the cause of the error and create a new migration; kubectl vmm cancel %s -n %s deletes this one and the staging objects kept for inspection.",
		m.Name, m.Namespace)
}
