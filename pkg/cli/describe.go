package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// printDescribe writes the migration's story: where it stands, the
// checkpoints it reached with their evidence, the evidence chain of each
// disk, conditions, the last error and recent events.
func printDescribe(w io.Writer, m *v1alpha1.VirtualMachineMigration, events []corev1.Event, now time.Time) error {
	for _, section := range []func(io.Writer, *v1alpha1.VirtualMachineMigration, time.Time){
		describeHeader, describeTimeline, describeDisks, describeConversion, describeNetwork, describeSourceControl, describeConditions,
	} {
		section(w, m, now)
	}
	describeEvents(w, m, events, now)
	return nil
}

// lastErrorRef stands for the last error's message where describe would
// say it again: it says it once, on the Last Error line.
const lastErrorRef = "(the Last Error above)"

// referToLastError replaces the last error's message in text (a
// condition's, an event's: an older controller repeated it in four
// conditions and two events) by lastErrorRef. A short message is kept:
// it costs little and could be part of other words.
func referToLastError(m *v1alpha1.VirtualMachineMigration, text string) string {
	e := m.Status.LastError
	if e == nil || len(e.Message) < 32 {
		return text
	}
	return strings.ReplaceAll(text, e.Message, lastErrorRef)
}

func describeHeader(w io.Writer, m *v1alpha1.VirtualMachineMigration, now time.Time) {
	tw := printers.GetNewTabWriter(w)
	fmt.Fprintf(tw, "Name:\t%s\n", m.Name)
	fmt.Fprintf(tw, "Namespace:\t%s\n", m.Namespace)
	phase := string(phaseOf(m))
	if m.Status.PhaseStartTime != nil && !isTerminal(m) {
		phase += fmt.Sprintf(" (for %s)", age(m.Status.PhaseStartTime, now))
	}
	if m.DeletionTimestamp != nil {
		phase += fmt.Sprintf(", deletion requested %s ago", age(m.DeletionTimestamp, now))
	}
	fmt.Fprintf(tw, "Phase:\t%s\n", clean(phase))
	fmt.Fprintf(tw, "Progress:\t%s\n", orNone(clean(progressOf(m))))
	fmt.Fprintf(tw, "Source:\t%s\n", clean(describeSource(m)))
	fmt.Fprintf(tw, "Target:\tVirtualMachine %s/%s\n", m.Namespace, orNone(clean(targetNameOf(m))))
	fmt.Fprintf(tw, "Started:\t%s\n", timestamp(m.Status.StartTime))
	if end := m.Status.CompletionTime; end != nil {
		completed := timestamp(end)
		if d, ok := took(m.Status.StartTime, end); ok {
			completed += fmt.Sprintf(" (took %s)", d)
		}
		fmt.Fprintf(tw, "Completed:\t%s\n", completed)
	}
	if line := downtimeLine(m, now); line != "" {
		fmt.Fprintf(tw, "Downtime:\t%s\n", clean(line))
	}
	fmt.Fprintf(tw, "Retries:\t%d of %d (deadline %s after the start)\n", m.Status.Retries, m.Spec.Policy.RetryLimit(), humanDuration(m.Spec.Policy.RetryDeadline()))
	if line := lastErrorLine(m); line != "" {
		fmt.Fprintf(tw, "Last Error:\t%s (at %s)\n", line, timestamp(&m.Status.LastError.Time))
	}
	fmt.Fprintf(tw, "Next:\t%s\n", nextStep(m))
	_ = tw.Flush()
}

// took is the time from one status time to another, to the second; ok is
// false when either is missing (a status written by a controller of
// another version may lack either).
func took(from, to *metav1.Time) (d time.Duration, ok bool) {
	if from == nil || from.IsZero() || to == nil || to.IsZero() {
		return 0, false
	}
	return to.Sub(from.Time).Round(time.Second), true
}

func describeSource(m *v1alpha1.VirtualMachineMigration) string {
	src := m.Status.Source
	if src == nil {
		return fmt.Sprintf("%s at %s (not inventoried yet)", clean(sourceName(m)), clean(m.Spec.Source.URL))
	}
	s := fmt.Sprintf("%s (%s) at %s", clean(src.Name), src.MoRef, clean(m.Spec.Source.URL))
	if src.Host != "" {
		s += ", host " + clean(src.Host)
	}
	return s + fmt.Sprintf(", %d vCPU, %d MiB, %s, %s when inventoried",
		src.CPU.Sockets*src.CPU.CoresPerSocket, src.MemoryMiB, src.Firmware, orNone(src.PowerState))
}

// describeTimeline lists the checkpoints passed, in time order: when each
// one's desired state was seen (the migration then left that phase), how
// long after the start, and what proved it; then the one being worked
// toward.
func describeTimeline(w io.Writer, m *v1alpha1.VirtualMachineMigration, now time.Time) {
	fmt.Fprintln(w, "\nTimeline (each checkpoint when it was passed, with what proved it):")
	evidence := append([]v1alpha1.CheckpointEvidence(nil), m.Status.Evidence...)
	sort.SliceStable(evidence, func(i, j int) bool { return evidence[i].ReachedAt.Before(&evidence[j].ReachedAt) })
	tw := printers.GetNewTabWriter(w)
	fmt.Fprintln(tw, "  PASSED AT\tAFTER START\tCHECKPOINT\tEVIDENCE")
	for _, e := range evidence {
		after := "-"
		if d, ok := took(m.Status.StartTime, &e.ReachedAt); ok {
			after = "+" + d.String()
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", timestamp(&e.ReachedAt), after, clean(string(e.Phase)), clean(e.Observed))
	}
	if !isTerminal(m) {
		since := "-"
		if m.Status.PhaseStartTime != nil {
			since = "since " + timestamp(m.Status.PhaseStartTime)
		}
		fmt.Fprintf(tw, "  (not yet)\t%s\t%s\tworking toward it: %s\n", since, clean(string(phaseOf(m))), clean(referToLastError(m, progressingMessage(m))))
	}
	_ = tw.Flush()
}

func progressingMessage(m *v1alpha1.VirtualMachineMigration) string {
	if c := condition(m, "Progressing"); c != nil {
		return c.Message
	}
	return "not looked at by the controller yet"
}

// describeDisks shows each disk's evidence chain: the source disk, the
// bytes and SHA-256 the transfer verified into the staging volume, the
// SHA-256 of the converted image, the import into the target DataVolume,
// the SHA-256 read back from the target claim, and whether the chain holds.
func describeDisks(w io.Writer, m *v1alpha1.VirtualMachineMigration, _ time.Time) {
	if len(m.Status.Disks) == 0 {
		return
	}
	fmt.Fprintln(w, "\nDisks:")
	for _, d := range m.Status.Disks {
		fmt.Fprintf(w, "  %s (source disk %d%s):\n", clean(d.Name), d.Key, sourceDiskLabel(m, d.Key))
		tw := printers.GetNewTabWriter(w)
		fmt.Fprintf(tw, "    source:\t%s\n", humanBytesExact(d.CapacityBytes))
		fmt.Fprintf(tw, "    transfer:\t%s\n", transferEvidence(d))
		if c := copiedHow(d); c != "" {
			fmt.Fprintf(tw, "    copied:\t%s\n", c)
		}
		fmt.Fprintf(tw, "    in staging:\t%s\n", clean(stagingEvidence(d)))
		fmt.Fprintf(tw, "    converted:\t%s\n", clean(convertedEvidence(m, d)))
		fmt.Fprintf(tw, "    after import:\t%s\n", clean(importEvidence(d)))
		fmt.Fprintf(tw, "    on the target:\t%s\n", clean(targetEvidence(d)))
		fmt.Fprintf(tw, "    chain:\t%s\n", clean(chainVerdict(m, d)))
		_ = tw.Flush()
	}
}

func sourceDiskLabel(m *v1alpha1.VirtualMachineMigration, key int32) string {
	if m.Status.Source == nil {
		return ""
	}
	for _, sd := range m.Status.Source.Disks {
		if sd.Key == key {
			return ", " + clean(strings.TrimSpace(sd.Label+" "+sd.FileName))
		}
	}
	return ""
}

func humanBytesExact(n int64) string {
	return fmt.Sprintf("%d bytes (%s)", n, humanBytes(n))
}

func transferEvidence(d v1alpha1.DiskStatus) string {
	if d.TransferredAt == nil {
		if d.BytesTransferred == 0 {
			return "not started"
		}
		so := fmt.Sprintf("%s of %s so far", humanBytes(d.BytesTransferred), humanBytes(d.CapacityBytes))
		if d.RateBytesPerSecond > 0 {
			so += fmt.Sprintf(", %s, ETA %s", humanRate(d.RateBytesPerSecond), humanETA(d.ETASeconds))
		}
		return so
	}
	return fmt.Sprintf("%s verified at %s", humanBytesExact(d.BytesTransferred), timestamp(d.TransferredAt))
}

// copiedHow says how a transferred disk was read from the source: its
// allocated areas only, or whole and why; "" before the transfer is done
// or when the transfer did not say.
func copiedHow(d v1alpha1.DiskStatus) string {
	switch {
	case d.TransferredAt == nil:
		return ""
	case d.AllocatedOnly:
		allocated := "in use"
		if d.AllocatedBytes != nil {
			allocated = humanBytes(*d.AllocatedBytes) + " in use"
		}
		return fmt.Sprintf("allocated areas only (%s), %s read from the source", allocated, humanBytes(d.BytesRead))
	case d.FullCopyReason != "":
		return fmt.Sprintf("whole disk, %s read from the source: %s", humanBytes(d.BytesRead), clean(d.FullCopyReason))
	}
	return ""
}

func stagingEvidence(d v1alpha1.DiskStatus) string {
	claim := "claim " + orNone(d.StagingClaim)
	if d.WrittenInPlace() {
		claim += " (the VM's disk, written in place)"
	}
	if d.SHA256 == "" {
		return claim + ", no checksum yet"
	}
	return fmt.Sprintf("%s, sha256 %s (of the image as written)", claim, clean(d.SHA256))
}

func importEvidence(d v1alpha1.DiskStatus) string {
	if d.DataVolume == "" {
		return "not started"
	}
	s := fmt.Sprintf("DataVolume %s %s", d.DataVolume, orNone(d.ImportPhase))
	if d.ImportProgress != "" {
		s += " " + clean(d.ImportProgress)
	}
	return s
}

// describeConversion shows the conversion: its Job, the guest virt-v2v
// inspected and the warnings it printed.
func describeConversion(w io.Writer, m *v1alpha1.VirtualMachineMigration, _ time.Time) {
	c := m.Status.Conversion
	if c == nil {
		return
	}
	fmt.Fprintln(w, "\nConversion:")
	tw := printers.GetNewTabWriter(w)
	defer func() { _ = tw.Flush() }()
	if c.Skipped {
		fmt.Fprintln(tw, "  skipped:\tspec.conversion.skip is true")
		return
	}
	job := fmt.Sprintf("%s (attempt %d)", c.JobName, c.Attempt)
	if c.CompletedAt != nil {
		job += ", completed at " + timestamp(c.CompletedAt)
	}
	fmt.Fprintf(tw, "  job:\t%s\n", clean(job))
	fmt.Fprintf(tw, "  guest:\t%s\n", orNone(clean(c.OperatingSystem)))
	if c.CompletedAt != nil && len(c.Warnings) == 0 {
		fmt.Fprintln(tw, "  virt-v2v warnings:\tnone")
	}
	for i, warning := range c.Warnings {
		label := ""
		if i == 0 {
			label = "virt-v2v warnings:"
		}
		fmt.Fprintf(tw, "  %s\t%s\n", label, clean(warning))
	}
}

// describeSourceControl shows what the controller did to the source VM.
func describeSourceControl(w io.Writer, m *v1alpha1.VirtualMachineMigration, _ time.Time) {
	sc := m.Status.SourceControl
	if sc == nil {
		return
	}
	fmt.Fprintln(w, "\nSource VM:")
	tw := printers.GetNewTabWriter(w)
	fmt.Fprintf(tw, "  found:\t%s\n", orNone(clean(sc.OriginalPowerState)))
	printIfSet(tw, "  guest shutdown requested:", sc.ShutdownRequestedAt)
	printIfSet(tw, "  power-off requested:", sc.PowerOffRequestedAt)
	printIfSet(tw, "  seen powered off:", sc.PoweredOffAt)
	printIfSet(tw, "  power-on requested:", sc.RestoreRequestedAt)
	printIfSet(tw, "  seen restored:", sc.RestoredAt)
	for _, s := range sc.Snapshots {
		state := "present"
		if s.RemovedAt != nil {
			state = "removed at " + timestamp(s.RemovedAt)
		}
		fmt.Fprintf(tw, "  snapshot %s:\t%s\n", clean(s.Name), state)
	}
	_ = tw.Flush()
}

func describeConditions(w io.Writer, m *v1alpha1.VirtualMachineMigration, now time.Time) {
	fmt.Fprintln(w, "\nConditions:")
	if len(m.Status.Conditions) == 0 {
		fmt.Fprintln(w, "  <none>")
		return
	}
	tw := printers.GetNewTabWriter(w)
	fmt.Fprintln(tw, "  TYPE\tSTATUS\tREASON\tSINCE\tMESSAGE")
	for _, c := range m.Status.Conditions {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", clean(c.Type), clean(string(c.Status)), clean(c.Reason), age(&c.LastTransitionTime, now), clean(referToLastError(m, c.Message)))
	}
	_ = tw.Flush()
}

// describeEvents lists the migration's events, oldest first, as kubectl
// describe does, the last error's message said only on its own line.
func describeEvents(w io.Writer, m *v1alpha1.VirtualMachineMigration, events []corev1.Event, now time.Time) {
	fmt.Fprintln(w, "\nEvents:")
	if len(events) == 0 {
		fmt.Fprintln(w, "  <none>")
		return
	}
	sort.SliceStable(events, func(i, j int) bool { ti, tj := eventTime(events[i]), eventTime(events[j]); return ti.Before(&tj) })
	tw := printers.GetNewTabWriter(w)
	fmt.Fprintln(tw, "  TYPE\tREASON\tAGE\tMESSAGE")
	for _, e := range events {
		t := eventTime(e)
		count := ""
		if e.Count > 1 {
			count = fmt.Sprintf(" (x%d)", e.Count)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s%s\t%s\n", clean(e.Type), clean(e.Reason), age(&t, now), count, clean(referToLastError(m, e.Message)))
	}
	_ = tw.Flush()
}

// printIfSet writes "label<TAB>time" when the time is set.
func printIfSet(w io.Writer, label string, t *metav1.Time) {
	if t != nil {
		fmt.Fprintf(w, "%s\t%s\n", label, timestamp(t))
	}
}

// eventTime is when an event last happened, whichever API wrote it.
func eventTime(e corev1.Event) metav1.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp
	case !e.EventTime.IsZero():
		return metav1.NewTime(e.EventTime.Time)
	default:
		return e.CreationTimestamp
	}
}
