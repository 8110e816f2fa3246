package cli

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
)

// summaryPageSize is how many migrations one list call of --summary reads
// (as kubectl's --chunk-size): a wave of 5,000 costs ten calls, and the
// summary holds one page at a time, keeping only counts.
const summaryPageSize = 500

// summaryReasonsShown is how many reasons a phase's line names; the rest
// are counted together.
const summaryReasonsShown = 5

// waveSummary counts migrations by phase and, within a phase, by why
// they are there: what a running one waits on, why one failed.
type waveSummary struct {
	total   int
	byPhase map[v1alpha1.Phase]int
	reasons map[v1alpha1.Phase]map[string]int
	// beforeStop counts the migrations waiting in Queued, their source
	// running, for a transfer slot or conversion capacity, by reason;
	// capacity is what the last one waiting for conversion capacity said
	// of it ("4 of 4 conversion slots taken").
	beforeStop map[string]int
	capacity   string
}

func newWaveSummary() *waveSummary {
	return &waveSummary{byPhase: map[v1alpha1.Phase]int{}, reasons: map[v1alpha1.Phase]map[string]int{}, beforeStop: map[string]int{}}
}

// add counts one migration.
func (s *waveSummary) add(m *v1alpha1.VirtualMachineMigration) {
	phase := phaseOf(m)
	s.total++
	s.byPhase[phase]++
	s.addBeforeStop(m)
	reason := summaryReason(m)
	if reason == "" {
		return
	}
	if s.reasons[phase] == nil {
		s.reasons[phase] = map[string]int{}
	}
	s.reasons[phase][reason]++
}

// summaryReason is why a migration is in its phase, in a word the summary
// counts: "deleting" or "cancelling" for one being deleted; for one that
// failed, its error's reason (a refusal by preflight with its first
// finding's: "PreflightFailed (RDMDisk)"); for one running, the reason
// its pod has not started ("pod ImagePullBackOff"), else why it waits
// (Stalled, Paused, the Progressing condition's reason when False), else
// the Progressing reason (Working); none for one that succeeded.
func summaryReason(m *v1alpha1.VirtualMachineMigration) string {
	phase := phaseOf(m)
	switch {
	case m.DeletionTimestamp != nil && phase != v1alpha1.PhaseCancelling:
		return strings.Trim(deletionNote(m), " ()")
	case phase == v1alpha1.PhaseSucceeded:
		return ""
	case phase == v1alpha1.PhaseFailed && m.Status.LastError != nil:
		return failureReason(m.Status.LastError)
	case m.Status.PodWaiting != nil && !isTerminal(m):
		return "pod " + clean(m.Status.PodWaiting.Reason)
	}
	if reason, _, ok := waiting(m); ok {
		return clean(reason)
	}
	return clean(rowReason(m))
}

// stopWaits are the reasons a migration waits in Queued for capacity,
// its source running, as the summary's last line names them.
var stopWaits = map[string]string{
	statemachine.ReasonWaitingForConversionCapacity: "for conversion capacity",
	statemachine.ReasonWaitingForTransferSlot:       "for a transfer slot",
}

// addBeforeStop counts m when it waits in Queued for capacity before its
// stop.
func (s *waveSummary) addBeforeStop(m *v1alpha1.VirtualMachineMigration) {
	if phaseOf(m) != v1alpha1.PhaseQueued || m.DeletionTimestamp != nil {
		return
	}
	reason, message, ok := waiting(m)
	if _, paced := stopWaits[reason]; !ok || !paced {
		return
	}
	s.beforeStop[reason]++
	if reason == statemachine.ReasonWaitingForConversionCapacity {
		s.capacity = capacityNote(message)
	}
}

// capacityTaken and capacityHeld find, in a WaitingForConversionCapacity
// message, how many slots are taken or what the scheduler lacks.
var (
	capacityTaken = regexp.MustCompile(`^\d+ of \d+ conversion slots taken`)
	capacityHeld  = regexp.MustCompile(`wait for a node with room \(the scheduler: ([^)]*)\)`)
)

// capacityNote is the gist of a WaitingForConversionCapacity message:
// "4 of 4 conversion slots taken", or "a conversion pod waits for room:
// Insufficient cpu"; the message's start otherwise.
func capacityNote(message string) string {
	if taken := capacityTaken.FindString(message); taken != "" {
		return taken
	}
	if held := capacityHeld.FindStringSubmatch(message); held != nil {
		return "a conversion pod waits for room: " + held[1]
	}
	first, _, _ := strings.Cut(message, ": ")
	return first
}

// beforeStopLine says how many migrations wait before their stop, their
// source running, and for what: "" when none does.
func (s *waveSummary) beforeStopLine() string {
	n := 0
	for _, c := range s.beforeStop {
		n += c
	}
	if n == 0 {
		return ""
	}
	var parts []string
	for _, reason := range []string{statemachine.ReasonWaitingForConversionCapacity, statemachine.ReasonWaitingForTransferSlot} {
		c := s.beforeStop[reason]
		if c == 0 {
			continue
		}
		part := fmt.Sprintf("%d %s", c, stopWaits[reason])
		if reason == statemachine.ReasonWaitingForConversionCapacity && s.capacity != "" {
			part += " (" + clean(s.capacity) + ")"
		}
		parts = append(parts, part)
	}
	return fmt.Sprintf("Before the stop: %d waiting, their source running: %s\n", n, strings.Join(parts, ", "))
}

// leadingFinding matches the "Reason: " a preflight refusal's message
// starts with (its first blocking finding).
var leadingFinding = regexp.MustCompile(`^([A-Z][A-Za-z0-9]*): `)

// failureReason is a failure's reason; a preflight refusal adds its first
// finding's reason, what a person fixes.
func failureReason(e *v1alpha1.MigrationError) string {
	reason := clean(e.Reason)
	if e.Reason == statemachine.ReasonPreflightFailed {
		if f := leadingFinding.FindStringSubmatch(e.Message); f != nil {
			reason += " (" + f[1] + ")"
		}
	}
	return reason
}

// phases are the phases counted, in the order migrations move through
// them; a phase this plugin does not know comes last.
func (s *waveSummary) phases() []v1alpha1.Phase {
	known := v1alpha1.Phases()
	var out, unknown []v1alpha1.Phase
	for _, p := range known {
		if s.byPhase[p] > 0 {
			out = append(out, p)
		}
	}
	for p := range s.byPhase {
		if !slices.Contains(known, p) {
			unknown = append(unknown, p)
		}
	}
	slices.Sort(unknown)
	return append(out, unknown...)
}

// reasonsLine names the reasons of a phase, the most frequent first, at
// most summaryReasonsShown of them and a count of the others.
func (s *waveSummary) reasonsLine(phase v1alpha1.Phase) string {
	counts := s.reasons[phase]
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if counts[a] != counts[b] {
			return counts[b] - counts[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, 0, summaryReasonsShown+1)
	others, otherReasons := 0, 0
	for i, k := range keys {
		if i < summaryReasonsShown {
			parts = append(parts, fmt.Sprintf("%d %s", counts[k], k))
			continue
		}
		others += counts[k]
		otherReasons++
	}
	if otherReasons > 0 {
		parts = append(parts, fmt.Sprintf("%d in %d other reasons", others, otherReasons))
	}
	return strings.Join(parts, ", ")
}

// print writes one line per phase present (its count and why), then the
// total, then how many wait before their stop and for what. Phase names are terminal-safe: a phase is a CRD enum, and an
// unknown one is escaped.
func (s *waveSummary) print(w io.Writer) error {
	phases := s.phases()
	nameWidth, countWidth := len("PHASE"), len("COUNT")
	for _, p := range phases {
		nameWidth = max(nameWidth, len(clean(string(p))))
	}
	countWidth = max(countWidth, len(fmt.Sprint(s.total)))
	line := func(name, count, why string) string {
		out := fmt.Sprintf("%-*s   %*s", nameWidth, name, countWidth, count)
		if why != "" {
			out += "   " + why
		}
		return out + "\n"
	}
	var b strings.Builder
	b.WriteString(line("PHASE", "COUNT", "WHY (count by reason)"))
	for _, p := range phases {
		b.WriteString(line(clean(string(p)), fmt.Sprint(s.byPhase[p]), s.reasonsLine(p)))
	}
	b.WriteString(line("TOTAL", fmt.Sprint(s.total), ""))
	b.WriteString(s.beforeStopLine())
	_, err := io.WriteString(w, b.String())
	return err
}

// summarize lists the migrations of ns (all namespaces for "") matching
// the selector, page by page, and counts them.
func (o *getOptions) summarize(ctx context.Context, clients Clients, ns string) (*waveSummary, error) {
	s := newWaveSummary()
	opts := metav1.ListOptions{LabelSelector: o.selector, Limit: summaryPageSize}
	for {
		page, err := clients.Migration.MigrationV1alpha1().VirtualMachineMigrations(ns).List(ctx, opts)
		if unserved(err) {
			return nil, errUnserved
		}
		if err != nil {
			return nil, fmt.Errorf("listing migrations: %w", err)
		}
		for i := range page.Items {
			s.add(&page.Items[i])
		}
		if page.Continue == "" {
			return s, nil
		}
		opts.Continue = page.Continue
	}
}

// checkSummaryFlags refuses what --summary cannot go with.
func (o *getOptions) checkSummaryFlags(name string) error {
	switch {
	case name != "":
		return fmt.Errorf("--summary counts a list of migrations: it takes no migration name")
	case o.output() != "":
		return fmt.Errorf("--summary prints a table of its own: it cannot go with -o %s", o.output())
	case o.watch:
		return fmt.Errorf("--summary cannot go with --watch: run it again (or under watch(1)) to follow a wave")
	}
	return nil
}
