package blocktree

import (
	"crypto/sha256"
	"encoding"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"math"
	"sync"
)

// BlockSize is the length of a block, the bytes one leaf hashes (see the
// package documentation for why 1 MiB).
const BlockSize = 1 << 20

// Scheme names the checksum this package defines: the root of a tree of
// SHA-256 leaves over 1 MiB blocks.
const Scheme = "sha256-tree-1MiB"

// Leaf is the SHA-256 of one block.
type Leaf = [sha256.Size]byte

// Tree is the block tree of an image's first Size bytes: Leaves[i] is the
// SHA-256 of block i.
type Tree struct {
	// Size is how many bytes of the image the tree covers.
	Size int64
	// Leaves are the blocks' hashes, in order: NumLeaves(Size) of them.
	Leaves []Leaf
}

// Range is the bytes [Offset, Offset+Length) of an image.
type Range struct {
	// Offset of the first byte.
	Offset int64 `json:"offset"`
	// Length in bytes.
	Length int64 `json:"length"`
}

// End is the offset just past the range.
func (r Range) End() int64 { return r.Offset + r.Length }

// NumLeaves is how many blocks, and so leaves, the first size bytes of an
// image have: ceil(size/BlockSize), 0 for a size of 0 or less.
func NumLeaves(size int64) int64 {
	if size <= 0 {
		return 0
	}
	return (size-1)/BlockSize + 1
}

// BlockLen is the length of block i of an image of size bytes: BlockSize
// but for the last block, and 0 for a block past the end.
func BlockLen(i, size int64) int64 {
	if i < 0 || i >= NumLeaves(size) {
		return 0
	}
	return min(BlockSize, size-i*BlockSize)
}

// Check says why the tree is not well formed (a leaf count that is not
// its size's), or nil.
func (t *Tree) Check() error {
	if t.Size < 0 {
		return fmt.Errorf("tree size %d is negative", t.Size)
	}
	if want := NumLeaves(t.Size); int64(len(t.Leaves)) != want {
		return fmt.Errorf("a tree of %d bytes has %d leaves, not %d", t.Size, want, len(t.Leaves))
	}
	return nil
}

// Root is the tree's root, lowercase hex: the SHA-256 of each leaf's
// lowercase hex and "\n", in order.
func (t *Tree) Root() string {
	r := NewRootHasher()
	for _, l := range t.Leaves {
		r.Add(l)
	}
	return r.Sum()
}

// Block is block i's byte range.
func (t *Tree) Block(i int64) Range {
	return Range{Offset: i * BlockSize, Length: BlockLen(i, t.Size)}
}

// zeroBlock is a block of zeros, to hash and compare with.
var zeroBlock = sync.OnceValue(func() []byte { return make([]byte, BlockSize) })

// fullZeroLeaf is the leaf of a whole block of zeros.
var fullZeroLeaf = sync.OnceValue(func() Leaf { return sha256.Sum256(zeroBlock()) })

// ZeroLeaf is the leaf of a block of n zeros (n at most BlockSize): the
// leaf of a hole. The whole block's is computed once, so whole blocks of
// holes cost nothing.
func ZeroLeaf(n int) Leaf {
	if n == BlockSize {
		return fullZeroLeaf()
	}
	if n < 0 || n > BlockSize {
		panic(fmt.Sprintf("blocktree: ZeroLeaf(%d): a block holds 0 to %d bytes", n, BlockSize))
	}
	return sha256.Sum256(zeroBlock()[:n])
}

// isZero says whether b (at most BlockSize bytes) is all zeros.
func isZero(b []byte) bool {
	return string(b) == string(zeroBlock()[:len(b)])
}

// hashBlock is the leaf of a block's bytes: a block of zeros is not hashed.
func hashBlock(b []byte) Leaf {
	if isZero(b) {
		return ZeroLeaf(len(b))
	}
	return sha256.Sum256(b)
}

// FirstDifference is the first block in which the images of two trees
// differ, as a byte range, and true; or false when the trees are equal.
// Trees of different sizes differ at the first block whose leaves differ
// or whose lengths do (a block one tree has and the other has not, or the
// shorter tree's last block), so two trees differ exactly when their
// roots or sizes do.
func FirstDifference(a, b *Tree) (Range, bool) {
	n := max(len(a.Leaves), len(b.Leaves))
	for i := range int64(n) {
		la, lb := BlockLen(i, a.Size), BlockLen(i, b.Size)
		if la != lb || i >= int64(len(a.Leaves)) || i >= int64(len(b.Leaves)) || a.Leaves[i] != b.Leaves[i] {
			return Range{Offset: i * BlockSize, Length: max(la, lb)}, true
		}
	}
	if a.Size != b.Size {
		// Only for malformed trees: well-formed ones differ at a block.
		return Range{Offset: min(a.Size, b.Size), Length: max(a.Size, b.Size) - min(a.Size, b.Size)}, true
	}
	return Range{}, false
}

// lineLen is the length of a leaf's line in the root's input: its hex and "\n".
const lineLen = 2*sha256.Size + 1

// RootHasher computes a root from leaves given in order, without keeping
// them: 32 MiB of leaves per TiB need not be held to know the root. Its
// state can be saved (MarshalBinary) and restored.
type RootHasher struct {
	h hash.Hash
	n int64
}

// NewRootHasher is a RootHasher that has taken no leaf.
func NewRootHasher() *RootHasher { return &RootHasher{h: sha256.New()} }

// Add takes the next leaf.
func (r *RootHasher) Add(l Leaf) {
	var line [lineLen]byte
	hex.Encode(line[:], l[:])
	line[len(line)-1] = '\n'
	r.h.Write(line[:])
	r.n++
}

// Count is how many leaves it has taken.
func (r *RootHasher) Count() int64 { return r.n }

// Sum is the root of the leaves taken so far, lowercase hex.
func (r *RootHasher) Sum() string { return hex.EncodeToString(r.h.Sum(nil)) }

// MarshalBinary saves the state: the leaf count and the SHA-256 state.
func (r *RootHasher) MarshalBinary() ([]byte, error) {
	state, err := r.h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("saving the root's hash state: %w", err)
	}
	return binary.BigEndian.AppendUint64(state, uint64(r.n)), nil
}

// UnmarshalBinary restores a state MarshalBinary saved.
func (r *RootHasher) UnmarshalBinary(data []byte) error {
	if len(data) < 8 {
		return errors.New("restoring the root's hash state: too short")
	}
	n := int64(binary.BigEndian.Uint64(data[len(data)-8:]))
	if n < 0 {
		return errors.New("restoring the root's hash state: negative leaf count")
	}
	state := data[:len(data)-8]
	h := sha256.New()
	if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(state); err != nil {
		return fmt.Errorf("restoring the root's hash state: %w", err)
	}
	// The state ends with the bytes hashed: a line of 65 per leaf.
	if hashed, ok := hashedBytes(state); !ok || n > math.MaxInt64/lineLen || hashed != uint64(n*lineLen) {
		return fmt.Errorf("restoring the root's hash state: %d bytes hashed for %d leaves", hashed, n)
	}
	r.h, r.n = h, n
	return nil
}
