package transfer

import (
	"cmp"
	"slices"
	"sort"
	"sync"

	"platform.example/vm-migration/pkg/blocktree"
)

// pieceLayout cuts the image into pieces: half a chunk each, on a grid
// from each extent's start, never across an extent. A piece is read with
// one request per area it holds (one for the whole piece in a full copy),
// its bytes outside the areas are zeros, and a piece that holds no area
// is not read at all: the image keeps a hole there.
type pieceLayout struct {
	extents []ExtentPlan
	// areas are the parts of the image read, in order, not touching.
	areas    []byteRange
	size     int64
	capacity int64
}

// newPieceLayout lays out a plan's image in pieces of size bytes.
func newPieceLayout(plan *DiskPlan, size int64) pieceLayout {
	l := pieceLayout{extents: plan.Extents, size: size, capacity: plan.Spec.CapacityBytes}
	if plan.Areas == nil {
		l.areas = []byteRange{{Start: 0, End: l.capacity}}
		return l
	}
	for _, a := range plan.Areas {
		l.areas = append(l.areas, byteRange{Start: a.Start, End: a.End()})
	}
	return l
}

// extentAt is the index of the extent holding image offset off, or -1.
func (l pieceLayout) extentAt(off int64) int {
	for i, e := range l.extents {
		if off >= e.Start && off < e.Start+e.Length {
			return i
		}
	}
	return -1
}

// end is where the piece starting at start ends.
func (l pieceLayout) end(start int64) int64 {
	i := l.extentAt(start)
	if i < 0 {
		return l.capacity
	}
	e := l.extents[i]
	grid := e.Start + ((start-e.Start)/l.size+1)*l.size
	return min(grid, e.Start+e.Length)
}

// pieceStart is where the piece holding off starts.
func (l pieceLayout) pieceStart(off int64) int64 {
	i := l.extentAt(off)
	if i < 0 {
		return l.capacity
	}
	e := l.extents[i]
	return e.Start + (off-e.Start)/l.size*l.size
}

// areaFrom is the index of the first area that ends after off (it holds
// off, or starts after it), or len(areas).
func (l pieceLayout) areaFrom(off int64) int {
	return sort.Search(len(l.areas), func(i int) bool { return l.areas[i].End > off })
}

// hasData says whether [start, end) holds a byte of an area.
func (l pieceLayout) hasData(start, end int64) bool {
	i := l.areaFrom(start)
	return i < len(l.areas) && l.areas[i].Start < end
}

// nextData is the first piece at or after the piece boundary off that
// holds a byte of an area, or the capacity.
func (l pieceLayout) nextData(off int64) int64 {
	i := l.areaFrom(off)
	if i == len(l.areas) {
		return l.capacity
	}
	return max(off, l.pieceStart(max(off, l.areas[i].Start)))
}

// areasIn lists the parts of [start, end) inside areas, in order.
func (l pieceLayout) areasIn(start, end int64) []byteRange {
	var out []byteRange
	for i := l.areaFrom(start); i < len(l.areas) && l.areas[i].Start < end; i++ {
		out = append(out, byteRange{Start: max(start, l.areas[i].Start), End: min(end, l.areas[i].End)})
	}
	return out
}

// emptyPieces lists the runs of pieces at or after the piece boundary off
// that hold no area: nothing reads or writes them.
func (l pieceLayout) emptyPieces(off int64) []byteRange {
	var out []byteRange
	for at := off; at < l.capacity; {
		data := l.nextData(at)
		if data > at {
			out = append(out, byteRange{Start: at, End: data})
		}
		if data == l.capacity {
			break
		}
		at = l.end(data)
	}
	return out
}

// byteRange is [Start, End) of the image.
type byteRange struct {
	Start int64 `json:"start"`
	End   int64 `json:"end"`
}

// copyState is where one disk's copy stands: the image's bytes before
// hashed are written (durably, when there is a checkpoint) and taken by
// the tree builder b; written holds the pieces past hashed that are
// already in the image (start -> end), so they are neither fetched again
// nor lost.
type copyState struct {
	hashed int64
	b      *blocktree.Builder
	// tree is b's state at hashed, for the checkpoints.
	tree    blocktree.BuilderState
	written map[int64]int64
	// readBefore counts the bytes earlier runs read from the source for
	// the image, as far as their checkpoints recorded.
	readBefore int64
}

// writtenRanges lists written in order.
func (s *copyState) writtenRanges() []byteRange {
	rs := make([]byteRange, 0, len(s.written))
	for start, end := range s.written {
		rs = append(rs, byteRange{Start: start, End: end})
	}
	slices.SortFunc(rs, func(a, b byteRange) int { return cmp.Compare(a.Start, b.Start) })
	return rs
}

// ledger is the state shared by a disk's writer (which adds written
// pieces) and hasher (which moves hashed on and owns the builder).
type ledger struct {
	mu sync.Mutex
	st copyState
}

// hashedBytes is how much of the image is written and hashed.
func (l *ledger) hashedBytes() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.st.hashed
}

// doneBytes counts the written pieces past hashed too.
func (l *ledger) doneBytes() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.st.hashed
	for start, end := range l.st.written {
		n += end - start
	}
	return n
}

// addWritten records pieces that are now in the image for good.
func (l *ledger) addWritten(ps []fetched) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range ps {
		l.st.written[p.start] = p.end
	}
}

// writtenCopy is a copy of the written pieces.
func (l *ledger) writtenCopy() map[int64]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := make(map[int64]int64, len(l.st.written))
	for k, v := range l.st.written {
		m[k] = v
	}
	return m
}

// advance records that the piece [start, end) is hashed: tree is the
// builder's state at end.
func (l *ledger) advance(start, end int64, tree blocktree.BuilderState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.st.hashed = end
	l.st.tree = tree
	delete(l.st.written, start)
}

// checkpoint is the ledger as a checkpoint of a plan's source and map,
// this run having read read bytes from the source.
func (l *ledger) checkpoint(plan *DiskPlan, pieceSize, read int64) *checkpoint {
	l.mu.Lock()
	defer l.mu.Unlock()
	tree := l.st.tree
	return &checkpoint{
		BytesRead: l.st.readBefore + read,
		Version:   checkpointVersion,
		Source:    plan.Source,
		Map:       plan.Map,
		Capacity:  plan.Spec.CapacityBytes,
		PieceSize: pieceSize,
		Offset:    l.st.hashed,
		Tree:      &tree,
		Written:   l.st.writtenRanges(),
	}
}

// dispatcher hands out the pieces still to fetch, in image order.
type dispatcher struct {
	mu     sync.Mutex
	layout pieceLayout
	next   int64
	skip   map[int64]int64
}

// take returns the next piece to fetch, or false when none is left.
func (d *dispatcher) take() (start, end int64, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for d.next = d.layout.nextData(d.next); d.next < d.layout.capacity; d.next = d.layout.nextData(d.next) {
		start, end = d.next, d.layout.end(d.next)
		d.next = end
		if d.skip[start] != end {
			return start, end, true
		}
	}
	return 0, 0, false
}
