package blocktree

import (
	"bytes"
	"crypto/sha256"
	"encoding"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"sync"
)

// lastKept is how many of the latest leaves a Builder keeps in its state,
// so that a resume can check the image's last blocks against them.
const lastKept = 2

// Builder makes the tree of an image whose bytes it is given in order,
// as the transfer's in-order hasher gets them: each leaf goes, in order,
// to a sink (a tree file) and into the root, so nothing grows with the
// image. Whole blocks within one Write are hashed on Workers goroutines;
// whole blocks given by WriteZeros cost nothing. Its State can be saved
// with a checkpoint and resumed.
type Builder struct {
	size    int64
	off     int64
	workers int
	// block is the SHA-256 of the current block's bytes so far,
	// [leaves*BlockSize, off).
	block hash.Hash
	root  *RootHasher
	// last are the latest leaves, oldest first.
	last []Leaf
	sink func(i int64, l Leaf) error
	// leafBuf holds the leaves of one Write's whole blocks.
	leafBuf []Leaf
}

// NewBuilder is a Builder of the tree of size bytes, which calls sink (if
// not nil) with each leaf in order, hashing with the workers of opts.
func NewBuilder(size int64, opts Options, sink func(i int64, l Leaf) error) *Builder {
	return &Builder{size: size, workers: opts.workers(), block: sha256.New(), root: NewRootHasher(), sink: sink}
}

// Offset is how many bytes it has taken.
func (b *Builder) Offset() int64 { return b.off }

// Leaves is how many leaves it has made.
func (b *Builder) Leaves() int64 { return b.root.Count() }

// Done says it has taken all size bytes (and so made every leaf).
func (b *Builder) Done() bool { return b.off == b.size }

// Root is the tree's root once Done.
func (b *Builder) Root() (string, error) {
	if !b.Done() {
		return "", fmt.Errorf("the tree has %d of its %d bytes", b.off, b.size)
	}
	return b.root.Sum(), nil
}

// blockLeft is how many bytes the current block still takes.
func (b *Builder) blockLeft() int64 {
	i := b.root.Count()
	return i*BlockSize + BlockLen(i, b.size) - b.off
}

// leaf records the next leaf.
func (b *Builder) leaf(l Leaf) error {
	i := b.root.Count()
	if b.sink != nil {
		if err := b.sink(i, l); err != nil {
			return err
		}
	}
	b.root.Add(l)
	b.last = append(b.last, l)
	if len(b.last) > lastKept {
		b.last = b.last[1:]
	}
	b.block.Reset()
	return nil
}

// Write takes the image's next bytes.
func (b *Builder) Write(p []byte) error {
	if int64(len(p)) > b.size-b.off {
		return fmt.Errorf("%d bytes past the tree's %d at byte %d", len(p), b.size, b.off)
	}
	for len(p) > 0 {
		left := b.blockLeft()
		if b.off%BlockSize != 0 || int64(len(p)) < left {
			// Within the current block.
			n := min(int64(len(p)), left)
			b.block.Write(p[:n])
			b.off += n
			p = p[n:]
			if n == left {
				if err := b.leaf(leafOf(b.block)); err != nil {
					return err
				}
			}
			continue
		}
		// Whole blocks: hashed at once, in parallel.
		first := b.root.Count()
		n := int64(0)
		for k := first; n+BlockLen(k, b.size) <= int64(len(p)) && BlockLen(k, b.size) > 0; k++ {
			n += BlockLen(k, b.size)
		}
		leaves := b.hashWhole(p[:n], first)
		for _, l := range leaves {
			if err := b.leaf(l); err != nil {
				return err
			}
			b.off += BlockLen(b.root.Count()-1, b.size)
		}
		p = p[n:]
	}
	return nil
}

// hashWhole hashes whole blocks (p starts at block first) on the workers.
func (b *Builder) hashWhole(p []byte, first int64) []Leaf {
	count := int((int64(len(p)) + BlockSize - 1) / BlockSize)
	b.leafBuf = append(b.leafBuf[:0], make([]Leaf, count)...)
	block := func(k int) []byte {
		start := int64(k) * BlockSize
		return p[start : start+BlockLen(first+int64(k), b.size)]
	}
	workers := min(b.workers, count)
	if workers <= 1 {
		for k := range count {
			b.leafBuf[k] = hashBlock(block(k))
		}
		return b.leafBuf
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for k := w; k < count; k += workers {
				b.leafBuf[k] = hashBlock(block(k))
			}
		})
	}
	wg.Wait()
	return b.leafBuf
}

// WriteZeros takes n zero bytes (a hole): whole blocks are ZeroLeaf,
// nothing hashed.
func (b *Builder) WriteZeros(n int64) error {
	if n < 0 || n > b.size-b.off {
		return fmt.Errorf("%d zero bytes past the tree's %d at byte %d", n, b.size, b.off)
	}
	for n > 0 {
		left := b.blockLeft()
		if b.off%BlockSize == 0 && n >= left {
			if err := b.leaf(ZeroLeaf(int(left))); err != nil {
				return err
			}
			b.off += left
			n -= left
			continue
		}
		k := min(n, left)
		b.block.Write(zeroBlock()[:k])
		b.off += k
		n -= k
		if k == left {
			if err := b.leaf(leafOf(b.block)); err != nil {
				return err
			}
		}
	}
	return nil
}

// leafOf is the leaf of a block's hash.
func leafOf(h hash.Hash) Leaf {
	var l Leaf
	h.Sum(l[:0])
	return l
}

// BuilderState is a Builder's state, to save with a checkpoint: the bytes
// taken, the leaves made, the hash of the current block's bytes, the
// root's state and the latest leaves, which a resume checks against the
// image (Verify).
type BuilderState struct {
	// Offset is how many bytes were taken.
	Offset int64 `json:"offset"`
	// Leaves is how many leaves were made: the blocks before
	// Offset/BlockSize.
	Leaves int64 `json:"leaves"`
	// Block is the SHA-256 state of the bytes [Leaves*BlockSize, Offset)
	// (of none once every leaf is made).
	Block []byte `json:"block"`
	// Root is the root's state after the leaves (RootHasher).
	Root []byte `json:"root"`
	// Last are the latest leaves (at most two), oldest first, hex.
	Last []string `json:"last,omitempty"`
}

// State is the Builder's state.
func (b *Builder) State() (BuilderState, error) {
	block, err := b.block.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		return BuilderState{}, fmt.Errorf("saving the block's hash state: %w", err)
	}
	root, err := b.root.MarshalBinary()
	if err != nil {
		return BuilderState{}, err
	}
	st := BuilderState{Offset: b.off, Leaves: b.root.Count(), Block: block, Root: root}
	for _, l := range b.last {
		st.Last = append(st.Last, hex.EncodeToString(l[:]))
	}
	return st, nil
}

// ResumeBuilder is a Builder of the tree of size bytes in a saved state.
// It checks that the state is consistent, not that the image still holds
// what it says (Verify).
func ResumeBuilder(size int64, st BuilderState, opts Options, sink func(i int64, l Leaf) error) (*Builder, error) {
	leaves := st.Offset / BlockSize
	if st.Offset == size {
		leaves = NumLeaves(size)
	}
	if st.Offset < 0 || st.Offset > size || st.Leaves != leaves {
		return nil, fmt.Errorf("builder state at byte %d with %d leaves, of %d bytes, is inconsistent", st.Offset, st.Leaves, size)
	}
	b := NewBuilder(size, opts, sink)
	b.off = st.Offset
	if err := b.root.UnmarshalBinary(st.Root); err != nil {
		return nil, err
	}
	if b.root.Count() != st.Leaves {
		return nil, fmt.Errorf("builder state: the root took %d leaves, not %d", b.root.Count(), st.Leaves)
	}
	if err := b.block.(encoding.BinaryUnmarshaler).UnmarshalBinary(st.Block); err != nil {
		return nil, fmt.Errorf("restoring the block's hash state: %w", err)
	}
	if hashed, ok := hashedBytes(st.Block); !ok || hashed != uint64(st.Offset-st.blockStart()) {
		return nil, fmt.Errorf("builder state: the block's hash state is not of the %d bytes since block %d", st.Offset-st.blockStart(), st.Leaves)
	}
	if len(st.Last) > lastKept || int64(len(st.Last)) > st.Leaves {
		return nil, fmt.Errorf("builder state names %d latest leaves of %d", len(st.Last), st.Leaves)
	}
	for _, s := range st.Last {
		l, err := parseLeaf(s)
		if err != nil {
			return nil, fmt.Errorf("builder state: %w", err)
		}
		b.last = append(b.last, l)
	}
	return b, nil
}

// hashedBytes is how many bytes a saved SHA-256 state took: the last 8
// bytes of its 108 ("sha\x03", 8 words, a 64-byte buffer, the length).
func hashedBytes(state []byte) (uint64, bool) {
	if len(state) != 108 {
		return 0, false
	}
	return binary.BigEndian.Uint64(state[100:]), true
}

// parseLeaf reads a leaf's lowercase hex.
func parseLeaf(s string) (Leaf, error) {
	var l Leaf
	if len(s) != 2*len(l) || s != lowerHex(s) {
		return l, fmt.Errorf("%q is not a leaf's lowercase hex", s)
	}
	_, err := hex.Decode(l[:], []byte(s))
	if err != nil {
		return l, fmt.Errorf("%q is not a leaf's lowercase hex", s)
	}
	return l, nil
}

// lowerHex keeps s's lowercase hex digits only.
func lowerHex(s string) string {
	return string(bytes.Map(func(r rune) rune {
		if (r >= '0' && r <= '9') || (r >= 'a' && r <= 'f') {
			return r
		}
		return -1
	}, []byte(s)))
}

// blockStart is where the current block starts: the offset itself once
// every leaf is made.
func (st BuilderState) blockStart() int64 { return min(st.Leaves*BlockSize, st.Offset) }

// Verify checks, against the image r, what a resume relies on: the
// blocks of the latest leaves hash to them and the bytes of the current
// block, [Leaves*BlockSize, Offset), hash to Block. It reads at most
// lastKept+1 blocks.
func (st BuilderState) Verify(r io.ReaderAt, size int64) error {
	buf := make([]byte, BlockSize)
	first := st.Leaves - int64(len(st.Last))
	for k, s := range st.Last {
		want, err := parseLeaf(s)
		if err != nil {
			return err
		}
		i := first + int64(k)
		b := buf[:BlockLen(i, size)]
		if err := readFull(r, b, i*BlockSize); err != nil {
			return err
		}
		if hashBlock(b) != want {
			return fmt.Errorf("block %d (byte %d) no longer hashes to its leaf", i, i*BlockSize)
		}
	}
	h := sha256.New()
	start := st.blockStart()
	b := buf[:st.Offset-start]
	if err := readFull(r, b, start); err != nil {
		return err
	}
	h.Write(b)
	state, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		return err
	}
	if !bytes.Equal(state, st.Block) {
		return fmt.Errorf("bytes %d to %d no longer hash to the saved state", start, st.Offset)
	}
	return nil
}

// readFull reads len(b) bytes at off.
func readFull(r io.ReaderAt, b []byte, off int64) error {
	n, err := r.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("reading back bytes %d to %d: %w", off, off+int64(len(b)), err)
}
