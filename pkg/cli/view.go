package cli

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/pkg/statemachine"
)

// phaseOf is the migration's phase; a migration the controller has not
// looked at yet is Pending.
func phaseOf(m *v1alpha1.VirtualMachineMigration) v1alpha1.Phase {
	if m.Status.Phase == "" {
		return v1alpha1.PhasePending
	}
	return m.Status.Phase
}

// isTerminal reports whether the migration reached a phase it stays in.
func isTerminal(m *v1alpha1.VirtualMachineMigration) bool {
	return statemachine.IsTerminal(phaseOf(m))
}

// condition returns a condition of the migration, nil when absent.
func condition(m *v1alpha1.VirtualMachineMigration, t string) *metav1.Condition {
	return meta.FindStatusCondition(m.Status.Conditions, t)
}

// isTrue reports whether a condition is set and true.
func isTrue(m *v1alpha1.VirtualMachineMigration, t string) bool {
	c := condition(m, t)
	return c != nil && c.Status == metav1.ConditionTrue
}

// waiting says why the migration is not progressing, when it is not and
// has not ended: the pod of the phase's Job that has not started
// (status.podWaiting: its reason, and since when), else the reason and
// message of the Stalled, Paused or Progressing condition, in that order.
func waiting(m *v1alpha1.VirtualMachineMigration) (reason, message string, ok bool) {
	if isTerminal(m) {
		return "", "", false
	}
	if w := m.Status.PodWaiting; w != nil && m.DeletionTimestamp == nil {
		return w.Reason, podWaitingMessage(m, w, time.Time{}), true
	}
	for _, t := range []string{statemachine.ConditionStalled, statemachine.ConditionPaused} {
		if c := condition(m, t); c != nil && c.Status == metav1.ConditionTrue {
			return c.Reason, c.Message, true
		}
	}
	c := condition(m, statemachine.ConditionProgressing)
	if c == nil || c.Status != metav1.ConditionFalse {
		return "", "", false
	}
	return c.Reason, c.Message, true
}

// podWaitingMessage says which Job's pod has not started, since when (how
// long ago too, with now set), in the cluster's words, and when the
// attempt counts as failed.
func podWaitingMessage(m *v1alpha1.VirtualMachineMigration, w *v1alpha1.PodWaiting, now time.Time) string {
	msg := fmt.Sprintf("the pod of %s has not started", jobTitle(m, w.Job))
	if now.IsZero() {
		msg += " since " + timestamp(&w.Since)
	}
	if w.Message != "" {
		msg += ": " + w.Message
	}
	if t := w.AttemptFailsAt; t != nil {
		msg += "; the attempt counts as failed at " + timestamp(t)
		if !now.IsZero() && t.After(now) {
			msg += " (in " + duration.HumanDuration(t.Sub(now)) + ")"
		}
	}
	return msg
}

// jobTitle names a Job of the migration with what it does: "transfer Job
// web-01-transfer-1".
func jobTitle(m *v1alpha1.VirtualMachineMigration, name string) string {
	st := &m.Status
	switch {
	case st.Transfer != nil && st.Transfer.JobName == name:
		return "transfer Job " + name
	case st.Conversion != nil && st.Conversion.JobName == name:
		return "conversion Job " + name
	case st.Verification != nil && st.Verification.JobName == name:
		return "verification Job " + name
	case naming.ProofComponent(name) != "":
		return "proof Job " + name
	}
	return "Job " + name
}

// waitsFor says, short, what the migration waits for, in the controller's
// words: the pod that has not started, the wait of waiting, else what the
// controller works on (the Progressing message); "" once it ended. It is
// cut after a whole word, ending "..." (naming.Summarize); the reason a
// pod has not started stays whole: a long Job name is shortened in the
// middle to make room for it.
func waitsFor(m *v1alpha1.VirtualMachineMigration) string {
	if isTerminal(m) && m.DeletionTimestamp == nil {
		return ""
	}
	if w := m.Status.PodWaiting; w != nil && m.DeletionTimestamp == nil {
		return podWaitsFor(w)
	}
	if _, message, ok := waiting(m); ok {
		return naming.Summarize(message)
	}
	if c := condition(m, statemachine.ConditionProgressing); c != nil && c.Status == metav1.ConditionTrue {
		return naming.Summarize(c.Message)
	}
	return ""
}

// podWaitsFor is WAITING FOR of a pod that has not started: "pod of job
// JOB: REASON", the Job's name shortened in the middle (naming.Shorten)
// when the whole would be longer than naming.MaxSummary.
func podWaitsFor(w *v1alpha1.PodWaiting) string {
	const head, sep = "pod of job ", ": "
	reason := clean(w.Reason)
	room := naming.MaxSummary - len(head) - len(sep) - utf8.RuneCountInString(reason)
	job := w.Job
	if room >= 12 {
		job = naming.Shorten(job, room)
	}
	return naming.Summarize(head + job + sep + reason)
}

// isStalled reports whether the migration is running and Stalled.
func isStalled(m *v1alpha1.VirtualMachineMigration) bool {
	return !isTerminal(m) && isTrue(m, statemachine.ConditionStalled)
}

// progressOf is the migration's overall progress, status.progress (a
// share of the whole migration that never goes back:
// statemachine.Progress), or, while the transfer runs and the controller
// has not written one yet, the figure its disks make. A migration that
// fails shows none: no copy runs, and the last figure would read as how
// far it goes.
func progressOf(m *v1alpha1.VirtualMachineMigration) string {
	if p := phaseOf(m); p == v1alpha1.PhaseFailed || p == v1alpha1.PhaseRollingBack {
		return ""
	}
	if m.Status.Progress != "" || phaseOf(m) != v1alpha1.PhaseTransferringDisks {
		return m.Status.Progress
	}
	return statemachine.Progress(&m.Status)
}

// sourceName is the source VM's name as inventoried, else as selected.
func sourceName(m *v1alpha1.VirtualMachineMigration) string {
	if m.Status.Source != nil && m.Status.Source.Name != "" {
		return m.Status.Source.Name
	}
	vm := m.Spec.Source.VM
	for _, s := range []string{vm.Name, vm.InventoryPath, vm.MoRef, vm.BIOSUUID, vm.InstanceUUID} {
		if s != "" {
			return s
		}
	}
	return ""
}

// targetNameOf is the target VirtualMachine's name, once known.
func targetNameOf(m *v1alpha1.VirtualMachineMigration) string {
	if m.Status.Target != nil && m.Status.Target.Name != "" {
		return m.Status.Target.Name
	}
	return m.Spec.Target.Name
}

// diskProgress is one disk's progress as shown in a progress bar.
type diskProgress struct {
	name     string
	stage    string
	fraction float64
	detail   string
	rate     string
	eta      string
}

// disksProgress turns status.disks into progress rows: the transfer's bytes
// until the disk is verified, then the import's percentage.
func disksProgress(m *v1alpha1.VirtualMachineMigration) []diskProgress {
	rows := make([]diskProgress, 0, len(m.Status.Disks))
	importing := importStarted(phaseOf(m))
	for _, d := range m.Status.Disks {
		rows = append(rows, diskProgressOf(d, importing))
	}
	return rows
}

// importStarted reports whether a migration in phase p is past its
// transfer and conversion: its disks are then shown by their import.
func importStarted(p v1alpha1.Phase) bool {
	switch p {
	case v1alpha1.PhaseImporting, v1alpha1.PhaseCreatingVM, v1alpha1.PhaseStarting, v1alpha1.PhaseCleaningUp, v1alpha1.PhaseSucceeded:
		return true
	}
	return false
}

// diskProgressOf is one disk's progress: its import once the import began
// (importing: the migration is in Importing or later, even before the
// DataVolume is named), else its transfer.
func diskProgressOf(d v1alpha1.DiskStatus, importing bool) diskProgress {
	// Rate and ETA are known only while the transfer runs.
	p := diskProgress{name: d.Name}
	switch {
	case importing && d.DataVolume == "" && d.ImportPhase == "":
		p.stage, p.detail = "import", "DataVolume not created yet"
	case d.ImportPhase != "" || (d.DataVolume != "" && d.TransferredAt != nil):
		p.stage = "import"
		pct, ok := parsePercent(d.ImportProgress)
		if d.ImportPhase == statemachine.DataVolumeSucceeded {
			pct, ok = 100, true
		}
		p.fraction = pct / 100
		p.detail = fmt.Sprintf("DataVolume %s %s", d.DataVolume, orNone(d.ImportPhase))
		if !ok {
			p.detail += " (progress not reported yet)"
		}
	case d.TransferredAt != nil:
		p.stage, p.fraction = "transfer", 1
		p.detail = fmt.Sprintf("%s verified", humanBytes(d.BytesTransferred))
		switch {
		case d.AllocatedOnly:
			p.detail += fmt.Sprintf(", allocated only (%s read)", humanBytes(d.BytesRead))
		case d.FullCopyReason != "":
			p.detail += ", whole disk read"
		}
	default:
		p.stage = "transfer"
		if d.CapacityBytes > 0 {
			p.fraction = float64(d.BytesTransferred) / float64(d.CapacityBytes)
		}
		p.detail = fmt.Sprintf("%s / %s", humanBytes(d.BytesTransferred), humanBytes(d.CapacityBytes))
		p.rate, p.eta = humanRate(d.RateBytesPerSecond), humanETA(d.ETASeconds)
	}
	return p
}

// overallRate sums the disks' transfer rates.
func overallRate(m *v1alpha1.VirtualMachineMigration) int64 {
	var sum int64
	for _, d := range m.Status.Disks {
		if d.TransferredAt == nil {
			sum += d.RateBytesPerSecond
		}
	}
	return sum
}

// overallETA is the longest ETA of a disk still transferring.
func overallETA(m *v1alpha1.VirtualMachineMigration) *int64 {
	var eta *int64
	for _, d := range m.Status.Disks {
		if d.TransferredAt == nil && d.ETASeconds != nil && (eta == nil || *d.ETASeconds > *eta) {
			eta = d.ETASeconds
		}
	}
	return eta
}

// lastErrorLine is "Reason in Phase: message", or "" without an error.
func lastErrorLine(m *v1alpha1.VirtualMachineMigration) string {
	e := m.Status.LastError
	if e == nil {
		return ""
	}
	return clean(fmt.Sprintf("%s in %s: %s", e.Reason, e.Phase, e.Message))
}

// lastErrorSummary is the last error's short form (status.lastError.summary,
// made from the message when an older controller wrote none), or "".
func lastErrorSummary(m *v1alpha1.VirtualMachineMigration) string {
	e := m.Status.LastError
	switch {
	case e == nil:
		return ""
	case e.Summary != "":
		return e.Summary
	}
	return naming.Summarize(e.Message)
}

// pluralize returns "1 disk" or "2 disks".
func pluralize(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, strings.TrimSuffix(word, "s"))
}

// deletionNote is " (cancelling)" or " (deleting)" for a migration being
// deleted, unless its phase already says so; "" otherwise.
func deletionNote(m *v1alpha1.VirtualMachineMigration) string {
	switch {
	case m.DeletionTimestamp == nil || phaseOf(m) == v1alpha1.PhaseCancelling:
		return ""
	case isTerminal(m):
		return " (deleting)"
	}
	return " (cancelling)"
}
