package transfer_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"platform.example/vm-migration/pkg/transfer"
	"platform.example/vm-migration/pkg/transfer/wire"
	"platform.example/vm-migration/pkg/vsphere"
)

// thinSize is a thin test disk's capacity: not a whole number of chunks.
const thinSize = 40*mib + 192<<10

// allocatedOf is the bytes of a plan's areas.
func allocatedOf(t *testing.T, p transfer.DiskPlan) int64 {
	t.Helper()
	require.NotNil(t, p.Areas, "the plan reads allocated areas (%s)", p.FullCopyReason)
	return vsphere.AreasBytes(p.Areas)
}

// TestAllocatedOnlyCopy copies a thin disk of a powered-off VM with
// change tracking on, over one and three streams: the plan reads the
// areas vSphere reports, the datastore serves exactly those bytes, the
// image is the whole disk (holes where nothing was written, its size the
// capacity) and its SHA-256 the disk's.
func TestAllocatedOnlyCopy(t *testing.T) {
	e := newSim(t)
	data, written, d := e.thinDisk(t, "thin", thinSize, 71, 25)
	for _, streams := range []int{1, 3} {
		t.Run(fmt.Sprintf("streams=%d", streams), func(t *testing.T) {
			d.Destination = filepath.Join(t.TempDir(), "disk.img")
			plans := e.plan(t, e.jobSpec(d))
			allocated := allocatedOf(t, plans[0])
			require.GreaterOrEqual(t, allocated, written, "the map covers what was written")
			opts := testOptions(t)
			opts.Streams = streams
			e.served.Store(0)
			res := transfer.Run(context.Background(), plans, opts)
			e.waitRunServed(t)
			require.True(t, res.Succeeded, res.Error)
			r := res.Disks[0]
			assert.Equal(t, treeRoot(data), r.SHA256)
			assert.True(t, r.AllocatedOnly)
			assert.Empty(t, r.FullCopyReason)
			require.NotNil(t, r.AllocatedBytes)
			assert.Equal(t, allocated, *r.AllocatedBytes)
			assert.Equal(t, allocated, r.BytesRead, "bytes read")
			assert.Equal(t, allocated, e.served.Load(), "bytes the datastore served: the allocated areas, once")
			assert.Equal(t, int64(thinSize), r.Bytes)
			// The checksum of the copy that read the allocated areas alone
			// (and hashed none of the holes) is the root of a full read of
			// the image, holes read as zeros, and of the hash command's
			// read, holes unread.
			full, err := os.ReadFile(d.Destination)
			require.NoError(t, err)
			assert.Equal(t, treeRoot(full), r.SHA256, "the root of a full read of the image")
			again, _, err := transfer.HashImage(context.Background(), d.Destination, thinSize)
			require.NoError(t, err)
			assert.Equal(t, again, r.SHA256, "the root vm-transfer hash gives")
			t.Logf("%d of %d bytes allocated (%d written), %d read", allocated, thinSize, written, r.BytesRead)
			checkThinImage(t, d.Destination, data, allocated)
		})
	}
}

// checkThinImage asserts the image holds exactly want, allocates no more
// than the source's allocated areas (and a few blocks of the file
// system's metadata), and is alone in its directory with its tree file.
func checkThinImage(t *testing.T, path string, want []byte, allocated int64) {
	t.Helper()
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, len(want), len(got), "image size: the disk's capacity")
	require.True(t, string(want) == string(got), "image content differs")
	var st syscall.Stat_t
	require.NoError(t, syscall.Stat(path, &st))
	require.LessOrEqual(t, st.Blocks*512, allocated+64<<10, "the image allocates more than the source's allocated areas")
	checkAlone(t, path, want)
}

// TestFullCopyWhenTheMapCannotBeUsed copies the same thin disk when
// allocated-only copy is off, change tracking is off, the query faults or
// the map covers less than the datastore reports in use: the whole disk
// is read, and the result says why. Never a partial copy.
func TestFullCopyWhenTheMapCannotBeUsed(t *testing.T) {
	tests := map[string]struct {
		setup  func(e *simEnv, spec *wire.JobSpec)
		reason string
	}{
		"turned off in the spec": {setup: func(_ *simEnv, spec *wire.JobSpec) { spec.FullCopy = true }, reason: "turned off"},
		"change tracking off": {setup: func(e *simEnv, _ *wire.JobSpec) {
			require.NoError(t, e.cbt.Enable(e.vm.Reference(), false))
		}, reason: "changed block tracking is off"},
		"the query faults": {setup: func(e *simEnv, _ *wire.JobSpec) {
			e.cbt.Fail(e.vm.Reference(), &types.FileFault{File: "ctk"})
		}, reason: "vSphere did not map the disk's allocated areas"},
		"the map covers less than is in use": {setup: func(e *simEnv, _ *wire.JobSpec) {
			e.cbt.Underreport(e.vm.Reference(), true)
		}, reason: "less than the"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newSim(t)
			data, _, d := e.thinDisk(t, "thin", thinSize, 72, 25)
			spec := e.jobSpec(d)
			tc.setup(e, spec)
			plans := e.plan(t, spec)
			require.Nil(t, plans[0].Areas)
			res := transfer.Run(context.Background(), plans, testOptions(t))
			e.waitRunServed(t)
			require.True(t, res.Succeeded, res.Error)
			r := res.Disks[0]
			assert.Equal(t, treeRoot(data), r.SHA256)
			assert.False(t, r.AllocatedOnly)
			assert.Contains(t, r.FullCopyReason, tc.reason)
			assert.Equal(t, int64(thinSize), r.BytesRead)
			assert.Equal(t, int64(thinSize), e.served.Load(), "the whole disk is read")
			t.Logf("full copy: %s", r.FullCopyReason)
		})
	}
}

// TestAllocatedOnlyResume cuts an allocated-only copy mid-stream: the next
// run with the same map resumes, fetching again at most one chunk; a run
// that reads another map (the whole disk) does not trust the checkpoint
// and starts over.
func TestAllocatedOnlyResume(t *testing.T) {
	for name, full := range map[string]bool{"same map": false, "another map": true} {
		t.Run(name, func(t *testing.T) {
			e := newSim(t)
			data, _, d := e.thinDisk(t, "thin", thinSize, 73, 30)
			plans := e.plan(t, e.jobSpec(d))
			allocated := allocatedOf(t, plans[0])
			e.setFaults(faults{cutAfter: allocated / 2})
			res := transfer.Run(context.Background(), plans, testOptions(t))
			e.waitRunServed(t)
			require.False(t, res.Succeeded)
			first := e.served.Load()

			e.setFaults(faults{})
			e.served.Store(0)
			spec := e.jobSpec(d)
			spec.FullCopy = full
			res = transfer.Run(context.Background(), e.plan(t, spec), testOptions(t))
			e.waitRunServed(t)
			require.True(t, res.Succeeded, res.Error)
			require.Equal(t, treeRoot(data), res.Disks[0].SHA256)
			if full {
				require.Zero(t, res.Disks[0].ResumedFrom, "a checkpoint of another map is not resumed")
				require.Equal(t, int64(thinSize), e.served.Load())
				return
			}
			resent := first + e.served.Load() - allocated
			t.Logf("first run served %d of %d allocated, the second %d (resumed from %d): %d re-sent", first, allocated, e.served.Load(), res.Disks[0].ResumedFrom, resent)
			require.Positive(t, res.Disks[0].ResumedFrom)
			require.GreaterOrEqual(t, resent, int64(0))
			require.LessOrEqual(t, resent, int64(testChunk), "re-sent more than one chunk")
			checkThinImage(t, d.Destination, data, allocated)
		})
	}
}

// TestAHostileMapIsNeverTrusted copies a thin disk while the answers of
// QueryChangedDiskAreas are rewritten as a faulty or hostile vCenter, ESXi
// host or proxy could: areas whose ends wrap past 2^63, that go backwards
// or overlap, whose lengths add up (wrapping) to exactly the space the
// datastore reports in use, so that the coverage guard alone would trust
// them. The map is refused, the whole disk is read, every byte reaches
// the image and the result says why: never a Succeeded copy of holes.
func TestAHostileMapIsNeverTrusted(t *testing.T) {
	const half = int64(1) << 62
	tests := map[string]func(capacity, used int64) []types.DiskChangeExtent{
		"areas wrap past 2^63 and add up to the space in use": func(_, used int64) []types.DiskChangeExtent {
			return []types.DiskChangeExtent{
				{Start: half, Length: half},                       // ends at -2^63
				{Start: math.MinInt64 + 1, Length: math.MaxInt64}, // backwards, ends at 0
				{Start: half, Length: half + 1 + used},            // overlaps the first; the lengths add up to used
			}
		},
		"an area starts past the disk and its end wraps": func(capacity, used int64) []types.DiskChangeExtent {
			return []types.DiskChangeExtent{
				{Start: capacity + 4096, Length: -(math.MinInt64 + capacity + 4096)}, // past the disk, ends at -2^63
				{Start: math.MinInt64 + 1, Length: math.MaxInt64},                    // backwards, ends at 0
				{Start: math.MaxInt64 - capacity, Length: used + capacity + 4097},    // past the disk again; the lengths add up to used
			}
		},
	}
	for name, forge := range tests {
		t.Run(name, func(t *testing.T) {
			e := newSim(t)
			data, written, d := e.thinDisk(t, "thin", thinSize, 74, 25)
			used := usedOfExtent(t, e, "thin")
			require.GreaterOrEqual(t, used, written)
			hostile := forge(d.CapacityBytes, used)
			e.cbt.Tamper(e.vm.Reference(), func(info *types.DiskChangeInfo) {
				info.Length = d.CapacityBytes - info.StartOffset
				info.ChangedArea = hostile
			})
			plans := e.plan(t, e.jobSpec(d))
			res := transfer.Run(context.Background(), plans, testOptions(t))
			e.waitRunServed(t)
			require.True(t, res.Succeeded, res.Error)
			r := res.Disks[0]
			require.Equal(t, treeRoot(data), r.SHA256, "the image holds every byte of the disk (allocated only: %v, %v bytes read)", r.AllocatedOnly, r.BytesRead)
			assert.False(t, r.AllocatedOnly)
			assert.Contains(t, r.FullCopyReason, "inconsistent allocated-area map")
			assert.Equal(t, int64(thinSize), r.BytesRead)
			got, err := os.ReadFile(d.Destination)
			require.NoError(t, err)
			require.True(t, string(data) == string(got), "image content differs")
			t.Logf("full copy: %s", r.FullCopyReason)
		})
	}
}

// usedOfExtent is the space the datastore reports in use for a disk's
// flat extent (its layoutEx entry's size).
func usedOfExtent(t *testing.T, e *simEnv, name string) int64 {
	t.Helper()
	var vm mo.VirtualMachine
	require.NoError(t, e.vm.Properties(context.Background(), e.vm.Reference(), []string{"layoutEx.file"}, &vm))
	for _, f := range vm.LayoutEx.File {
		if strings.HasSuffix(f.Name, "/"+name+"-flat.vmdk") {
			return f.Size
		}
	}
	t.Fatalf("no layoutEx entry for the flat extent of %s", name)
	return 0
}
