package blocktree

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// image is size bytes of random data with zero runs: a whole zero block,
// and zeros across a block boundary.
func image(size int64, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, size+8)
	for i := 0; i < len(b)-8; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
	b = b[:size]
	zero := func(from, to int64) { clear(b[min(max(from, 0), size):min(max(to, 0), size)]) }
	zero(2*BlockSize, 3*BlockSize)
	zero(4*BlockSize-1000, 4*BlockSize+1000)
	return b
}

// naiveTree is the definition, spelled out: leaf i the SHA-256 of block
// i, the root the SHA-256 of the leaves' hex lines.
func naiveTree(data []byte) (*Tree, string) {
	t := &Tree{Size: int64(len(data)), Leaves: []Leaf{}}
	var lines strings.Builder
	for off := 0; off < len(data); off += BlockSize {
		l := sha256.Sum256(data[off:min(off+BlockSize, len(data))])
		t.Leaves = append(t.Leaves, l)
		lines.WriteString(hex.EncodeToString(l[:]) + "\n")
	}
	root := sha256.Sum256([]byte(lines.String()))
	return t, hex.EncodeToString(root[:])
}

func TestNumLeavesAndBlockLen(t *testing.T) {
	tests := []struct {
		size, leaves, lastLen int64
	}{
		{size: 0, leaves: 0},
		{size: -5, leaves: 0},
		{size: 1, leaves: 1, lastLen: 1},
		{size: BlockSize - 1, leaves: 1, lastLen: BlockSize - 1},
		{size: BlockSize, leaves: 1, lastLen: BlockSize},
		{size: BlockSize + 1, leaves: 2, lastLen: 1},
		{size: 1 << 40, leaves: 1 << 20, lastLen: BlockSize},
		{size: math.MaxInt64, leaves: 1 << 43, lastLen: BlockSize - 1},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.size), func(t *testing.T) {
			assert.Equal(t, tc.leaves, NumLeaves(tc.size))
			if tc.leaves > 0 {
				assert.Equal(t, tc.lastLen, BlockLen(tc.leaves-1, tc.size))
				assert.Equal(t, int64(min(BlockSize, tc.size)), BlockLen(0, tc.size))
			}
			assert.Zero(t, BlockLen(tc.leaves, tc.size), "past the last block")
			assert.Zero(t, BlockLen(-1, tc.size))
		})
	}
}

func TestRootIsTheDefinition(t *testing.T) {
	for _, size := range []int64{0, 1, 4096, BlockSize - 1, BlockSize, BlockSize + 1, 5*BlockSize + 12345} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			data := image(size, uint64(size))
			want, root := naiveTree(data)
			got := &Tree{Size: size, Leaves: []Leaf{}}
			for off := int64(0); off < size; off += BlockSize {
				got.Leaves = append(got.Leaves, sha256.Sum256(data[off:min(off+BlockSize, size)]))
			}
			require.NoError(t, got.Check())
			assert.Equal(t, want.Leaves, got.Leaves)
			assert.Equal(t, root, got.Root())
		})
	}
	empty := sha256.Sum256(nil)
	assert.Equal(t, hex.EncodeToString(empty[:]), (&Tree{}).Root(), "a size of 0: the SHA-256 of the empty string")
}

func TestCheck(t *testing.T) {
	assert.NoError(t, (&Tree{Size: 0}).Check())
	assert.NoError(t, (&Tree{Size: BlockSize + 1, Leaves: make([]Leaf, 2)}).Check())
	assert.ErrorContains(t, (&Tree{Size: BlockSize + 1, Leaves: make([]Leaf, 1)}).Check(), "has 2 leaves, not 1")
	assert.ErrorContains(t, (&Tree{Size: -1}).Check(), "negative")
}

func TestZeroLeaf(t *testing.T) {
	for _, n := range []int{0, 1, 512, BlockSize - 1, BlockSize} {
		assert.Equal(t, Leaf(sha256.Sum256(make([]byte, n))), ZeroLeaf(n), "%d zeros", n)
	}
	assert.Panics(t, func() { ZeroLeaf(BlockSize + 1) })
	assert.Panics(t, func() { ZeroLeaf(-1) })
	assert.Equal(t, ZeroLeaf(10), hashBlock(make([]byte, 10)), "a block read as zeros is a zero leaf")
}

func TestRootHasherState(t *testing.T) {
	data := image(7*BlockSize+3, 7)
	tree, root := naiveTree(data)
	for cut := range len(tree.Leaves) + 1 {
		r := NewRootHasher()
		for _, l := range tree.Leaves[:cut] {
			r.Add(l)
		}
		state, err := r.MarshalBinary()
		require.NoError(t, err)
		back := NewRootHasher()
		require.NoError(t, back.UnmarshalBinary(state))
		assert.Equal(t, int64(cut), back.Count())
		for _, l := range tree.Leaves[cut:] {
			back.Add(l)
		}
		assert.Equal(t, root, back.Sum(), "resumed after %d leaves", cut)
	}
	r := NewRootHasher()
	r.Add(tree.Leaves[0])
	state, err := r.MarshalBinary()
	require.NoError(t, err)
	for name, bad := range map[string][]byte{
		"empty":             nil,
		"short":             state[:7],
		"no hash state":     state[len(state)-8:],
		"another count":     append(bytes.Clone(state[:len(state)-1]), 2),
		"a negative count":  append(bytes.Clone(state[:len(state)-8]), 0x80, 0, 0, 0, 0, 0, 0, 1),
		"a damaged hash":    append([]byte("shx"), state[3:]...),
		"a state truncated": append(bytes.Clone(state[:50]), state[len(state)-8:]...),
	} {
		assert.Error(t, NewRootHasher().UnmarshalBinary(bad), name)
	}
}

func TestFirstDifference(t *testing.T) {
	data := image(5*BlockSize+100, 3)
	base, _ := naiveTree(data)
	changed := func(at int64) *Tree {
		d := bytes.Clone(data)
		d[at] ^= 1
		tr, _ := naiveTree(d)
		return tr
	}
	tests := map[string]struct {
		a, b *Tree
		want Range
		diff bool
	}{
		"equal":                 {a: base, b: base},
		"both empty":            {a: &Tree{}, b: &Tree{}},
		"a byte in block 2":     {a: base, b: changed(2*BlockSize + 17), want: Range{2 * BlockSize, BlockSize}, diff: true},
		"a byte in the last":    {a: base, b: changed(5*BlockSize + 99), want: Range{5 * BlockSize, 100}, diff: true},
		"two blocks: the first": {a: changed(4 * BlockSize), b: changed(1), want: Range{0, BlockSize}, diff: true},
		"one byte shorter": {a: base, b: func() *Tree { tr, _ := naiveTree(data[:len(data)-1]); return tr }(),
			want: Range{5 * BlockSize, 100}, diff: true},
		"a block shorter": {a: func() *Tree { tr, _ := naiveTree(data[:4*BlockSize]); return tr }(), b: base,
			want: Range{4 * BlockSize, BlockSize}, diff: true},
		"empty and not": {a: &Tree{}, b: base, want: Range{0, BlockSize}, diff: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, diff := FirstDifference(tc.a, tc.b)
			assert.Equal(t, tc.diff, diff)
			assert.Equal(t, tc.want, got)
			back, diff2 := FirstDifference(tc.b, tc.a)
			assert.Equal(t, diff, diff2, "symmetric")
			assert.Equal(t, got, back, "symmetric")
			assert.Equal(t, diff, tc.a.Root() != tc.b.Root() || tc.a.Size != tc.b.Size, "differ exactly when the roots or sizes do")
		})
	}
}
