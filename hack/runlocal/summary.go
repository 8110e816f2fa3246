package main

import (
	"encoding/json"
	"fmt"
	"time"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/transfer/wire"
)

// Summary says how the example migration went, from its status: its own
// time (creation to the end), the downtime (the stop asked to the target
// running), which virt-v2v converted it, and, last, how long run-local ran
// in all (sinceStart: mostly building, on a first run).
func Summary(m *v1alpha1.VirtualMachineMigration, sinceStart time.Duration) []string {
	st := &m.Status
	first := fmt.Sprintf("the example migration %s/%s is %s", m.Namespace, m.Name, st.Phase)
	if st.CompletionTime != nil {
		first = fmt.Sprintf("the example migration %s/%s %s in %s (created at %s, %s at %s UTC)", m.Namespace, m.Name,
			pastTense(st.Phase), seconds(st.CompletionTime.Sub(m.CreationTimestamp.Time)),
			clock(m.CreationTimestamp.Time), st.Phase, clock(st.CompletionTime.Time))
	}
	return []string{
		first,
		downtime(m),
		conversion(m),
		fmt.Sprintf("run-local: %s in all (building the binaries and images and starting the stack included)", seconds(sinceStart)),
	}
}

// pastTense is what a migration that ended in phase p did.
func pastTense(p v1alpha1.Phase) string {
	if p == v1alpha1.PhaseSucceeded {
		return "succeeded"
	}
	if p == v1alpha1.PhaseFailed {
		return "failed"
	}
	return "ended " + string(p)
}

// downtime is how long the source's service was down: from the first stop
// the controller asked (the guest's shutdown, or the power-off) to the
// target's VirtualMachineInstance seen running (the Starting checkpoint).
func downtime(m *v1alpha1.VirtualMachineMigration) string {
	sc := m.Status.SourceControl
	if sc == nil || (sc.ShutdownRequestedAt == nil && sc.PowerOffRequestedAt == nil) {
		if sc != nil && sc.OriginalPowerState != "" && sc.OriginalPowerState != "poweredOn" {
			return "no downtime: the source was powered off before the migration"
		}
		return "downtime: not known (the controller recorded no stop of the source)"
	}
	what, from := "guest shutdown", sc.ShutdownRequestedAt
	if from == nil || (sc.PowerOffRequestedAt != nil && sc.PowerOffRequestedAt.Before(from)) {
		what, from = "power-off", sc.PowerOffRequestedAt
	}
	var running *v1alpha1.CheckpointEvidence
	for i := range m.Status.Evidence {
		if m.Status.Evidence[i].Phase == v1alpha1.PhaseStarting {
			running = &m.Status.Evidence[i]
		}
	}
	if running == nil {
		switch {
		case sc.RestoredAt != nil:
			return fmt.Sprintf("downtime %s: %s asked at %s, the source powered on again at %s (the target never ran)",
				seconds(sc.RestoredAt.Sub(from.Time)), what, clock(from.Time), clock(sc.RestoredAt.Time))
		case m.Spec.Target.StartEnabled() && m.Status.Phase != v1alpha1.PhaseSucceeded:
			return fmt.Sprintf("downtime: the source has been down since the %s asked at %s; the target never ran", what, clock(from.Time))
		}
		return "downtime: the target VM was not started (spec.target.start: false)"
	}
	return fmt.Sprintf("downtime %s: %s asked at %s, the target's VirtualMachineInstance running at %s",
		seconds(running.ReachedAt.Sub(from.Time)), what, clock(from.Time), clock(running.ReachedAt.Time))
}

// selfCheck is what conversion reads of the conversion image's
// self-check line (docs/operators/conversion-image.md); the simulated
// image of test/images says "simulated": true.
type selfCheck struct {
	VirtV2V   string `json:"virtV2V"`
	Simulated bool   `json:"simulated"`
}

// conversion says which virt-v2v converted the guest, from the
// conversion image's proof.
func conversion(m *v1alpha1.VirtualMachineMigration) string {
	if c := m.Status.Conversion; c != nil && c.Skipped {
		return "conversion: skipped (spec.conversion.skip)"
	}
	var proof *v1alpha1.ImageProof
	for i := range m.Status.ImageProofs {
		if m.Status.ImageProofs[i].Component == v1alpha1.ComponentConversion {
			proof = &m.Status.ImageProofs[i]
		}
	}
	if proof == nil {
		return "conversion: not known (no image proof in status: --image-proofs=false?)"
	}
	var sc selfCheck
	if line := wire.LastJSONLine(proof.Output); line == "" || json.Unmarshal([]byte(line), &sc) != nil {
		return fmt.Sprintf("conversion: by %s, whose self-check said nothing this summary reads", proof.Image)
	}
	if sc.Simulated {
		return fmt.Sprintf("conversion: SIMULATED virt-v2v (test/images: it converts nothing; the sample VMs' disks hold random bytes) in %s", proof.Image)
	}
	found := ""
	if c := m.Status.Conversion; c != nil && c.OperatingSystem != "" {
		found = fmt.Sprintf(" (it found %s)", c.OperatingSystem)
	}
	return fmt.Sprintf("conversion: the real virt-v2v %s in %s%s", sc.VirtV2V, proof.Image, found)
}
