package cli

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
)

// maxEstimateSamples is how many of the latest finished migrations of a
// namespace the downtime estimate measures from: recent ones tell the
// cluster's and the link's rates as they are now.
const maxEstimateSamples = 20

// byteBoundPhases are the parts of the outage whose time grows with the
// bytes of the disks (the transfer; the import, a copy and a read of every
// byte): the estimate scales them by the rate measured. The others (the
// conversion, the VM's creation and start) take about the same time
// whatever the size, and the estimate takes their median.
var byteBoundPhases = map[v1alpha1.Phase]bool{v1alpha1.PhaseTransferringDisks: true, v1alpha1.PhaseImporting: true}

// outageSample is one finished migration's outage and the bytes it moved.
type outageSample struct {
	bytes   int64
	seconds map[v1alpha1.Phase]int64
	ended   time.Time
}

// outageSamples are the migrations of others whose outage ended with the
// target running and recorded every part, the latest first, at most
// maxEstimateSamples.
func outageSamples(others []v1alpha1.VirtualMachineMigration) []outageSample {
	var out []outageSample
	for i := range others {
		m := &others[i]
		dt, src := m.Status.Downtime, m.Status.Source
		if dt == nil || dt.TargetRunningAt == nil || src == nil || len(dt.Phases) != len(statemachine.OutagePhases()) {
			continue
		}
		s := outageSample{bytes: diskBytes(src), seconds: map[v1alpha1.Phase]int64{}, ended: dt.TargetRunningAt.Time}
		for _, p := range dt.Phases {
			s.seconds[p.Phase] = p.Seconds
		}
		if s.bytes > 0 {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ended.After(out[j].ended) })
	return out[:min(len(out), maxEstimateSamples)]
}

// diskBytes is the capacity of the inventoried disks.
func diskBytes(src *v1alpha1.SourceInventory) int64 {
	var n int64
	for _, d := range src.Disks {
		n += d.CapacityBytes
	}
	return n
}

// downtimeEstimate says, before the stop, how long m's outage is likely to
// be: the bytes of its disks at the rates the namespace's latest finished
// migrations (others) measured, plus the median of the parts that do not
// grow with the size; or why there is no estimate.
func downtimeEstimate(m *v1alpha1.VirtualMachineMigration, others []v1alpha1.VirtualMachineMigration) string {
	if m.Status.Source == nil {
		return "none yet: the source VM is not inventoried"
	}
	bytes := diskBytes(m.Status.Source)
	samples := outageSamples(slices.DeleteFunc(slices.Clone(others), func(o v1alpha1.VirtualMachineMigration) bool { return o.UID == m.UID }))
	if len(samples) == 0 {
		return fmt.Sprintf("none: no migration in namespace %s has yet run to a running VM, whose outage would give the rates to estimate %s of disks from", m.Namespace, humanBytes(bytes))
	}
	spec := m.SpecInForce()
	var total time.Duration
	var parts []string
	for _, phase := range statemachine.OutagePhases() {
		if (phase == v1alpha1.PhaseConverting && spec.Conversion.Skip) || (phase == v1alpha1.PhaseStarting && !spec.Target.StartEnabled()) {
			continue
		}
		d, how := phaseEstimate(phase, bytes, samples)
		total += d
		parts = append(parts, fmt.Sprintf("%s %s%s", phase, humanDuration(d), how))
	}
	return fmt.Sprintf("about %s for %s of disks, at the rates of the latest %s in namespace %s (%s)",
		humanDuration(total), humanBytes(bytes), pluralize(len(samples), "finished migration"), m.Namespace, strings.Join(parts, ", "))
}

// phaseEstimate is the time one part of the outage is likely to take for
// bytes: scaled by the samples' rate for a byte-bound part, their median
// otherwise; and how it was reckoned, for a person.
func phaseEstimate(phase v1alpha1.Phase, bytes int64, samples []outageSample) (time.Duration, string) {
	if byteBoundPhases[phase] {
		var movedBytes, seconds int64
		for _, s := range samples {
			movedBytes, seconds = movedBytes+s.bytes, seconds+s.seconds[phase]
		}
		if seconds == 0 {
			return 0, " (too fast to measure)"
		}
		rate := float64(movedBytes) / float64(seconds)
		return time.Duration(float64(bytes) / rate * float64(time.Second)).Round(time.Second), fmt.Sprintf(" at %s", humanRate(int64(rate)))
	}
	var times []int64
	for _, s := range samples {
		times = append(times, s.seconds[phase])
	}
	slices.Sort(times)
	return time.Duration(times[len(times)/2]) * time.Second, ""
}
