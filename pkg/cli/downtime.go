package cli

import (
	"fmt"
	"strings"
	"time"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// downtimeTotal is the outage in one cell, for the table's DOWNTIME
// column: the whole outage once it ended, the time so far while it goes
// on, "-" when the migration did not stop its source, "unknown" when
// status does not say since when.
func downtimeTotal(m *v1alpha1.VirtualMachineMigration, now time.Time) string {
	dt := m.Status.Downtime
	switch {
	case dt == nil:
		return "-"
	case dt.Seconds != nil:
		return humanDuration(time.Duration(*dt.Seconds) * time.Second)
	case isTerminal(m):
		// Ended, its outage did not: a VM left halted, or a source left off.
		return "open"
	case dt.SourceStoppedAt.IsZero():
		// Going on since a time status does not hold (written so by a
		// controller of another version).
		return "unknown"
	}
	return humanDuration(now.Sub(dt.SourceStoppedAt.Time).Round(time.Second)) + " so far"
}

// downtimeLine is describe's Downtime line: the outage, when it began and
// ended, and the time of each of its parts.
func downtimeLine(m *v1alpha1.VirtualMachineMigration, now time.Time) string {
	dt := m.Status.Downtime
	if dt == nil {
		return ""
	}
	var s string
	switch {
	case dt.TargetRunningAt != nil:
		s = fmt.Sprintf("%s: source stopped %s, target running %s", downtimeTotal(m, now), timestamp(&dt.SourceStoppedAt), timestamp(dt.TargetRunningAt))
	case dt.SourceRestoredAt != nil:
		s = fmt.Sprintf("%s: source stopped %s, back on %s (the migration did not finish)", downtimeTotal(m, now), timestamp(&dt.SourceStoppedAt), timestamp(dt.SourceRestoredAt))
	case isTerminal(m):
		s = fmt.Sprintf("not ended: source stopped %s; it ends when the target VM (or the source) runs again", timestamp(&dt.SourceStoppedAt))
	default:
		s = fmt.Sprintf("%s: source stopped %s, now in %s", downtimeTotal(m, now), timestamp(&dt.SourceStoppedAt), phaseOf(m))
	}
	var parts []string
	for _, p := range dt.Phases {
		parts = append(parts, fmt.Sprintf("%s %s", p.Phase, humanDuration(time.Duration(p.Seconds)*time.Second)))
	}
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	return s
}
