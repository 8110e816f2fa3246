package blocktree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sparse is an image whose data lies in runs, the rest holes, which says
// where its data is (DataMapper) and records what is read.
type sparse struct {
	data []byte
	runs []Range // data runs, in order
	mu   sync.Mutex
	read []Range
}

func (s *sparse) ReadAt(p []byte, off int64) (int, error) {
	s.mu.Lock()
	s.read = append(s.read, Range{off, int64(len(p))})
	s.mu.Unlock()
	return bytes.NewReader(s.data).ReadAt(p, off)
}

func (s *sparse) NextData(off, end int64) (int64, int64, error) {
	for _, r := range s.runs {
		if r.End() > off && r.Offset < end {
			return max(off, r.Offset), min(end, r.End()), nil
		}
	}
	return end, end, nil
}

// readHoles says whether anything read lies wholly in a hole block.
func (s *sparse) readHoles(t *testing.T) {
	t.Helper()
	for _, rd := range s.read {
		hasData := false
		for _, r := range s.runs {
			if r.Offset < rd.End() && r.End() > rd.Offset {
				hasData = true
			}
		}
		assert.True(t, hasData, "read [%d, +%d), which holds no data", rd.Offset, rd.Length)
	}
}

// sparseImage is size bytes with data (random) only in runs.
func sparseImage(size int64, runs []Range) *sparse {
	full := image(size, uint64(size))
	s := &sparse{data: make([]byte, size), runs: runs}
	for _, r := range runs {
		copy(s.data[r.Offset:r.End()], full[r.Offset:r.End()])
	}
	return s
}

func TestCompute(t *testing.T) {
	ctx := context.Background()
	for _, size := range []int64{0, 1, BlockSize - 1, BlockSize, BlockSize + 1, 9*BlockSize + 4097, 40 * BlockSize} {
		data := image(size, uint64(size)+1)
		want, root := naiveTree(data)
		for _, workers := range []int{1, 2, 5} {
			t.Run(fmt.Sprintf("size=%d/workers=%d", size, workers), func(t *testing.T) {
				got, st, err := Compute(ctx, bytes.NewReader(data), size, Options{Workers: workers})
				require.NoError(t, err)
				assert.Equal(t, want.Leaves, got.Leaves)
				assert.Equal(t, root, got.Root())
				assert.Equal(t, Stats{BlocksRead: NumLeaves(size), BytesRead: size}, st)
			})
		}
	}
	// The first bytes of a longer image.
	data := image(3*BlockSize, 9)
	want, _ := naiveTree(data[:BlockSize+5])
	got, _, err := Compute(ctx, bytes.NewReader(data), BlockSize+5, Options{})
	require.NoError(t, err)
	assert.Equal(t, want, got)
}

func TestComputeLeavesHolesUnread(t *testing.T) {
	const size = 20*BlockSize + 300
	tests := map[string][]Range{
		"no data":                  nil,
		"all data":                 {{0, size}},
		"a run inside a block":     {{5*BlockSize + 10, 100}},
		"runs across boundaries":   {{BlockSize - 10, 20}, {7*BlockSize + 5, 3 * BlockSize}, {size - 1, 1}},
		"data at the very start":   {{0, 1}},
		"the tail only":            {{20 * BlockSize, 300}},
		"a run on a block":         {{12 * BlockSize, BlockSize}},
		"many runs in one block":   {{2 * BlockSize, 1}, {2*BlockSize + 100, 1}, {3*BlockSize - 1, 1}},
		"runs every other block":   {{0, BlockSize}, {2 * BlockSize, BlockSize}, {4 * BlockSize, BlockSize}, {15 * BlockSize, 4096}},
		"data ends before the end": {{0, 10 * BlockSize}},
	}
	for name, runs := range tests {
		t.Run(name, func(t *testing.T) {
			img := sparseImage(size, runs)
			want, root := naiveTree(img.data)
			got, st, err := Compute(context.Background(), img, size, Options{Workers: 3})
			require.NoError(t, err)
			assert.Equal(t, want.Leaves, got.Leaves)
			assert.Equal(t, root, got.Root())
			img.readHoles(t)
			dataBlocks := map[int64]bool{}
			for _, r := range runs {
				for i := r.Offset / BlockSize; i <= (r.End()-1)/BlockSize; i++ {
					dataBlocks[i] = true
				}
			}
			assert.Equal(t, int64(len(dataBlocks)), st.BlocksRead, "blocks read: those that meet data")
			assert.Equal(t, NumLeaves(size)-int64(len(dataBlocks)), st.BlocksUnread)
		})
	}
}

// badMapper answers NextData with fixed, wrong figures.
type badMapper struct {
	io.ReaderAt
	data, hole int64
	err        error
}

func (b badMapper) NextData(int64, int64) (int64, int64, error) { return b.data, b.hole, b.err }

func TestComputeRefusesABadDataMap(t *testing.T) {
	data := bytes.NewReader(make([]byte, 3*BlockSize))
	for name, m := range map[string]badMapper{
		"an error":          {err: errors.New("seek failed")},
		"data before off":   {data: -1, hole: 5},
		"data past the end": {data: 4 * BlockSize, hole: 4 * BlockSize},
		"an empty run":      {data: 10, hole: 10},
		"a hole past end":   {data: 0, hole: 4 * BlockSize},
	} {
		m.ReaderAt = data
		_, _, err := Compute(context.Background(), m, 3*BlockSize, Options{})
		assert.ErrorContains(t, err, "finding data after byte 0", name)
	}
}

// shortReader ends early.
type shortReader struct{ n int64 }

func (s shortReader) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > s.n {
		n := max(0, int(s.n-off))
		return n, io.EOF
	}
	return len(p), nil
}

func TestComputeFailures(t *testing.T) {
	ctx := context.Background()
	_, _, err := Compute(ctx, shortReader{n: 5*BlockSize + 3}, 6*BlockSize, Options{Workers: 2})
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	assert.ErrorContains(t, err, "reading block 5 (byte 5242880)")

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, _, err = Compute(cancelled, bytes.NewReader(make([]byte, 30*BlockSize)), 30*BlockSize, Options{})
	assert.ErrorIs(t, err, context.Canceled)

	_, _, err = Compute(ctx, bytes.NewReader(nil), -1, Options{})
	assert.ErrorContains(t, err, "negative")

	// An error of emit stops the walk, and is returned.
	stop := errors.New("enough")
	seen := 0
	_, err = Walk(ctx, bytes.NewReader(make([]byte, 300*BlockSize)), 300*BlockSize, Options{Workers: 2}, func(i int64, _ Leaf) error {
		assert.Equal(t, int64(seen), i, "leaves in order")
		seen++
		if seen == 3 {
			return stop
		}
		return nil
	})
	assert.ErrorIs(t, err, stop)
	assert.Equal(t, 3, seen, "nothing emitted after the error")
}

func TestUpdate(t *testing.T) {
	const size = 30*BlockSize + 777
	ctx := context.Background()
	before := image(size, 5)
	tests := map[string]struct {
		ranges []Range
		blocks int64
	}{
		"nothing":                    {ranges: nil, blocks: 0},
		"one byte":                   {ranges: []Range{{3*BlockSize + 5, 1}}, blocks: 1},
		"across a boundary":          {ranges: []Range{{BlockSize - 1, 2}}, blocks: 2},
		"a whole block":              {ranges: []Range{{7 * BlockSize, BlockSize}}, blocks: 1},
		"the tail":                   {ranges: []Range{{size - 10, 10}}, blocks: 1},
		"unsorted, overlapping runs": {ranges: []Range{{20 * BlockSize, 3 * BlockSize}, {0, 4096}, {21 * BlockSize, BlockSize + 1}, {65536, 65536}}, blocks: 4},
		"everything":                 {ranges: []Range{{0, size}}, blocks: 31},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tree, _, err := Compute(ctx, bytes.NewReader(before), size, Options{})
			require.NoError(t, err)
			after := bytes.Clone(before)
			for _, r := range tc.ranges {
				for i := r.Offset; i < r.End(); i++ {
					after[i] = ^after[i]
				}
			}
			img := &sparse{data: after, runs: []Range{{0, size}}}
			st, err := tree.Update(ctx, img, tc.ranges, Options{Workers: 2})
			require.NoError(t, err)
			want, root := naiveTree(after)
			assert.Equal(t, want.Leaves, tree.Leaves)
			assert.Equal(t, root, tree.Root())
			assert.Equal(t, tc.blocks, st.Blocks)
			var read int64
			for _, r := range img.read {
				read += r.Length
			}
			assert.Equal(t, st.BytesRead, read)
			assert.LessOrEqual(t, read, tc.blocks*BlockSize, "only the blocks the ranges touch are read")
		})
	}

	tree, _, err := Compute(ctx, bytes.NewReader(before), size, Options{})
	require.NoError(t, err)
	root := tree.Root()
	for _, bad := range [][]Range{{{size, 1}}, {{-1, 5}}, {{0, 0}}, {{size - 1, 2}}, {{5, 1}, {1 << 62, 1 << 62}}} {
		_, err := tree.Update(ctx, bytes.NewReader(before), bad, Options{})
		assert.ErrorContains(t, err, "is not inside the image", "%v", bad)
	}
	_, err = tree.Update(ctx, shortReader{n: 2 * BlockSize}, []Range{{0, 5 * BlockSize}}, Options{})
	assert.Error(t, err)
	assert.Equal(t, root, tree.Root(), "a failed update leaves the tree as it was")
}

// TestUpdateLeavesHolesUnread: a block re-hashed that is a hole now (the
// commit punched it) is not read.
func TestUpdateLeavesHolesUnread(t *testing.T) {
	const size = 8 * BlockSize
	img := sparseImage(size, []Range{{BlockSize, 10}})
	tree := &Tree{Size: size, Leaves: make([]Leaf, 8)}
	st, err := tree.Update(context.Background(), img, []Range{{0, size}}, Options{})
	require.NoError(t, err)
	want, _ := naiveTree(img.data)
	assert.Equal(t, want.Leaves, tree.Leaves)
	assert.Equal(t, int64(1), st.BlocksRead)
	assert.Equal(t, int64(7), st.BlocksUnread)
	img.readHoles(t)
}
