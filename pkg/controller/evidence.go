package controller

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// evidenceRecord is a finished migration's evidence in one line, for the
// event and the log line that outlive it when its time to live ends: how
// it ended, its source and target, its start and end, its approval, each
// disk's size, checksum and time, and when each checkpoint was reached.
func evidenceRecord(m *v1alpha1.VirtualMachineMigration) string {
	st := &m.Status
	parts := []string{outcomeRecord(st)}
	if src := st.Source; src != nil {
		parts = append(parts, fmt.Sprintf("source VM %s (%s, instance UUID %s, BIOS UUID %s) on %s",
			src.Name, src.MoRef, src.InstanceUUID, src.BIOSUUID, m.SpecInForce().Source.URL))
	}
	if t := st.Target; t != nil {
		parts = append(parts, fmt.Sprintf("target VirtualMachine %s/%s (uid %s)", m.Namespace, t.Name, t.UID))
	}
	parts = append(parts, fmt.Sprintf("started %s, completed %s", stamp(st.StartTime), stamp(st.CompletionTime)),
		approvalRecord(m))
	for _, d := range st.Disks {
		parts = append(parts, fmt.Sprintf("%s (disk key %d): %d of %d bytes, sha256 %s, transferred %s, %s, DataVolume %s",
			d.Name, d.Key, d.BytesTransferred, d.CapacityBytes, orNone(d.SHA256), stamp(d.TransferredAt), chainRecord(d), orNone(d.DataVolume)))
	}
	if dt := st.Downtime; dt != nil {
		parts = append(parts, downtimeRecord(dt))
	}
	var reached []string
	for _, e := range st.Evidence {
		reached = append(reached, string(e.Phase)+" "+stamp(&e.ReachedAt))
	}
	if len(reached) > 0 {
		parts = append(parts, "checkpoints: "+strings.Join(reached, ", "))
	}
	return strings.Join(parts, "; ")
}

// downtimeRecord is the outage: its length once it ended, when it began
// and ended, and each of its parts.
func downtimeRecord(dt *v1alpha1.DowntimeStatus) string {
	total, when := "not ended", "source stopped "+stamp(&dt.SourceStoppedAt)
	if dt.Seconds != nil {
		total = fmt.Sprintf("%ds", *dt.Seconds)
	}
	switch {
	case dt.TargetRunningAt != nil:
		when += ", target running " + stamp(dt.TargetRunningAt)
	case dt.SourceRestoredAt != nil:
		when += ", source back on " + stamp(dt.SourceRestoredAt)
	}
	var phases []string
	for _, p := range dt.Phases {
		phases = append(phases, fmt.Sprintf("%s %ds", p.Phase, p.Seconds))
	}
	return fmt.Sprintf("downtime %s (%s; by phase: %s)", total, when, orNone(strings.Join(phases, ", ")))
}

// chainRecord is the rest of a disk's checksum chain: converted, and
// read back from the target.
func chainRecord(d v1alpha1.DiskStatus) string {
	c := d.Checksums
	if c == nil {
		c = &v1alpha1.DiskChecksums{}
	}
	compared := string(c.Compared)
	if compared == "" {
		compared = "none"
	}
	return fmt.Sprintf("converted sha256 %s, target sha256 %s, compared %s, verified %s", orNone(c.Converted), orNone(c.Target), compared, stamp(c.VerifiedAt))
}

// outcomeRecord says how the migration ended.
func outcomeRecord(st *v1alpha1.VirtualMachineMigrationStatus) string {
	if e := st.LastError; st.Phase == v1alpha1.PhaseFailed && e != nil {
		return fmt.Sprintf("%s in %s: %s: %s", st.Phase, e.Phase, e.Reason, e.Message)
	}
	return string(st.Phase)
}

// approvalRecord says whether the cutover needed an approval, when it was
// given and by which field manager: the API server records the manager
// of spec.policy.approved (kubectl-patch, kubectl-vmm...), the user who
// wrote it is in its audit log.
func approvalRecord(m *v1alpha1.VirtualMachineMigration) string {
	if !m.Spec.Policy.RequireApproval {
		return "approval not required"
	}
	at := "never reached"
	for _, e := range m.Status.Evidence {
		if e.Phase == v1alpha1.PhaseAwaitingApproval {
			at = stamp(&e.ReachedAt)
		}
	}
	who := "an unrecorded field manager"
	if manager, when, ok := approvedBy(m.ManagedFields); ok {
		who = fmt.Sprintf("field manager %s (at %s)", manager, stamp(when))
	}
	return fmt.Sprintf("cutover approved %s: spec.policy.approved set by %s", at, who)
}

// approvedBy is the field manager that owns spec.policy.approved, and
// when it last wrote.
func approvedBy(entries []metav1.ManagedFieldsEntry) (string, *metav1.Time, bool) {
	for _, e := range entries {
		if e.FieldsV1 == nil {
			continue
		}
		var fields map[string]map[string]map[string]any
		if json.Unmarshal(e.FieldsV1.Raw, &fields) != nil {
			continue
		}
		if _, ok := fields["f:spec"]["f:policy"]["f:approved"]; ok {
			return e.Manager, e.Time, true
		}
	}
	return "", nil, false
}

// stamp is a time in UTC, RFC 3339, or "-".
func stamp(t *metav1.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
