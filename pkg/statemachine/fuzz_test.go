package statemachine

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// wholePercent is what status.progress holds: a whole percentage.
var wholePercent = regexp.MustCompile(`^(100|[1-9]?[0-9])%$`)

// checkProgress: status.progress is empty or a whole percentage from 0
// to 100.
func checkProgress(t *testing.T, what string, st *v1alpha1.VirtualMachineMigrationStatus) {
	t.Helper()
	if st.Progress != "" && !wholePercent.MatchString(st.Progress) {
		t.Fatalf("%s: status.progress %q", what, st.Progress)
	}
}

// TestProgressStaysWithinAHundred keeps what the fuzz targets' seeds
// found: a DataVolume whose status.progress read "NaN%" made
// status.progress "-9223372036854775808%" (parsePercent passed NaN on,
// and int(NaN) is the smallest int64); a transfer reporting more bytes
// done than its disk holds made it "190%", and one past 2^63/100 bytes
// overflowed the product. The import's figures run from
// ProgressConverted to ProgressImported, the transfer's from 0 to
// ProgressTransferred.
func TestProgressStaysWithinAHundred(t *testing.T) {
	imports := map[[2]string]string{
		{"NaN%", "NaN%"}:     "80%",
		{"NaN%", "100.0%"}:   "87%",
		{"-Inf%", "+Inf%"}:   "87%",
		{"45.20%", "12.5%"}:  "84%",
		{"250%", "N/A"}:      "87%",
		{"100.0%", "100.0%"}: "95%",
	}
	for p, want := range imports {
		d := &decider{
			st: &v1alpha1.VirtualMachineMigrationStatus{Phase: v1alpha1.PhaseImporting,
				Disks: []v1alpha1.DiskStatus{{Key: 2000, DataVolume: "dv-0"}, {Key: 2001, DataVolume: "dv-1"}}},
			obs: Observation{DataVolumes: map[string]DataVolumeObservation{"dv-0": {Phase: "ImportInProgress", Progress: p[0]},
				"dv-1": {Phase: "ImportInProgress", Progress: p[1]}}},
			now: metav1.Now(),
		}
		d.recordImportProgress()
		d.recordProgress()
		if d.st.Progress != want {
			t.Errorf("imports at %q and %q: status.progress %q, want %q", p[0], p[1], d.st.Progress, want)
		}
	}
	const gib = 1 << 30
	transfers := map[[2]int64]string{
		{40 * gib, 1}:           "70%",
		{40 * gib, 36 * gib}:    "70%",
		{math.MaxInt64 / 50, 1}: "70%",
		{-gib, -gib}:            "0%", // nothing moved: nothing recorded, the transfer's start
		{5 * gib, 0}:            "8%",
		{20*gib - 1, 0}:         "34%",
	}
	for done, want := range transfers {
		d := &decider{
			st: &v1alpha1.VirtualMachineMigrationStatus{Phase: v1alpha1.PhaseTransferringDisks,
				Disks: []v1alpha1.DiskStatus{{Key: 2000, CapacityBytes: 20 * gib}, {Key: 2001, CapacityBytes: 20 * gib}}},
			now: metav1.Now(),
		}
		d.recordTransferProgress([]DiskProgress{{Key: 2000, BytesDone: done[0]}, {Key: 2001, BytesDone: done[1]}})
		d.recordProgress()
		if d.st.Progress != want {
			t.Errorf("transfers at %d and %d bytes: status.progress %q, want %q", done[0], done[1], d.st.Progress, want)
		}
	}
}

// FuzzProgress records what CDI reports of two DataVolumes (their
// status.progress, "45.20%", any string CDI or whoever can write its
// status puts there) and what the transfer's progress wire says (bytes
// done and rate per disk, whatever a transfer pod writes into its
// ConfigMap) as the decisions do: parsePercent reads a number from 0 to
// 100, status.progress is a whole percentage from 0 to 100, and an ETA
// is never negative.
func FuzzProgress(f *testing.F) {
	const gib = 1 << 30
	transfers := [][6]int64{
		{5 * gib, 100 << 20, gib, 0, 20 * gib, gib},
		{20 * gib, 0, gib, 1, 20 * gib, gib},
		{-1, -1, -5, -1, 20 * gib, gib},
		{math.MaxInt64, math.MaxInt64, math.MaxInt64, 1, 20 * gib, gib},
		{math.MaxInt64 / 50, 1, 1, 1, math.MaxInt64 / 2, math.MaxInt64 / 2},
		{40 * gib, 1, 1, 1, 20 * gib, gib},
	}
	for i, s := range []string{"45.20%", "0%", "100.0%", "N/A", "", "100%", "-5%", "250%", "1e3%", "NaN%", "+Inf%", "-Inf%", "0x1p-2%",
		"45.20", " 45%", "45%%", "\x00", "\xff%", "漢字%", "\u202e45%", "\u009b45%", strings.Repeat("9", 400) + "%"} {
		x := transfers[i%len(transfers)]
		f.Add(s, "12.5%", "ImportInProgress", x[0], x[1], x[2], x[3], x[4], x[5])
		f.Add("100.0%", s, DataVolumeSucceeded, x[0], x[1], x[2], x[3], x[4], x[5])
	}
	f.Fuzz(func(t *testing.T, p0, p1, phase1 string, done0, rate0, done1, rate1, capacity0, capacity1 int64) {
		for _, s := range []string{p0, p1} {
			if v := parsePercent(s); !(v >= 0 && v <= 100) {
				t.Fatalf("parsePercent(%q) = %v", s, v)
			}
		}
		d := &decider{
			st: &v1alpha1.VirtualMachineMigrationStatus{Phase: v1alpha1.PhaseImporting,
				Disks: []v1alpha1.DiskStatus{{Key: 2000, DataVolume: "web-01-disk-0"}, {Key: 2001, DataVolume: "web-01-disk-1"}}},
			obs: Observation{DataVolumes: map[string]DataVolumeObservation{
				"web-01-disk-0": {Phase: "ImportInProgress", Progress: p0},
				"web-01-disk-1": {Phase: phase1, Progress: p1},
			}},
			now: metav1.Now(),
		}
		d.recordImportProgress()
		d.recordProgress()
		checkProgress(t, "imports at "+strconv.Quote(p0)+" and "+strconv.Quote(p1), d.st)

		if capacity0 <= 0 || capacity1 <= 0 {
			return // the capacities come from vSphere's inventory, checked when it was read
		}
		d = &decider{
			st: &v1alpha1.VirtualMachineMigrationStatus{Phase: v1alpha1.PhaseTransferringDisks,
				Disks: []v1alpha1.DiskStatus{{Key: 2000, CapacityBytes: capacity0}, {Key: 2001, CapacityBytes: capacity1}}},
			now: metav1.Now(),
		}
		d.recordTransferProgress([]DiskProgress{
			{Key: 2000, BytesDone: done0, BytesTotal: capacity0, RateBytesPerSecond: rate0},
			{Key: 2001, BytesDone: done1, BytesTotal: capacity1, RateBytesPerSecond: rate1},
		})
		d.recordProgress()
		checkProgress(t, "transfer progress", d.st)
		for _, disk := range d.st.Disks {
			if disk.ETASeconds != nil && *disk.ETASeconds < 0 {
				t.Fatalf("disk %d: an ETA of %d seconds", disk.Key, *disk.ETASeconds)
			}
		}
	})
}
