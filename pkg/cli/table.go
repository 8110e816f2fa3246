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
	// wide adds the disks, rate, ETA and last error columns.
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
		cols = append(cols, "DISKS", "RATE", "ETA", "LAST ERROR")
	}
	return cols
}

// tableRow is one migration's row cells. A source VM name longer than
// naming.MaxDisplayName is shortened in the middle, as kubectl get's
// column (status.sourceName) has it; -o yaml and describe show it whole.
func tableRow(m *v1alpha1.VirtualMachineMigration, o tableOptions, now time.Time) []string {
	reason := rowReason(m)
	phase := string(phaseOf(m))
	phase += deletionNote(m)
	row := []string{m.Name, phase, orNone(progressOf(m)), orNone(naming.Shorten(clean(sourceName(m)), naming.MaxDisplayName)),
		orNone(targetNameOf(m)), orNone(clean(reason)), age(&m.CreationTimestamp, now)}
	if o.withNamespace {
		row = append([]string{m.Namespace}, row...)
	}
	if o.wide {
		disks := none
		if n := len(m.Status.Disks); n > 0 {
			disks = fmt.Sprint(n)
		} else if m.Status.Source != nil {
			disks = fmt.Sprint(len(m.Status.Source.Disks))
		}
		lastErr := none
		if m.Status.LastError != nil {
			lastErr = clean(m.Status.LastError.Reason)
		}
		row = append(row, disks, humanRate(overallRate(m)), humanETA(overallETA(m)), lastErr)
	}
	return row
}

// rowReason is why the migration waits, or how it ended: the Progressing
// condition's reason once it ended (TargetStarted, or the failure's), as
// kubectl get -o wide shows it.
func rowReason(m *v1alpha1.VirtualMachineMigration) string {
	if reason, _, ok := waiting(m); ok {
		return reason
	}
	if c := condition(m, statemachine.ConditionProgressing); c != nil && isTerminal(m) {
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
