package blocktree

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// feed gives the builder data[from:to] in random pieces, zero runs as
// WriteZeros when zeros says so.
func feed(t *testing.T, b *Builder, data []byte, from, to int64, r *rand.Rand, zeros bool) {
	t.Helper()
	for at := from; at < to; {
		n := min(to-at, 1+r.Int64N(3*BlockSize))
		if r.IntN(4) == 0 {
			n = min(to-at, 1+r.Int64N(100))
		}
		chunk := data[at : at+n]
		if zeros && isZeroBytes(chunk) {
			require.NoError(t, b.WriteZeros(n))
		} else {
			require.NoError(t, b.Write(chunk))
		}
		at += n
		require.Equal(t, at, b.Offset())
	}
}

func isZeroBytes(b []byte) bool { return bytes.Count(b, []byte{0}) == len(b) }

func TestBuilderMakesTheTree(t *testing.T) {
	for _, size := range []int64{0, 1, BlockSize, BlockSize + 1, 12*BlockSize + 4097} {
		for _, workers := range []int{1, 3} {
			t.Run(fmt.Sprintf("size=%d/workers=%d", size, workers), func(t *testing.T) {
				data := image(size, uint64(size)+3)
				clear(data[min(size, 5*BlockSize+7):min(size, 9*BlockSize+11)]) // a hole across blocks
				want, root := naiveTree(data)
				var got []Leaf
				b := NewBuilder(size, Options{Workers: workers}, func(i int64, l Leaf) error {
					require.Equal(t, int64(len(got)), i, "leaves in order")
					got = append(got, l)
					return nil
				})
				r := rand.New(rand.NewPCG(uint64(size), 1))
				feed(t, b, data, 0, size, r, true)
				require.True(t, b.Done())
				gotRoot, err := b.Root()
				require.NoError(t, err)
				assert.Equal(t, root, gotRoot)
				assert.Equal(t, want.Leaves, append([]Leaf{}, got...))
				assert.Equal(t, NumLeaves(size), b.Leaves())
			})
		}
	}
	b := NewBuilder(10, Options{}, nil)
	_, err := b.Root()
	assert.ErrorContains(t, err, "has 0 of its 10 bytes")
	assert.Error(t, b.Write(make([]byte, 11)), "past the size")
	assert.Error(t, b.WriteZeros(11), "past the size")
	assert.Error(t, b.WriteZeros(-1))
}

func TestBuilderResumes(t *testing.T) {
	const size = 9*BlockSize + 12345
	data := image(size, 11)
	_, root := naiveTree(data)
	r := rand.New(rand.NewPCG(4, 2))
	for _, cut := range []int64{0, 1, BlockSize - 1, BlockSize, BlockSize + 1, 3*BlockSize + 77, 8*BlockSize + 1, size - 1, size} {
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			b := NewBuilder(size, Options{}, nil)
			feed(t, b, data, 0, cut, r, true)
			st, err := b.State()
			require.NoError(t, err)
			assert.Equal(t, cut, st.Offset)
			leaves := cut / BlockSize
			if cut == size {
				leaves = NumLeaves(size)
			}
			assert.Equal(t, leaves, st.Leaves)
			assert.Len(t, st.Last, int(min(2, leaves)))
			require.NoError(t, st.Verify(bytes.NewReader(data), size))

			again, err := ResumeBuilder(size, st, Options{}, nil)
			require.NoError(t, err)
			feed(t, again, data, cut, size, r, false)
			got, err := again.Root()
			require.NoError(t, err)
			assert.Equal(t, root, got)

			// A byte changed in the blocks checked fails Verify.
			if cut > 0 {
				for _, at := range []int64{cut - 1, max(0, (leaves-2)*BlockSize)} {
					damaged := bytes.Clone(data)
					damaged[at] ^= 0x80
					assert.Error(t, st.Verify(bytes.NewReader(damaged), size), "damage at byte %d", at)
				}
			}
			if cut > 0 {
				assert.Error(t, st.Verify(bytes.NewReader(data[:cut/2]), size), "an image cut short")
			}
		})
	}
}

func TestResumeBuilderRefusesABadState(t *testing.T) {
	const size = 5*BlockSize + 3
	data := image(size, 12)
	b := NewBuilder(size, Options{}, nil)
	require.NoError(t, b.Write(data[:2*BlockSize+10]))
	good, err := b.State()
	require.NoError(t, err)
	other := NewBuilder(size, Options{}, nil)
	require.NoError(t, other.Write(data[:BlockSize+10]))
	otherState, err := other.State()
	require.NoError(t, err)
	tests := map[string]func(st *BuilderState){
		"offset past the size":    func(st *BuilderState) { st.Offset = size + 1 },
		"leaves not the offset's": func(st *BuilderState) { st.Leaves = 1 },
		"root of other leaves":    func(st *BuilderState) { st.Root = otherState.Root },
		"block of other bytes":    func(st *BuilderState) { st.Offset = 2*BlockSize + 11 },
		"block state damaged":     func(st *BuilderState) { st.Block = st.Block[:20] },
		"three latest leaves":     func(st *BuilderState) { st.Last = append(st.Last, st.Last[0]) },
		"a latest leaf not hex":   func(st *BuilderState) { st.Last[0] = "XY" + st.Last[0][2:] },
		"uppercase hex":           func(st *BuilderState) { st.Last[0] = "AB" + st.Last[0][2:] },
		"a negative offset":       func(st *BuilderState) { st.Offset, st.Leaves = -1, 0 },
	}
	for name, mutate := range tests {
		t.Run(name, func(t *testing.T) {
			st := good
			st.Last = append([]string(nil), good.Last...)
			mutate(&st)
			_, err := ResumeBuilder(size, st, Options{}, nil)
			assert.Error(t, err)
		})
	}
	_, err = ResumeBuilder(size, good, Options{}, nil)
	require.NoError(t, err)
	l, err := parseLeaf(good.Last[1])
	require.NoError(t, err)
	assert.Equal(t, good.Last[1], hex.EncodeToString(l[:]))
}
