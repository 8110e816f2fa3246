package transfer_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"platform.example/vm-migration/pkg/transfer"
)

// TestStreamsGiveTheWholeImage copies a disk made of two flat extents,
// split at an offset that is not a multiple of 4 KiB, over 1 to 8 streams:
// pieces never cross the split, the image and its SHA-256 are the whole
// disk's, and no byte is served twice. Each run's bytes are read once its
// connections are closed (see waitRunServed): a late count would be missed
// here and land in the next subtest's.
func TestStreamsGiveTheWholeImage(t *testing.T) {
	e := newSim(t)
	data := diskData(testSize, 31)
	d := e.testDisk(t, "two", data)
	split := 7*mib + 3<<10
	e.upload(t, "DC0_H0_VM0/two.vmdk", []byte(fmt.Sprintf(`# Disk DescriptorFile
version=1
CID=fffffffe
parentCID=ffffffff
createType="twoGbMaxExtentFlat"
RW %d FLAT "two-1-flat.vmdk" 0
RW %d FLAT "two-2-flat.vmdk" 0
`, split/512, (len(data)-split)/512)))
	e.upload(t, "DC0_H0_VM0/two-1-flat.vmdk", data[:split])
	e.upload(t, "DC0_H0_VM0/two-2-flat.vmdk", data[split:])

	for _, streams := range []int{1, 2, 3, 8} {
		t.Run(fmt.Sprintf("streams=%d", streams), func(t *testing.T) {
			d.Destination = filepath.Join(t.TempDir(), "disk.img")
			plans := e.plan(t, e.jobSpec(d))
			require.Len(t, plans[0].Extents, 2)
			opts := testOptions(t)
			opts.Streams = streams
			e.served.Store(0)
			res := transfer.Run(context.Background(), plans, opts)
			e.waitRunServed(t)
			require.True(t, res.Succeeded, res.Error)
			require.Equal(t, treeRoot(data), res.Disks[0].SHA256)
			require.Equal(t, int64(len(data)), e.served.Load(), "bytes served")
			checkImage(t, d.Destination, data)
		})
	}
}

// TestResumeWithStreams cuts the server mid-copy with several streams,
// then resumes over 5 streams: with the same chunk the pieces written past the hashed
// offset are kept, with another chunk they are fetched again; either way
// the image and its SHA-256 end right. Each run's bytes are read once its
// connections are closed (see waitRunServed): the streams the cut did not
// hit are cancelled and may still write after the run has returned.
func TestResumeWithStreams(t *testing.T) {
	tests := map[string]struct {
		streams, resumeChunk int
		maxResent            int64
	}{
		"4 streams":                {streams: 4, resumeChunk: testChunk, maxResent: 4 * testChunk},
		"3 streams, chunk doubled": {streams: 3, resumeChunk: 2 * testChunk, maxResent: 3*testChunk + 3*testChunk},
		"2 streams":                {streams: 2, resumeChunk: testChunk, maxResent: 2 * testChunk},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newSim(t)
			data, d := e.stagedDisk(t, "rs", testSize, 41)
			opts := testOptions(t)
			opts.Streams = tc.streams
			e.setFaults(faults{cutAfter: 9*mib + 4321})
			res := transfer.Run(context.Background(), e.plan(t, e.jobSpec(d)), opts)
			e.waitRunServed(t)
			require.False(t, res.Succeeded)
			first := e.served.Load()

			e.setFaults(faults{})
			e.served.Store(0)
			opts.ChunkSize = tc.resumeChunk
			opts.Streams = 5
			res = transfer.Run(context.Background(), e.plan(t, e.jobSpec(d)), opts)
			e.waitRunServed(t)
			require.True(t, res.Succeeded, res.Error)
			require.Equal(t, treeRoot(data), res.Disks[0].SHA256)
			resent := first + e.served.Load() - int64(len(data))
			t.Logf("first run served %d, resumed from %d, %d bytes re-sent", first, res.Disks[0].ResumedFrom, resent)
			require.LessOrEqual(t, resent, tc.maxResent)
			checkImage(t, d.Destination, data)
		})
	}
}

func TestStreamsFlagBounds(t *testing.T) {
	for _, streams := range []string{"0", "17", "-1"} {
		t.Run(streams, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := transfer.Main(context.Background(), []string{"--spec", "x", "--credentials-dir", "y", "--streams", streams}, &stdout, &stderr)
			require.Equal(t, transfer.ExitUsage, code)
			require.Contains(t, stderr.String(), "--streams must be between 1 and 16")
		})
	}
}
