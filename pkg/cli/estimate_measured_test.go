package cli

import (
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
)

// measuredOutage is a finished migration of disks of the given MiB whose
// outage took the given seconds per part (statemachine.OutagePhases
// order). wholeHashed says its conversion hashed every disk whole (the
// SHA-256 of the whole image, before the block tree: ChecksumScheme
// empty); otherwise it re-hashed the 4 MiB the conversion wrote, in the
// disk's block tree.
func measuredOutage(uid string, diskMiB []int64, wholeHashed bool, seconds ...int64) v1alpha1.VirtualMachineMigration {
	m := v1alpha1.VirtualMachineMigration{ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "apps", UID: types.UID(uid)}}
	m.Status.Source = &v1alpha1.SourceInventory{}
	for i, size := range diskMiB {
		name := fmt.Sprintf("disk-%d", i)
		m.Status.Source.Disks = append(m.Status.Source.Disks, v1alpha1.SourceDisk{CapacityBytes: size * mib})
		d := v1alpha1.DiskStatus{Key: int32(2000 + i), Name: name, StagingClaim: uid + "-" + name, DataVolume: uid + "-" + name, CapacityBytes: size * mib,
			Checksums: &v1alpha1.DiskChecksums{Converted: "c0ffee", ConvertedBytes: size * mib, Compared: v1alpha1.ComparedConvertedInPlace}}
		if !wholeHashed {
			d.ChecksumScheme, d.Checksums.RehashedBytes = "sha256-tree-1MiB", min(4, size)*mib
		}
		m.Status.Disks = append(m.Status.Disks, d)
	}
	end := metav1.NewTime(testNow.Add(-time.Hour))
	var total int64
	m.Status.Downtime = &v1alpha1.DowntimeStatus{TargetRunningAt: &end}
	for i, s := range seconds {
		m.Status.Downtime.Phases = append(m.Status.Downtime.Phases, v1alpha1.PhaseDowntime{Phase: statemachine.OutagePhases()[i], Seconds: s})
		total += s
	}
	m.Status.Downtime.Seconds = &total
	return m
}

// plannedOutage is a migration of disks of the given MiB, planned, not
// stopped yet.
func plannedOutage(diskMiB ...int64) *v1alpha1.VirtualMachineMigration {
	m := measuredOutage("planned", diskMiB, false)
	m.Status.Downtime = nil
	for i := range m.Status.Disks {
		m.Status.Disks[i].Checksums, m.Status.Disks[i].ChecksumScheme = nil, ""
	}
	return &m
}

// estimateOf is the estimate of m's outage, its disks' claims in Block
// volume mode when block.
func estimateOf(m *v1alpha1.VirtualMachineMigration, others []v1alpha1.VirtualMachineMigration, block bool) string {
	claims := map[string]bool{}
	for _, d := range m.Status.Disks {
		claims[d.StagingClaim] = block
	}
	return downtimeEstimate(m, others, claims)
}

var (
	estimateTotal = regexp.MustCompile(`^about (\S+) for`)
	estimatePart  = regexp.MustCompile(`(TransferringDisks|Converting|Importing|CreatingVM|Starting) ([0-9][0-9hms.]*)`)
)

// estimateSeconds reads the whole outage and each part off an estimate.
func estimateSeconds(t *testing.T, estimate string) (float64, map[string]float64) {
	t.Helper()
	total := estimateTotal.FindStringSubmatch(estimate)
	require.NotNil(t, total, estimate)
	d, err := time.ParseDuration(total[1])
	require.NoError(t, err, estimate)
	parts := map[string]float64{}
	for _, p := range estimatePart.FindAllStringSubmatch(estimate, -1) {
		pd, err := time.ParseDuration(p[2])
		require.NoError(t, err, estimate)
		parts[p[1]] = pd.Seconds()
	}
	return d.Seconds(), parts
}

// The outages measured on this 2-core machine with the simulated
// conversion, before the block tree (the conversion took the SHA-256 of
// each whole converted image):
//
//   - make bench-downtime after the one-pass data path (87b0a67,
//     docs/contributors/benchmarks.md): 2 GiB transfer 16.7 s, conversion
//     18.1 s, other 2.8 s, status 38 s; 8 GiB 39.5 s, 53.2 s, 2.1 s,
//     status 95 s. The parts here are in whole seconds, as status records
//     them, and add up to the status.
//   - make run-local (issue 50): the conversion took 5 s for the sample
//     VM's 18 MiB, 52 s for a 4 GiB disk. Only the conversions and the
//     18 MiB run's whole outage (about 31 s, docs/contributors/testing.md)
//     were recorded: the other parts here are made up to add up to it,
//     and nothing asserts them.
var (
	bench2GiB  = measuredOutage("bench-2g", []int64{2048}, true, 17, 18, 1, 0, 2)
	bench8GiB  = measuredOutage("bench-8g", []int64{8192}, true, 40, 53, 1, 0, 1)
	local18MiB = measuredOutage("local-18m", []int64{8, 6, 4}, true, 9, 5, 1, 0, 16)
	local4GiB  = measuredOutage("local-4g", []int64{4096}, true, 9, 52, 1, 0, 16)
)

// TestDowntimeEstimateMatchesMeasuredOutages: the estimate, from outages
// measured here, of outages also measured here. The conversion does not
// grow with the disk, except by the bytes it hashes whole (before the
// block tree, every image; now a Block claim's device, which has no tree):
// from 18 MiB to 4 GiB it went from 5 s to 52 s with whole-image hashing,
// and a disk written through the block tree converts in about the time of
// the smallest (issue 50 item 5).
func TestDowntimeEstimateMatchesMeasuredOutages(t *testing.T) {
	cases := map[string]struct {
		m       *v1alpha1.VirtualMachineMigration
		others  []v1alpha1.VirtualMachineMigration
		block   bool
		total   float64 // the measured outage, 0 when none was
		convert float64 // the measured conversion
		within  float64 // of the total, as a fraction
		// convertWithin is how far off the conversion may be, as a
		// fraction of it; 0 means 2 s or a tenth.
		convertWithin float64
	}{
		"bench 2 GiB hashed whole, from the bench outages": {m: plannedOutage(2048), others: []v1alpha1.VirtualMachineMigration{bench2GiB, bench8GiB},
			block: true, total: 38, convert: 18.1, within: 0.2},
		"bench 8 GiB hashed whole, from the bench outages": {m: plannedOutage(8192), others: []v1alpha1.VirtualMachineMigration{bench2GiB, bench8GiB},
			block: true, total: 95, convert: 53.2, within: 0.2},
		// From one outage the rate of hashing whole is not known: the
		// transfer's (205 MiB/s) stands for it, the sha256sum of the time
		// ran at about 175 MiB/s (the 2 to 8 GiB growth), so the
		// conversion comes out 5 s long and the whole within a tenth.
		"bench 2 GiB hashed whole, from the 8 GiB outage alone": {m: plannedOutage(2048), others: []v1alpha1.VirtualMachineMigration{bench8GiB},
			block: true, total: 38, convert: 18.1, within: 0.2, convertWithin: 0.3},
		"run-local 4 GiB through the block tree, from the 18 MiB and 4 GiB outages hashed whole": {m: plannedOutage(4096),
			others: []v1alpha1.VirtualMachineMigration{local18MiB, local4GiB}, convert: 5},
		"run-local 4 GiB hashed whole, from the 18 MiB and 4 GiB outages hashed whole": {m: plannedOutage(4096),
			others: []v1alpha1.VirtualMachineMigration{local18MiB, local4GiB}, block: true, convert: 52},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			estimate := estimateOf(tc.m, tc.others, tc.block)
			total, parts := estimateSeconds(t, estimate)
			if tc.total > 0 {
				assert.InDelta(t, tc.total, total, tc.total*tc.within, "the whole outage: %s", estimate)
			}
			delta := max(2, tc.convert/10)
			if tc.convertWithin > 0 {
				delta = tc.convert * tc.convertWithin
			}
			assert.InDelta(t, tc.convert, parts["Converting"], delta, "the conversion: %s", estimate)
		})
	}
}

// TestEstimateReadsBlockClaimsFromThePlan: the claims of the plan's
// objects in Block volume mode are the disks the conversion hashes whole.
func TestEstimateReadsBlockClaimsFromThePlan(t *testing.T) {
	objects, err := parsePlanObjects(`apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: web-01-disk-0}
spec: {volumeMode: Block}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: web-01-disk-1}
spec: {volumeMode: Filesystem}
---
apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata: {name: web-01-disk-2}
spec: {storage: {volumeMode: Block}}
`)
	require.NoError(t, err)
	assert.Equal(t, map[string]bool{"web-01-disk-0": true}, blockClaims(objects))
}
