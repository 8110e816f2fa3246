package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/cli-runtime/pkg/printers"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/pkg/statemachine"
)

// tableOptions shape the list table.
type tableOptions struct {
	// wide adds the disks, what each waits for, rate, ETA, downtime and
	// last error columns.
	wide bool
	// withNamespace adds the NAMESPACE column (--all-namespaces).
	withNamespace bool
	// noHeaders leaves the header line out.
	noHeaders bool
}

// tableHeader is the table's header line cells.
func tableHeader(o tableOptions) []string {
	cols := []string{"NAME", "PHASE", "PROGRESS", "SOURCE", "TARGET", "REASON", "AGE"}
	if o.withNamespace {
		cols = append([]string{"NAMESPACE"}, cols...)
	}
	if o.wide {
		cols = append(cols, "DISKS", "WAITING FOR", "RATE", "ETA", "DOWNTIME", "LAST ERROR")
	}
	return cols
}

// tableRow is one migration's row cells. A source VM name longer than
// naming.MaxDisplayName is shortened in the middle, as kubectl get's
// column (status.sourceName) has it; -o yaml and describe show it whole.
// REASON and LAST ERROR are kubectl get -o wide's Reason and Last Error
// columns (the Progressing condition's reason, status.lastError.summary);
// a stall, which the Progressing condition does not tell, shows in PHASE.
// Every cell is cleaned: one line, one cell, whatever status holds; a
// cell with nothing to show reads "-" (emptyCell), in every column.
func tableRow(m *v1alpha1.VirtualMachineMigration, o tableOptions, now time.Time) []string {
	phase := string(phaseOf(m))
	phase += deletionNote(m)
	if isStalled(m) {
		phase += " (stalled)"
	}
	created := ""
	if !m.CreationTimestamp.IsZero() {
		created = age(&m.CreationTimestamp, now)
	}
	row := []string{m.Name, phase, progressOf(m), naming.Shorten(clean(sourceName(m)), naming.MaxDisplayName),
		targetNameOf(m), rowReason(m), created}
	if o.withNamespace {
		row = append([]string{m.Namespace}, row...)
	}
	if o.wide {
		disks := ""
		if n := len(m.Status.Disks); n > 0 {
			disks = fmt.Sprint(n)
		} else if m.Status.Source != nil {
			disks = fmt.Sprint(len(m.Status.Source.Disks))
		}
		row = append(row, disks, waitsFor(m), humanRate(overallRate(m)), humanETA(overallETA(m)), downtimeTotal(m, now), lastErrorSummary(m))
	}
	for i := range row {
		row[i] = orEmpty(clean(row[i]))
	}
	return row
}

// emptyCell is what a table cell with nothing to show reads, in every
// column: no progress figure yet, no target, no error, no rate.
const emptyCell = "-"

// orEmpty returns a cell's text, or emptyCell when it has none.
func orEmpty(s string) string {
	if s == "" {
		return emptyCell
	}
	return s
}

// rowReason is the Progressing condition's reason, as kubectl get -o wide
// shows it: Working, why the migration waits, or how it ended.
func rowReason(m *v1alpha1.VirtualMachineMigration) string {
	if c := condition(m, statemachine.ConditionProgressing); c != nil {
		return c.Reason
	}
	return ""
}

// printTable writes the migrations as a kubectl-style table.
func printTable(w io.Writer, items []v1alpha1.VirtualMachineMigration, o tableOptions, now time.Time) error {
	tw := printers.GetNewTabWriter(w)
	if !o.noHeaders {
		fmt.Fprintln(tw, strings.Join(tableHeader(o), "\t"))
	}
	for i := range items {
		fmt.Fprintln(tw, strings.Join(tableRow(&items[i], o, now), "\t"))
	}
	return tw.Flush()
}
