package cli

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
)

// maxEstimateSamples is how many of the latest finished migrations of a
// namespace the downtime estimate measures from: recent ones tell the
// cluster's and the link's rates as they are now.
const maxEstimateSamples = 20

// minHashSpread is how far apart, in bytes hashed whole, the samples'
// conversions must be for their times to give the rate of that hashing.
const minHashSpread = 1 << 30

// The estimate reckons each part of the outage as what it does makes it
// grow:
//
//   - TransferringDisks reads every byte from the source and writes it:
//     the bytes of the disks at the rate the samples' transfers measured.
//   - Converting is the conversion's own work, about the same for every
//     guest whatever its size (virt-v2v-in-place on a qcow2 overlay of
//     each disk, the overlay committed, and the 1 MiB blocks it wrote
//     re-hashed in the disk's block tree), plus the disks it hashes whole:
//     a claim in Block volume mode has no block tree beside it, and the
//     conversion hashes its device whole (before the block tree every
//     image was hashed whole: from 18 MiB to 4 GiB the conversion went
//     from 5 s to 52 s). Each sample's own part is its conversion time
//     less the bytes it hashed whole at the rate of that hashing.
//   - Importing (CDI adopts the claims the transfer wrote: no copy, no
//     pod), CreatingVM and Starting: the samples' median.

// outageSample is one finished migration's outage and the bytes it moved.
type outageSample struct {
	bytes int64
	// hashedWhole is how many bytes its conversion hashed whole.
	hashedWhole int64
	// converted says its conversion ran (it was not skipped).
	converted bool
	seconds   map[v1alpha1.Phase]int64
	ended     time.Time
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
		s := outageSample{bytes: diskBytes(src), hashedWhole: hashedWhole(m), seconds: map[v1alpha1.Phase]int64{}, ended: dt.TargetRunningAt.Time,
			converted: m.Status.Conversion == nil || !m.Status.Conversion.Skipped}
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

// hashedWhole is how many bytes m's conversion hashed whole, from its
// disks' checksums: a disk of the whole-image SHA-256 (no checksum scheme:
// a transfer before the block tree) whose converted checksum is the
// conversion's, and a disk whose block tree the conversion re-hashed
// entirely (a Block claim's device, which has no tree). A disk re-hashed
// only where the conversion wrote counts none: those blocks are part of
// the conversion's own work.
func hashedWhole(m *v1alpha1.VirtualMachineMigration) int64 {
	var n int64
	for _, d := range m.Status.Disks {
		sums := d.Checksums
		switch {
		case sums == nil || sums.Converted == "" || sums.Compared == v1alpha1.ComparedReadOnce:
		case d.ChecksumScheme == "" || sums.RehashedBytes >= d.CapacityBytes:
			n += d.CapacityBytes
		}
	}
	return n
}

// blockClaims names the claims among a plan's objects in Block volume
// mode: the conversion hashes their devices whole.
func blockClaims(objects []*unstructured.Unstructured) map[string]bool {
	out := map[string]bool{}
	for _, o := range objects {
		if o.GetKind() != "PersistentVolumeClaim" {
			continue
		}
		if mode, _, _ := unstructured.NestedString(o.Object, "spec", "volumeMode"); mode == string(corev1.PersistentVolumeBlock) {
			out[o.GetName()] = true
		}
	}
	return out
}

// downtimeEstimate says, before the stop, how long m's outage is likely to
// be, from the namespace's latest finished migrations (others): the bytes
// of its disks at the rate their transfers measured, the conversion's own
// part at their median plus the disks it will hash whole (those whose
// claim blockClaims names) at the rate they measured that hashing, and the
// median of the parts that do not grow with the size; or why there is no
// estimate.
func downtimeEstimate(m *v1alpha1.VirtualMachineMigration, others []v1alpha1.VirtualMachineMigration, blockClaims map[string]bool) string {
	if m.Status.Source == nil {
		return "none yet: the source VM is not inventoried"
	}
	bytes := diskBytes(m.Status.Source)
	samples := outageSamples(slices.DeleteFunc(slices.Clone(others), func(o v1alpha1.VirtualMachineMigration) bool { return o.UID == m.UID }))
	if len(samples) == 0 {
		return fmt.Sprintf("none: no migration in namespace %s has yet run to a running VM, whose outage would give the rates to estimate %s of disks from", m.Namespace, humanBytes(bytes))
	}
	var wholeBytes int64
	for _, d := range m.Status.Disks {
		if blockClaims[d.StagingClaim] {
			wholeBytes += d.CapacityBytes
		}
	}
	spec := m.SpecInForce()
	var total time.Duration
	var parts []string
	for _, phase := range statemachine.OutagePhases() {
		if (phase == v1alpha1.PhaseConverting && spec.Conversion.Skip) || (phase == v1alpha1.PhaseStarting && !spec.Target.StartEnabled()) {
			continue
		}
		var d time.Duration
		var how string
		switch phase {
		case v1alpha1.PhaseTransferringDisks:
			d, how = transferEstimate(bytes, samples)
		case v1alpha1.PhaseConverting:
			d, how = conversionEstimate(wholeBytes, samples)
		default:
			d = medianSeconds(phase, samples)
		}
		total += d
		parts = append(parts, fmt.Sprintf("%s %s%s", phase, humanDuration(d), how))
	}
	return fmt.Sprintf("about %s for %s of disks, at the rates of the latest %s in namespace %s (%s)",
		humanDuration(total), humanBytes(bytes), pluralize(len(samples), "finished migration"), m.Namespace, strings.Join(parts, ", "))
}

// transferRate is the bytes per second the samples' transfers moved; 0
// when they were too fast to measure.
func transferRate(samples []outageSample) float64 {
	var movedBytes, seconds int64
	for _, s := range samples {
		movedBytes, seconds = movedBytes+s.bytes, seconds+s.seconds[v1alpha1.PhaseTransferringDisks]
	}
	if seconds == 0 {
		return 0
	}
	return float64(movedBytes) / float64(seconds)
}

// transferEstimate is the time the transfer of bytes is likely to take,
// and how it was reckoned, for a person.
func transferEstimate(bytes int64, samples []outageSample) (time.Duration, string) {
	rate := transferRate(samples)
	if rate == 0 {
		return 0, " (too fast to measure)"
	}
	return atRate(bytes, rate), fmt.Sprintf(" at %s", humanRate(int64(rate)))
}

// conversionEstimate is the time the conversion is likely to take when it
// hashes wholeBytes whole: the median of the samples' own parts, plus
// wholeBytes at the rate they hashed whole; and how it was reckoned.
func conversionEstimate(wholeBytes int64, samples []outageSample) (time.Duration, string) {
	converted := slices.DeleteFunc(slices.Clone(samples), func(s outageSample) bool { return !s.converted })
	if len(converted) == 0 {
		return 0, " (no finished migration ran its conversion)"
	}
	rate := wholeHashRate(converted)
	own := make([]float64, 0, len(converted))
	for _, s := range converted {
		seconds := float64(s.seconds[v1alpha1.PhaseConverting])
		if rate > 0 {
			seconds = max(0, seconds-float64(s.hashedWhole)/rate)
		}
		own = append(own, seconds)
	}
	slices.Sort(own)
	ownPart := time.Duration(own[len(own)/2] * float64(time.Second)).Round(time.Second)
	switch {
	case wholeBytes == 0:
		return ownPart, ""
	case rate == 0:
		return ownPart, fmt.Sprintf(" (and %s of Block disks hashed whole, at a rate not measured)", humanBytes(wholeBytes))
	}
	return ownPart + atRate(wholeBytes, rate), fmt.Sprintf(" (%s of its own work, %s of Block disks hashed whole at %s)",
		humanDuration(ownPart), humanBytes(wholeBytes), humanRate(int64(rate)))
}

// wholeHashRate is the bytes per second at which the samples'
// conversions hashed disks whole: the least-squares slope of their
// conversion times over the bytes they hashed whole, where those bytes
// differ by minHashSpread or more among them; else the transfer's rate
// (which reads and hashes every byte too, through the network: the
// conversion's read of a local volume is seldom slower); 0 when neither
// is known.
func wholeHashRate(samples []outageSample) float64 {
	lo, hi := samples[0].hashedWhole, samples[0].hashedWhole
	var meanX, meanY float64
	for _, s := range samples {
		lo, hi = min(lo, s.hashedWhole), max(hi, s.hashedWhole)
		meanX += float64(s.hashedWhole) / float64(len(samples))
		meanY += float64(s.seconds[v1alpha1.PhaseConverting]) / float64(len(samples))
	}
	if hi-lo >= minHashSpread {
		var cov, variance float64
		for _, s := range samples {
			dx := float64(s.hashedWhole) - meanX
			cov += dx * (float64(s.seconds[v1alpha1.PhaseConverting]) - meanY)
			variance += dx * dx
		}
		if cov > 0 {
			return variance / cov
		}
	}
	return transferRate(samples)
}

// medianSeconds is the median time the samples took for phase.
func medianSeconds(phase v1alpha1.Phase, samples []outageSample) time.Duration {
	times := make([]int64, 0, len(samples))
	for _, s := range samples {
		times = append(times, s.seconds[phase])
	}
	slices.Sort(times)
	return time.Duration(times[len(times)/2]) * time.Second
}

// atRate is how long bytes take at rate bytes per second, to the second.
func atRate(bytes int64, rate float64) time.Duration {
	return time.Duration(float64(bytes) / rate * float64(time.Second)).Round(time.Second)
}
