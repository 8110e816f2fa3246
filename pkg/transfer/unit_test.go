package transfer

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"

	"platform.example/vm-migration/pkg/transfer/wire"
)

func TestParseDescriptor(t *testing.T) {
	base := "# Disk DescriptorFile\nversion=1\nCID=1a2b3c4d\nparentCID=ffffffff\ncreateType=\"%s\"\n\n%s\n\nddb.adapterType = \"lsilogic\"\n"
	tests := []struct {
		name    string
		text    string
		wantErr error
		extents []Extent
	}{
		{name: "vmfs flat", text: fmtDesc(base, "vmfs", `RW 2048 VMFS "web-flat.vmdk"`), extents: []Extent{{File: "web-flat.vmdk", Sectors: 2048}}},
		{name: "file name with spaces", text: fmtDesc(base, "vmfs", `RW 8 VMFS "my disk-flat.vmdk"`), extents: []Extent{{File: "my disk-flat.vmdk", Sectors: 8}}},
		{name: "two flat extents with offset", text: fmtDesc(base, "twoGbMaxExtentFlat", "RW 4 FLAT \"a-f001.vmdk\" 0\nRW 4 FLAT \"a-f002.vmdk\" 2"),
			extents: []Extent{{File: "a-f001.vmdk", Sectors: 4}, {File: "a-f002.vmdk", Sectors: 4, OffsetSectors: 2}}},
		{name: "vmfsSparse delta", text: fmtDesc(base, "vmfsSparse", `RW 2048 VMFSSPARSE "web-000001-delta.vmdk"`), wantErr: ErrSnapshotDelta},
		{name: "seSparse delta", text: fmtDesc(base, "seSparse", `RW 2048 SESPARSE "web-000001-sesparse.vmdk"`), wantErr: ErrSnapshotDelta},
		{name: "parent hint", text: fmtDesc(base, "vmfs", `RW 2048 VMFS "web-flat.vmdk"`) + "parentFileNameHint=\"web.vmdk\"\n", wantErr: ErrSnapshotDelta},
		{name: "parent CID", text: strings.Replace(fmtDesc(base, "vmfs", `RW 2048 VMFS "web-flat.vmdk"`), "parentCID=ffffffff", "parentCID=1a2b3c4c", 1), wantErr: ErrSnapshotDelta},
		{name: "raw device mapping", text: fmtDesc(base, "vmfsPassthroughRawDeviceMap", `RW 2048 VMFSRDM "web-rdm.vmdk"`), wantErr: ErrUnsupportedDisk},
		{name: "stream optimized", text: fmtDesc(base, "streamOptimized", `RW 2048 SPARSE "x.vmdk"`), wantErr: ErrSnapshotDelta},
		{name: "no extent", text: fmtDesc(base, "vmfs", ""), wantErr: ErrUnsupportedDisk},
		{name: "no create type", text: "version=1\nRW 8 VMFS \"x-flat.vmdk\"\n", wantErr: ErrUnsupportedDisk},
		{name: "binary sparse", text: "KDMV\x01\x00\x00\x00", wantErr: ErrUnsupportedDisk},
		{name: "bad size", text: fmtDesc(base, "vmfs", `RW many VMFS "x-flat.vmdk"`), wantErr: errors.New("no valid size")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := ParseDescriptor([]byte(tc.text))
			if tc.wantErr != nil {
				// The error is tc.wantErr, wraps it, or says what it says.
				if !errors.Is(err, tc.wantErr) {
					require.ErrorContains(t, err, tc.wantErr.Error(), "want %v", tc.wantErr)
				}
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.extents, d.Extents, "extents")
		})
	}
}

func fmtDesc(base, createType, extents string) string {
	return strings.Replace(strings.Replace(base, "%s", createType, 1), "%s", extents, 1)
}

func TestParseDatastorePath(t *testing.T) {
	tests := map[string]struct {
		in, ds, path string
		bad          bool
	}{
		"plain":       {in: "[ds1] web/web.vmdk", ds: "ds1", path: "web/web.vmdk"},
		"spaces":      {in: "[SAN LUN 1] my vm/my vm.vmdk", ds: "SAN LUN 1", path: "my vm/my vm.vmdk"},
		"no brackets": {in: "ds1/web.vmdk", bad: true},
		"no file":     {in: "[ds1] ", bad: true},
		"escape":      {in: "[ds1] web/../../etc/passwd", bad: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p, err := wire.ParseDatastorePath(tc.in)
			if tc.bad {
				require.Error(t, err, "want %q refused", tc.in)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.ds, p.Datastore, "datastore of %q", tc.in)
			require.Equal(t, tc.path, p.Path, "path of %q", tc.in)
		})
	}
	p, _ := wire.ParseDatastorePath("[ds1] web/web.vmdk")
	_, err := p.Sibling("../x-flat.vmdk")
	require.Error(t, err, "an extent outside the descriptor's directory was accepted")
}

func TestParseContentRange(t *testing.T) {
	tests := map[string]struct {
		in                 string
		first, last, total int64
		bad                bool
	}{
		"full":          {in: "bytes 0-99/100", first: 0, last: 99, total: 100},
		"unknown total": {in: "bytes 5-9/*", first: 5, last: 9, total: -1},
		"past the end":  {in: "bytes 0-100/100", bad: true},
		"reversed":      {in: "bytes 9-5/100", bad: true},
		"not bytes":     {in: "items 0-1/2", bad: true},
		"garbage":       {in: "bytes x-y/z", bad: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f, l, n, err := parseContentRange(tc.in)
			if tc.bad {
				require.Error(t, err, "want %q refused", tc.in)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.first, f, "first byte of %q", tc.in)
			require.Equal(t, tc.last, l, "last byte of %q", tc.in)
			require.Equal(t, tc.total, n, "total of %q", tc.in)
		})
	}
}

func TestJobSpecValidation(t *testing.T) {
	good := `version: v2
endpoint: {url: "https://vc.example.com/sdk", datacenter: DC0}
vmMoRef: vm-42
disks:
- {key: 2000, fileName: "[ds1] web/web.vmdk", capacityBytes: 1048576, destination: /staging/2000/disk.img}
`
	_, err := wire.ParseJobSpec([]byte(good))
	require.NoError(t, err, "the good spec")
	tests := map[string]struct{ from, to, want string }{
		"unknown field":     {from: "vmMoRef:", to: "vmName: web\nvmMoRef:", want: "unknown field"},
		"duplicate key":     {from: "disks:\n", to: "disks:\n- {key: 2000, fileName: \"[ds1] a.vmdk\", capacityBytes: 512, destination: /s/b/disk.img}\n", want: "duplicate key"},
		"odd capacity":      {from: "1048576", to: "1000", want: "multiple of 512"},
		"relative dest":     {from: "/staging/2000/disk.img", to: "disk.img", want: "not an absolute path"},
		"no datastore":      {from: "[ds1] web/web.vmdk", to: "web/web.vmdk", want: "does not start with [datastore]"},
		"wrong version":     {from: "version: v2", to: "version: v1", want: `version is "v1", want "v2"`},
		"relative tree":     {from: "destination: /staging/2000/disk.img}", to: "destination: /staging/2000/disk.img, treeFile: disk.tree}", want: "treeFile \"disk.tree\" is not an absolute path"},
		"tree is the image": {from: "destination: /staging/2000/disk.img}", to: "destination: /staging/2000/disk.img, treeFile: /staging/2000/disk.img}", want: "is a destination"},
		"tree used twice": {from: "disks:\n", to: "disks:\n- {key: 2001, fileName: \"[ds1] a.vmdk\", capacityBytes: 512, destination: /dev/vdb, treeFile: /t/x.tree}\n- {key: 2002, fileName: \"[ds1] b.vmdk\", capacityBytes: 512, destination: /dev/vdc, treeFile: /t/x.tree}\n",
			want: "used twice"},
		"endpoint not a URL": {from: "https://vc.example.com/sdk", to: "vc.example.com", want: "not an http(s) URL"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := wire.ParseJobSpec([]byte(strings.Replace(good, tc.from, tc.to, 1)))
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestTerminationMessageFits(t *testing.T) {
	res := &wire.Result{Kind: wire.KindResult, Error: strings.Repeat("x", 3000), Reason: wire.ReasonBadResponse}
	for i := range 16 {
		res.Disks = append(res.Disks, wire.DiskResult{Key: int32(2000 + i), Bytes: math.MaxInt64, SHA256: strings.Repeat("a", 64), DurationSeconds: 12345.678, Error: strings.Repeat("e", 200)})
	}
	msg := wire.TerminationMessage(res)
	require.LessOrEqual(t, len(msg), wire.MaxTerminationMessage, "termination message size")
	back, err := wire.ParseResult(msg)
	require.NoError(t, err, "checksums lost")
	require.Len(t, back.Disks, 16, "checksums lost")
	require.Equal(t, res.Disks[15].SHA256, back.Disks[15].SHA256, "checksums lost")

	// Sixteen disks with every figure set and long reasons still fit,
	// keeping checksums, sizes and how each disk was read.
	for i := range res.Disks {
		d := &res.Disks[i]
		d.ResumedFrom, d.Kept, d.BytesRead, d.AllocatedBytes = math.MaxInt64, true, math.MaxInt64, ptr.To[int64](math.MaxInt64)
		d.AllocatedOnly = i%2 == 0
		if !d.AllocatedOnly {
			d.FullCopyReason = strings.Repeat("vSphere's map of the disk's allocated areas covers less ", 4)
		}
	}
	msg = wire.TerminationMessage(res)
	require.LessOrEqual(t, len(msg), wire.MaxTerminationMessage, "termination message size")
	back, err = wire.ParseResult(msg)
	require.NoError(t, err, "checksums lost")
	for i, d := range back.Disks {
		require.Equal(t, res.Disks[i].SHA256, d.SHA256, "checksums lost")
		require.Equal(t, res.Disks[i].Bytes, d.Bytes, "sizes lost")
		require.Equal(t, res.Disks[i].AllocatedOnly, d.AllocatedOnly, "how the disk was read lost")
		require.Equal(t, res.Disks[i].BytesRead, d.BytesRead, "bytes read lost")
	}
	t.Logf("%d bytes: %s", len(msg), msg[:200])
}

// TestBlockDestinationZeroes writes through the block-device path (on a
// file standing in for a device): zero blocks must overwrite old content.
func TestBlockDestinationZeroes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dev")
	old := bytes.Repeat([]byte{0xEE}, 1<<20)
	require.NoError(t, os.WriteFile(path, old, 0o600))
	for _, direct := range []bool{false, true} {
		d, err := openDestination(path, 1<<20, direct)
		require.NoError(t, err)
		d.block = true
		chunk := alignedBuffer(1 << 20)
		copy(chunk[300<<10:], bytes.Repeat([]byte{7}, 100<<10))
		require.NoError(t, d.writeChunk(chunk, 0))
		require.NoError(t, d.finish())
		got, _ := os.ReadFile(path)
		// A 1 MiB diff helps nobody: the size, then bytes.Equal.
		require.Equal(t, len(chunk), len(got), "direct=%v: the device does not hold the chunk", direct)
		require.True(t, bytes.Equal(chunk, got), "direct=%v: the device does not hold the chunk", direct)
		copy(chunk, old) // dirty it again for the next round
		_ = os.WriteFile(path, old, 0o600)
	}
}

func TestDestinationNeedsSpace(t *testing.T) {
	dir := t.TempDir()
	_, err := openDestination(filepath.Join(dir, "disk.img"), 1<<60, true)
	require.ErrorIs(t, err, ErrDestination)
	require.ErrorContains(t, err, "not enough space")
	entries, _ := os.ReadDir(dir)
	require.Empty(t, entries, "a refused destination left files behind")
}
