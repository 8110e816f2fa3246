package transfer_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"platform.example/vm-migration/pkg/blocktree"
	"platform.example/vm-migration/pkg/transfer"
	"platform.example/vm-migration/pkg/transfer/wire"
)

const testChunk = 1 * mib

// testSize is several MiB and not a whole number of chunks.
const testSize = 20*mib + 192<<10

func testOptions(t *testing.T) transfer.Options {
	return transfer.Options{
		ChunkSize:        testChunk,
		Streams:          1,
		Parallel:         2,
		Retries:          -1,
		RetryDelay:       10 * time.Millisecond,
		ProgressInterval: 50 * time.Millisecond,
		Logf:             t.Logf,
	}
}

// treeRoot is the root of the block tree of b: the checksum the
// transfer gives.
func treeRoot(b []byte) string {
	t, _, err := blocktree.Compute(context.Background(), bytes.NewReader(b), int64(len(b)), blocktree.Options{})
	if err != nil {
		panic(err)
	}
	return t.Root()
}

// checkTreeFile asserts that the tree file beside an image is the tree of
// want, as blocktree.ReadTree reads it.
func checkTreeFile(t *testing.T, image string, want []byte) {
	t.Helper()
	f, err := os.Open(image + transfer.TreeSuffix)
	require.NoError(t, err, "the tree file beside the image")
	defer f.Close()
	tree, err := blocktree.ReadTree(f)
	require.NoError(t, err)
	require.Equal(t, int64(len(want)), tree.Size)
	require.Equal(t, treeRoot(want), tree.Root())
}

// checkImage asserts the image holds exactly want, is sparse where want
// has whole zero blocks, and is alone in its directory with its tree file,
// which is want's.
func checkImage(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, len(want), len(got), "image size")
	require.True(t, bytes.Equal(want, got), "image content differs")
	var st syscall.Stat_t
	require.NoError(t, syscall.Stat(path, &st))
	allocated := st.Blocks * 512
	// diskData has at least 6 MiB of zeros in whole 64 KiB blocks.
	require.Less(t, allocated, int64(len(want))-6*mib, "image is not sparse: %d bytes allocated of %d", allocated, len(want))
	checkAlone(t, path, want)
}

// checkAlone asserts the image is alone in its directory with its tree
// file, which is want's.
func checkAlone(t *testing.T, path string, want []byte) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	base := filepath.Base(path)
	require.Equal(t, []string{base, base + transfer.TreeSuffix}, names, "only the image and its tree file may remain")
	checkTreeFile(t, path, want)
}

// TestTransferFromVcsim copies two disks at once: each image and SHA-256
// is its disk's, and the proxy served each byte once (counted once the
// run's connections are closed: see waitRunServed).
func TestTransferFromVcsim(t *testing.T) {
	e := newSim(t)
	data := diskData(testSize, 1)
	data2 := diskData(12*mib, 2)
	d1 := e.testDisk(t, "web", data)
	d2 := e.testDisk(t, "web_1", data2)
	d1.Destination = filepath.Join(t.TempDir(), "disk.img")
	d2.Destination = filepath.Join(t.TempDir(), "disk.img")
	plans := e.plan(t, e.jobSpec(d1, d2))

	var mu sync.Mutex
	var snaps []wire.Progress
	opts := testOptions(t)
	opts.ProgressSinks = []transfer.ProgressSink{transfer.ProgressSinkFunc(func(_ context.Context, p wire.Progress) error {
		mu.Lock()
		defer mu.Unlock()
		snaps = append(snaps, p)
		return nil
	})}
	res := transfer.Run(context.Background(), plans, opts)
	e.waitRunServed(t)
	require.True(t, res.Succeeded, res.Error)
	require.Len(t, res.Disks, 2)
	require.Equal(t, wire.DiskResult{Key: d1.Key, Bytes: int64(len(data)), SHA256: treeRoot(data), DurationSeconds: res.Disks[0].DurationSeconds,
		BytesRead: int64(len(data)), FullCopyReason: "changed block tracking is off on the VM, so vSphere cannot map the disk's allocated areas"}, res.Disks[0])
	require.Equal(t, treeRoot(data2), res.Disks[1].SHA256)
	checkImage(t, d1.Destination, data)
	checkImage(t, d2.Destination, data2)
	require.Equal(t, int64(len(data)+len(data2)), e.served.Load(), "bytes served")

	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, snaps)
	last := snaps[len(snaps)-1]
	for i, d := range last.Disks {
		require.Equal(t, wire.StateDone, d.State)
		require.Equal(t, d.TotalBytes, d.BytesDone)
		require.Equal(t, res.Disks[i].Key, d.Key)
	}
}

// TestResume kills a transfer, then runs it again: the second run resumes
// from the checkpoint and the image ends identical. Each run's bytes are
// read once its connections are closed (see waitRunServed), so the
// re-sent count is exact: it is 0 when the cut falls on a boundary.
func TestResume(t *testing.T) {
	for name, cutAfter := range map[string]int64{
		"server dies mid-chunk":     7*mib + 300<<10,
		"server dies on a boundary": 9 * mib,
	} {
		t.Run(name, func(t *testing.T) {
			e := newSim(t)
			data, d := e.stagedDisk(t, "db", testSize, 3)
			plans := e.plan(t, e.jobSpec(d))

			e.setFaults(faults{cutAfter: cutAfter})
			res := transfer.Run(context.Background(), plans, testOptions(t))
			e.waitRunServed(t)
			require.False(t, res.Succeeded)
			require.Equal(t, wire.ReasonBadResponse, res.Reason, res.Error)
			first := e.served.Load()
			require.Equal(t, cutAfter, first)
			require.FileExists(t, filepath.Join(filepath.Dir(d.Destination), ".disk.img.checkpoint"))

			e.served.Store(0)
			res = transfer.Run(context.Background(), e.plan(t, e.jobSpec(d)), testOptions(t))
			e.waitRunServed(t)
			require.True(t, res.Succeeded, res.Error)
			require.Equal(t, treeRoot(data), res.Disks[0].SHA256)
			resent := first + e.served.Load() - int64(len(data))
			t.Logf("first run served %d, second %d (resumed from %d): %d bytes re-sent", first, e.served.Load(), res.Disks[0].ResumedFrom, resent)
			require.GreaterOrEqual(t, resent, int64(0))
			require.LessOrEqual(t, resent, int64(testChunk), "re-sent more than one chunk")
			checkImage(t, d.Destination, data)
		})
	}
}

// TestResumeAfterCancel stops a run the way SIGTERM does (its context),
// mid-stream: every chunk already received is kept, and the next run
// resumes from there.
func TestResumeAfterCancel(t *testing.T) {
	e := newSim(t)
	data, d := e.stagedDisk(t, "can", testSize, 10)
	plans := e.plan(t, e.jobSpec(d))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var doneAtCancel int64
	var servedAtCancel int64
	opts := testOptions(t)
	opts.ProgressInterval = 5 * time.Millisecond
	opts.ProgressSinks = []transfer.ProgressSink{transfer.ProgressSinkFunc(func(_ context.Context, p wire.Progress) error {
		if doneAtCancel == 0 && p.Disks[0].BytesDone >= 9*mib {
			doneAtCancel, servedAtCancel = p.Disks[0].BytesDone, e.served.Load()
			cancel()
		}
		return nil
	})}
	// Slow the stream down so the cancellation lands mid-transfer.
	e.setFaults(faults{delay: 2 * time.Millisecond})
	res := transfer.Run(ctx, plans, opts)
	require.False(t, res.Succeeded)
	require.Equal(t, wire.ReasonCancelled, res.Reason, res.Error)
	require.NotZero(t, doneAtCancel)
	first := e.served.Load()

	e.setFaults(faults{})
	e.served.Store(0)
	res = transfer.Run(context.Background(), e.plan(t, e.jobSpec(d)), testOptions(t))
	require.True(t, res.Succeeded, res.Error)
	require.Equal(t, treeRoot(data), res.Disks[0].SHA256)
	t.Logf("cancelled with %d bytes written, %d served (%d by the end); resumed from %d; %d bytes re-sent",
		doneAtCancel, servedAtCancel, first, res.Disks[0].ResumedFrom, first+e.served.Load()-int64(len(data)))
	require.GreaterOrEqual(t, res.Disks[0].ResumedFrom, doneAtCancel, "progress made before the cancellation was lost")
	checkImage(t, d.Destination, data)
}

// TestRetryInProcess cuts the stream once: the run retries and completes,
// having fetched again at most one chunk (counted once the run's
// connections are closed: see waitRunServed).
func TestRetryInProcess(t *testing.T) {
	e := newSim(t)
	data, d := e.stagedDisk(t, "app", testSize, 4)
	plans := e.plan(t, e.jobSpec(d))
	e.setFaults(faults{cutAfter: 5*mib + 777})
	opts := testOptions(t)
	opts.Retries = 2
	res := transfer.Run(context.Background(), plans, opts)
	e.waitRunServed(t)
	require.True(t, res.Succeeded, res.Error)
	require.Equal(t, treeRoot(data), res.Disks[0].SHA256)
	require.LessOrEqual(t, e.served.Load()-int64(len(data)), int64(testChunk))
	checkImage(t, d.Destination, data)
}

// TestSessionEndsMidTransfer ends the session mid-stream: the datastore
// answers 401, the copy renews the session (a SOAP call logs in again) and
// resumes where it stopped, having fetched again at most one chunk
// (counted once the run's connections are closed: see waitRunServed).
func TestSessionEndsMidTransfer(t *testing.T) {
	e := newSim(t)
	data, d := e.stagedDisk(t, "sess", testSize, 13)
	plans := e.plan(t, e.jobSpec(d))
	before := e.session.Relogins()
	e.setFaults(faults{revokeAt: 6*mib + 1})
	opts := testOptions(t)
	opts.Retries = 3
	opts.RefreshSession = func(ctx context.Context) error { return transfer.Touch(ctx, e.client) }
	res := transfer.Run(context.Background(), plans, opts)
	e.waitRunServed(t)
	require.True(t, res.Succeeded, res.Error)
	require.Equal(t, treeRoot(data), res.Disks[0].SHA256)
	require.Greater(t, e.session.Relogins(), before, "the session was not renewed")
	require.LessOrEqual(t, e.served.Load()-int64(len(data)), int64(testChunk))
	checkImage(t, d.Destination, data)

	// Without a way to renew it, the same failure is a clear NotAuthorized.
	e.served.Store(0)
	e.setFaults(faults{revokeAt: 3 * mib})
	opts.RefreshSession = nil
	res = transfer.Run(context.Background(), e.plan(t, e.jobSpec(d)), opts)
	require.False(t, res.Succeeded)
	require.Equal(t, wire.ReasonNotAuthorized, res.Reason, res.Error)
}

func TestBadResponsesAreDetected(t *testing.T) {
	tests := map[string]struct {
		first  faults // a first run cut short, to make the second a resume
		faults faults
	}{
		"truncated body":          {faults: faults{cutAfter: 3*mib + 1}},
		"wrong content-range":     {faults: faults{contentRange: "bytes 0-99/" + "21168128"}},
		"body runs long":          {faults: faults{extra: []byte("trailing garbage")}},
		"range ignored on resume": {first: faults{cutAfter: 4 * mib}, faults: faults{dropRange: true}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newSim(t)
			_, d := e.stagedDisk(t, "bad", testSize, 5)
			plans := e.plan(t, e.jobSpec(d))
			if tc.first.cutAfter > 0 {
				e.setFaults(tc.first)
				require.False(t, transfer.Run(context.Background(), plans, testOptions(t)).Succeeded)
			}
			e.setFaults(tc.faults)
			res := transfer.Run(context.Background(), plans, testOptions(t))
			require.False(t, res.Succeeded, "a bad response must fail the run")
			require.Equal(t, wire.ReasonBadResponse, res.Reason, res.Error)
			require.Empty(t, res.Disks[0].SHA256)
			t.Log(res.Error)
		})
	}
}

// TestCorruptImageRestartsFromScratch damages a checkpointed chunk of a
// cut copy: the next run does not trust the checkpoint, fetches the whole
// disk once and ends with the right image. The first run's connections
// are closed before the counter is reset, and the second's before it is
// read (see waitRunServed).
func TestCorruptImageRestartsFromScratch(t *testing.T) {
	e := newSim(t)
	data, d := e.stagedDisk(t, "cor", testSize, 6)
	plans := e.plan(t, e.jobSpec(d))
	e.setFaults(faults{cutAfter: 10*mib + 10})
	require.False(t, transfer.Run(context.Background(), plans, testOptions(t)).Succeeded)
	e.waitRunServed(t)

	// Damage the last checkpointed chunk: the checkpoint no longer holds.
	f, err := os.OpenFile(d.Destination, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("damage"), 9*mib+10)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	e.served.Store(0)
	res := transfer.Run(context.Background(), plans, testOptions(t))
	e.waitRunServed(t)
	require.True(t, res.Succeeded, res.Error)
	require.Zero(t, res.Disks[0].ResumedFrom)
	require.Equal(t, int64(len(data)), e.served.Load(), "a fresh copy re-reads everything")
	require.Equal(t, treeRoot(data), res.Disks[0].SHA256)
	checkImage(t, d.Destination, data)
}

func TestPlanRefuses(t *testing.T) {
	e := newSim(t)
	data := diskData(12*mib, 7)
	good := e.testDisk(t, "ok", data)
	good.Destination = "/nonexistent/disk.img"
	delta := e.testDisk(t, "snap", diskData(12*mib, 8))
	e.upload(t, "DC0_H0_VM0/snap.vmdk", []byte(`# Disk DescriptorFile
version=1
CID=12345678
parentCID=fffffffe
createType="vmfsSparse"
parentFileNameHint="snap-base.vmdk"
RW 24576 VMFSSPARSE "snap-delta.vmdk"
`))
	short := e.testDisk(t, "short", diskData(12*mib, 9))
	e.upload(t, "DC0_H0_VM0/short-flat.vmdk", diskData(11*mib, 9))

	tests := map[string]struct {
		mutate func(s *wire.JobSpec)
		want   error
		msg    string
	}{
		"unknown disk key": {mutate: func(s *wire.JobSpec) { s.Disks[0].Key = 4242 }, want: transfer.ErrInvalidSource, msg: "no disk with key 4242"},
		"wrong backing":    {mutate: func(s *wire.JobSpec) { s.Disks[0].FileName = "[LocalDS_0] other/x.vmdk" }, want: transfer.ErrInvalidSource, msg: "backing file"},
		"wrong capacity":   {mutate: func(s *wire.JobSpec) { s.Disks[0].CapacityBytes += 1024 }, want: transfer.ErrInvalidSource, msg: "capacity"},
		"unknown vm":       {mutate: func(s *wire.JobSpec) { s.VMMoRef = "vm-999999" }, want: transfer.ErrInvalidSource, msg: "not found"},
		"snapshot delta":   {mutate: func(s *wire.JobSpec) { s.Disks[0] = delta }, want: transfer.ErrSnapshotDelta},
		"extent too short": {mutate: func(s *wire.JobSpec) { s.Disks[0] = short }, want: transfer.ErrBadResponse, msg: "descriptor says"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			spec := e.jobSpec(good)
			tc.mutate(spec)
			_, err := (&transfer.Planner{Client: e.client, DatacenterPath: "DC0"}).Plan(context.Background(), spec)
			require.Error(t, err)
			require.True(t, errors.Is(err, tc.want), "%v is not %v", err, tc.want)
			require.Contains(t, err.Error(), tc.msg)
			t.Log(err)
		})
	}
}

// TestFinishedDiskKeptWhenAnotherFails copies two disks, one of which
// cannot be written: the run fails, the finished disk keeps its completion
// record, and the next run checks its image against it (its tree computed
// again) and keeps it, fetching only the other disk, and writes its tree
// file again if it is gone or damaged. An image changed since it was
// recorded complete is copied again. Once every disk is complete the
// records go: only the images and their tree files remain.
func TestFinishedDiskKeptWhenAnotherFails(t *testing.T) {
	tests := map[string]struct{ damage, damageTree, removeTree bool }{
		"image intact":            {},
		"image changed since":     {damage: true},
		"tree file gone since":    {removeTree: true},
		"tree file damaged since": {damageTree: true},
	}
	for name, tc := range tests {
		damage := tc.damage
		t.Run(name, func(t *testing.T) {
			e := newSim(t)
			dataA, a := e.stagedDisk(t, "keep", testSize, 61)
			dataB, b := e.stagedDisk(t, "late", 12*mib, 62)
			dirB := filepath.Dir(b.Destination)
			require.NoError(t, os.Remove(dirB))
			res := transfer.Run(context.Background(), e.plan(t, e.jobSpec(a, b)), testOptions(t))
			e.waitRunServed(t)
			require.False(t, res.Succeeded)
			require.Equal(t, wire.ReasonDestinationUnusable, res.Reason, res.Error)
			require.Equal(t, treeRoot(dataA), res.Disks[0].SHA256, "the disk that could be written is complete")
			require.FileExists(t, filepath.Join(filepath.Dir(a.Destination), ".disk.img.checkpoint"), "its completion record stays")
			checkTreeFile(t, a.Destination, dataA)
			if tc.removeTree {
				require.NoError(t, os.Remove(a.Destination+transfer.TreeSuffix))
			}
			if tc.damageTree {
				require.NoError(t, os.WriteFile(a.Destination+transfer.TreeSuffix, []byte("vmm-block-tree v1 garbage\n"), 0o644))
			}
			if damage {
				f, err := os.OpenFile(a.Destination, os.O_WRONLY, 0)
				require.NoError(t, err)
				_, err = f.WriteAt([]byte("changed"), 3*mib)
				require.NoError(t, err)
				require.NoError(t, f.Close())
			}

			require.NoError(t, os.Mkdir(dirB, 0o755))
			e.served.Store(0)
			res = transfer.Run(context.Background(), e.plan(t, e.jobSpec(a, b)), testOptions(t))
			e.waitRunServed(t)
			require.True(t, res.Succeeded, res.Error)
			require.Equal(t, treeRoot(dataA), res.Disks[0].SHA256)
			require.Equal(t, treeRoot(dataB), res.Disks[1].SHA256)
			want := int64(len(dataB))
			if damage {
				want += int64(len(dataA))
			}
			require.Equal(t, want, e.served.Load(), "bytes served by the second run")
			require.Equal(t, !damage, res.Disks[0].Kept)
			require.False(t, res.Disks[1].Kept)
			checkImage(t, a.Destination, dataA)
			checkImage(t, b.Destination, dataB)
		})
	}
}

// TestResumeWithTheTreeFile cuts a copy, then changes what is beside the
// image before the next run: a checkpoint whose partial tree file is gone
// or does not hold its leaves is not resumed (the copy starts over and
// ends right); an intact one is. A tree file of an earlier image never
// stays beside an image being written.
func TestResumeWithTheTreeFile(t *testing.T) {
	tests := map[string]struct {
		change func(t *testing.T, partial string)
		resume bool
	}{
		"partial tree intact":        {change: func(*testing.T, string) {}, resume: true},
		"partial tree gone":          {change: func(t *testing.T, p string) { require.NoError(t, os.Remove(p)) }},
		"partial tree cut":           {change: func(t *testing.T, p string) { require.NoError(t, os.Truncate(p, 200)) }},
		"a leaf of the partial tree": {change: damageByte(blocktree.HeaderLen(testSize) + 32*3 + 5)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newSim(t)
			data, d := e.stagedDisk(t, "tree", testSize, 16)
			stale := d.Destination + transfer.TreeSuffix
			require.NoError(t, os.WriteFile(stale, []byte("the tree of an earlier image"), 0o644))
			e.setFaults(faults{cutAfter: 9*mib + 300<<10})
			res := transfer.Run(context.Background(), e.plan(t, e.jobSpec(d)), testOptions(t))
			e.waitRunServed(t)
			require.False(t, res.Succeeded)
			require.NoFileExists(t, stale, "a tree file of an earlier image stays beside an image being written")
			partial := filepath.Join(filepath.Dir(d.Destination), ".disk.img.tree.partial")
			require.FileExists(t, partial)
			// The checkpoint names how many leaves hold, it does not list them.
			cp, err := os.ReadFile(filepath.Join(filepath.Dir(d.Destination), ".disk.img.checkpoint"))
			require.NoError(t, err)
			require.Less(t, len(cp), 2048, "checkpoint: %s", cp)
			require.Contains(t, string(cp), `"leaves":9,`)
			tc.change(t, partial)

			e.setFaults(faults{})
			e.served.Store(0)
			res = transfer.Run(context.Background(), e.plan(t, e.jobSpec(d)), testOptions(t))
			e.waitRunServed(t)
			require.True(t, res.Succeeded, res.Error)
			require.Equal(t, treeRoot(data), res.Disks[0].SHA256)
			if tc.resume {
				require.Equal(t, int64(9*mib), res.Disks[0].ResumedFrom)
				require.Less(t, e.served.Load(), int64(len(data)))
			} else {
				require.Zero(t, res.Disks[0].ResumedFrom, "a checkpoint whose partial tree does not hold is not resumed")
				require.Equal(t, int64(len(data)), e.served.Load())
			}
			checkImage(t, d.Destination, data)
		})
	}
}

// damageByte flips a byte of a file.
func damageByte(at int64) func(t *testing.T, path string) {
	return func(t *testing.T, path string) {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		require.NoError(t, err)
		defer f.Close()
		b := make([]byte, 1)
		_, err = f.ReadAt(b, at)
		require.NoError(t, err)
		b[0] ^= 0x40
		_, err = f.WriteAt(b, at)
		require.NoError(t, err)
	}
}
