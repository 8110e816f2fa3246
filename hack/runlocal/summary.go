package main

import (
	"encoding/json"
	"fmt"
	"time"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/transfer/wire"
)

// Summary says how the example migration went, from its status: its own
// time (creation to the end), the downtime (the controller's
// status.downtime: the source seen off to the target seen running), which
// virt-v2v converted it, and, last, how long run-local ran in all
// (sinceStart: mostly building, on a first run).
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

// downtime is the outage the controller measured (status.downtime): from
// the source seen powered off after its stop was asked to the target's
// VirtualMachineInstance seen running (the Starting checkpoint), or to the
// source seen back on; with when the stop was asked, which comes before.
func downtime(m *v1alpha1.VirtualMachineMigration) string {
	sc := m.Status.SourceControl
	if sc == nil || (sc.ShutdownRequestedAt == nil && sc.PowerOffRequestedAt == nil) {
		if sc != nil && sc.OriginalPowerState != "" && sc.OriginalPowerState != "poweredOn" {
			return "no downtime: the source was powered off before the migration"
		}
		return "downtime: not known (the controller recorded no stop of the source)"
	}
	what, asked := "guest shutdown", sc.ShutdownRequestedAt
	if asked == nil || (sc.PowerOffRequestedAt != nil && sc.PowerOffRequestedAt.Before(asked)) {
		what, asked = "power-off", sc.PowerOffRequestedAt
	}
	dt := m.Status.Downtime
	if dt == nil {
		dt = statemachine.Downtime(&m.Status)
	}
	if dt == nil {
		return fmt.Sprintf("downtime: not measured (the %s was asked at %s; the source was never seen powered off)", what, clock(asked.Time))
	}
	off := fmt.Sprintf("the source seen off at %s (%s asked at %s)", clock(dt.SourceStoppedAt.Time), what, clock(asked.Time))
	switch {
	case dt.Seconds != nil && dt.TargetRunningAt != nil:
		return fmt.Sprintf("downtime %ds: %s, the target's VirtualMachineInstance running at %s", *dt.Seconds, off, clock(dt.TargetRunningAt.Time))
	case dt.Seconds != nil && dt.SourceRestoredAt != nil:
		return fmt.Sprintf("downtime %ds: %s, back on at %s (the target never ran)", *dt.Seconds, off, clock(dt.SourceRestoredAt.Time))
	case m.Spec.Target.StartEnabled() && m.Status.Phase != v1alpha1.PhaseSucceeded:
		return fmt.Sprintf("downtime: %s; the target never ran", off)
	}
	return fmt.Sprintf("downtime: the target VM was not started (spec.target.start: false); %s", off)
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
