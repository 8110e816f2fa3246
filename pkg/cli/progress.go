package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/cli-runtime/pkg/printers"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// barWidth is the number of cells of a progress bar.
const barWidth = 30

// printProgress writes one migration's live view: phase and time in it,
// overall progress, a bar per disk with rate and ETA, and what it waits for.
func printProgress(w io.Writer, m *v1alpha1.VirtualMachineMigration, now time.Time) error {
	head := fmt.Sprintf("%s/%s: %s", m.Namespace, m.Name, phaseOf(m))
	head += deletionNote(m)
	if m.Status.PhaseStartTime != nil && !isTerminal(m) {
		head += " for " + age(m.Status.PhaseStartTime, now)
	}
	if p := progressOf(m); p != "" {
		head += ", " + p
	}
	if _, err := fmt.Fprintln(w, clean(head)); err != nil {
		return err
	}
	if err := printDiskBars(w, m); err != nil {
		return err
	}
	if pw := m.Status.PodWaiting; pw != nil && !isTerminal(m) && m.DeletionTimestamp == nil {
		fmt.Fprintf(w, "Waiting: %s for %s: %s\n", clean(pw.Reason), age(&pw.Since, now), clean(podWaitingMessage(m, pw, now)))
	} else if reason, message, ok := waiting(m); ok {
		fmt.Fprintf(w, "Waiting: %s: %s\n", clean(reason), clean(message))
	}
	if line := lastErrorLine(m); line != "" && (isTerminal(m) || m.Status.Phase == v1alpha1.PhaseRollingBack) {
		fmt.Fprintf(w, "Error: %s\n", line)
	}
	_, err := fmt.Fprintf(w, "Next: %s\n", nextStep(m))
	return err
}

// printDiskBars writes a progress bar per disk, aligned.
func printDiskBars(w io.Writer, m *v1alpha1.VirtualMachineMigration) error {
	rows := disksProgress(m)
	if len(rows) == 0 {
		return nil
	}
	tw := printers.GetNewTabWriter(w)
	for _, r := range rows {
		line := fmt.Sprintf("  %s\t%s\t%s %3d%%\t%s", clean(r.name), r.stage, bar(r.fraction, barWidth), int(r.fraction*100), clean(r.detail))
		if r.rate != "" {
			line += "\t" + r.rate + "\t" + etaCell(r.eta)
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}

func etaCell(eta string) string {
	if eta == "" || eta == "-" {
		return eta
	}
	return "ETA " + eta
}

// progressLine is the migration's progress on one line, for watches whose
// output is not a terminal: a line is printed each time it changes. It
// is cleaned whole: what status holds cannot break it.
func progressLine(m *v1alpha1.VirtualMachineMigration) string {
	parts := []string{m.Name, string(phaseOf(m))}
	if note := deletionNote(m); note != "" {
		parts = append(parts, note[1:])
	}
	if p := progressOf(m); p != "" {
		parts = append(parts, p)
	}
	var disks []string
	for _, r := range disksProgress(m) {
		d := fmt.Sprintf("%s %s %d%%", r.name, r.stage, int(r.fraction*100))
		if r.rate != "" && r.rate != "-" {
			d += " " + r.rate
		}
		if r.eta != "" && r.eta != "-" {
			d += " ETA " + r.eta
		}
		disks = append(disks, d)
	}
	if len(disks) > 0 {
		parts = append(parts, "["+strings.Join(disks, ", ")+"]")
	}
	if reason, message, ok := waiting(m); ok {
		parts = append(parts, "waiting: "+clean(reason)+": "+clean(message))
	}
	if isTerminal(m) && m.Status.LastError != nil {
		parts = append(parts, "error: "+lastErrorLine(m))
	}
	return clean(strings.Join(parts, " "))
}
