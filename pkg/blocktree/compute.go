package blocktree

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
)

// DataMapper is implemented by an io.ReaderAt that can say where its data
// is, such as a sparse file (SEEK_DATA, SEEK_HOLE): the blocks wholly in
// its holes get ZeroLeaf without being read.
type DataMapper interface {
	// NextData returns the first run of data at or after off, [data,
	// hole), with off <= data <= hole <= end; [off, data) reads as zeros,
	// and data == end says there is no data in [off, end). A reader that
	// cannot tell returns off, end.
	NextData(off, end int64) (data, hole int64, err error)
}

// Options tune the hashing.
type Options struct {
	// Workers is how many blocks are hashed at once; 0 means GOMAXPROCS
	// (the cores the process may use).
	Workers int
}

// workers is the number of goroutines hashing blocks.
func (o Options) workers() int {
	if o.Workers > 0 {
		return o.Workers
	}
	return runtime.GOMAXPROCS(0)
}

// Stats count what hashing blocks cost.
type Stats struct {
	// BlocksRead were read and hashed (or found all zeros).
	BlocksRead int64 `json:"blocksRead"`
	// BytesRead is their length.
	BytesRead int64 `json:"bytesRead"`
	// BlocksUnread lay wholly in holes: ZeroLeaf, nothing read.
	BlocksUnread int64 `json:"blocksUnread"`
}

// Compute is the tree of the first size bytes of r, its blocks hashed on
// opts.Workers goroutines (holes unread when r is a DataMapper). Its
// leaves take 32 bytes per MiB of size; Walk hands them out instead.
func Compute(ctx context.Context, r io.ReaderAt, size int64, opts Options) (*Tree, Stats, error) {
	if size < 0 {
		return nil, Stats{}, fmt.Errorf("size %d is negative", size)
	}
	t := &Tree{Size: size, Leaves: make([]Leaf, 0, NumLeaves(size))}
	st, err := Walk(ctx, r, size, opts, func(_ int64, l Leaf) error {
		t.Leaves = append(t.Leaves, l)
		return nil
	})
	if err != nil {
		return nil, st, err
	}
	return t, st, nil
}

// Walk hashes the blocks of the first size bytes of r on opts.Workers
// goroutines (holes unread when r is a DataMapper) and calls emit with
// each leaf, in order, from the calling goroutine. Memory is a block per
// worker and a bounded window of leaves, whatever the size. An error of
// emit stops the walk and is returned.
func Walk(ctx context.Context, r io.ReaderAt, size int64, opts Options, emit func(i int64, l Leaf) error) (Stats, error) {
	if size < 0 {
		return Stats{}, fmt.Errorf("size %d is negative", size)
	}
	return hashBlocks(ctx, r, size, opts.workers(), []blockRun{{0, NumLeaves(size)}}, emit)
}

// Update re-hashes, from image, the blocks of t that overlap ranges (in
// any order; they may overlap), on opts.Workers goroutines, holes unread
// when image is a DataMapper: a conversion that wrote those ranges gets
// the tree of the converted image without reading the rest of it. It
// returns what it read and the blocks it re-hashed. A range outside the
// tree's bytes is an error, and then t is unchanged.
func (t *Tree) Update(ctx context.Context, image io.ReaderAt, ranges []Range, opts Options) (UpdateStats, error) {
	if err := t.Check(); err != nil {
		return UpdateStats{}, err
	}
	runs, err := blockRuns(ranges, t.Size)
	if err != nil {
		return UpdateStats{}, err
	}
	leaves := slices.Clone(t.Leaves)
	var us UpdateStats
	st, err := hashBlocks(ctx, image, t.Size, opts.workers(), runs, func(i int64, l Leaf) error {
		leaves[i] = l
		us.Blocks++
		us.Bytes += BlockLen(i, t.Size)
		return nil
	})
	us.Stats = st
	if err != nil {
		return us, err
	}
	t.Leaves = leaves
	return us, nil
}

// UpdateStats says what Update re-hashed.
type UpdateStats struct {
	Stats
	// Blocks re-hashed (read, or holes).
	Blocks int64 `json:"blocks"`
	// Bytes is their length.
	Bytes int64 `json:"bytes"`
}

// blockRun is the blocks [first, end).
type blockRun struct{ first, end int64 }

// blockRuns are the runs of blocks that overlap ranges, in order, merged.
func blockRuns(ranges []Range, size int64) ([]blockRun, error) {
	var runs []blockRun
	for _, r := range ranges {
		if r.Offset < 0 || r.Length <= 0 || r.Offset >= size || r.Length > size-r.Offset {
			return nil, fmt.Errorf("range [%d, +%d) is not inside the image's %d bytes", r.Offset, r.Length, size)
		}
		runs = append(runs, blockRun{r.Offset / BlockSize, (r.End()-1)/BlockSize + 1})
	}
	slices.SortFunc(runs, func(a, b blockRun) int { return compareInt64(a.first, b.first) })
	merged := runs[:0]
	for _, r := range runs {
		if n := len(merged); n > 0 && r.first <= merged[n-1].end {
			merged[n-1].end = max(merged[n-1].end, r.end)
			continue
		}
		merged = append(merged, r)
	}
	return merged, nil
}

func compareInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Jobs: a worker reads up to batchBlocks blocks one after the other (so
// that each worker reads sequentially); at most window jobs are
// outstanding between the producer and the in-order emitter.
const (
	batchBlocks = 8
	window      = 256
)

// job is a run of blocks to hash: read, or a hole (zero).
type job struct {
	seq, first, count int64
	zero              bool
}

// result is a job done: the leaves of a read job (count of them), or a hole.
type result struct {
	job
	leaves [batchBlocks]Leaf
}

// walk is one run of hashBlocks: a producer hands out jobs in order, a
// token taken for each; workers read and hash them; the caller's
// goroutine emits the leaves in order and gives the tokens back.
type walk struct {
	ctx     context.Context
	cancel  context.CancelFunc
	once    sync.Once
	err     error
	r       io.ReaderAt
	size    int64
	tokens  chan struct{}
	jobs    chan job
	results chan result
	seq     int64
}

// hashBlocks hashes the blocks of runs (in order, not overlapping) of
// the first size bytes of r on workers goroutines and calls emit with
// each leaf in block order. Blocks wholly in a hole of a DataMapper are
// ZeroLeaf, unread.
func hashBlocks(ctx context.Context, r io.ReaderAt, size int64, workers int, runs []blockRun, emit func(int64, Leaf) error) (Stats, error) {
	w := &walk{r: r, size: size, tokens: make(chan struct{}, window), jobs: make(chan job), results: make(chan result, window)}
	w.ctx, w.cancel = context.WithCancel(ctx)
	defer w.cancel()
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(w.jobs)
		if err := w.produce(runs); err != nil {
			w.fail(err)
		}
	})
	for range max(workers, 1) {
		wg.Go(w.work)
	}
	go func() {
		wg.Wait()
		close(w.results)
	}()
	st := w.emitInOrder(emit)
	if w.err == nil && w.ctx.Err() != nil {
		w.err = w.ctx.Err()
	}
	return st, w.err
}

// fail records the first error and stops the walk.
func (w *walk) fail(err error) {
	w.once.Do(func() {
		w.err = err
		w.cancel()
	})
}

// work reads and hashes jobs until there are none (after a failure, it
// only passes them on).
func (w *walk) work() {
	buf := make([]byte, BlockSize)
	for j := range w.jobs {
		res := result{job: j}
		if w.ctx.Err() == nil {
			if err := readJob(w.r, w.size, j, buf, &res.leaves); err != nil {
				w.fail(err)
			}
		}
		w.results <- res // a token is held: results has room
	}
}

// emitInOrder emits the leaves of the jobs in their order, giving back
// their tokens, until every job is done; after a failure it only drains.
func (w *walk) emitInOrder(emit func(int64, Leaf) error) Stats {
	var st Stats
	pending := map[int64]result{}
	next := int64(0)
	for res := range w.results {
		pending[res.seq] = res
		for p, ok := pending[next]; ok; p, ok = pending[next] {
			delete(pending, next)
			next++
			<-w.tokens
			if w.ctx.Err() != nil {
				continue
			}
			for k := range p.count {
				i := p.first + k
				l := ZeroLeaf(int(BlockLen(i, w.size)))
				if !p.zero {
					l = p.leaves[k]
					st.BlocksRead++
					st.BytesRead += BlockLen(i, w.size)
				} else {
					st.BlocksUnread++
				}
				if err := emit(i, l); err != nil {
					w.fail(err)
					break
				}
			}
		}
	}
	return st
}

// readJob reads and hashes a job's blocks into leaves.
func readJob(r io.ReaderAt, size int64, j job, buf []byte, leaves *[batchBlocks]Leaf) error {
	for k := range j.count {
		i := j.first + k
		b := buf[:BlockLen(i, size)]
		n, err := r.ReadAt(b, i*BlockSize)
		if n == len(b) {
			err = nil
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("reading block %d (byte %d): %w", i, i*BlockSize, err)
		}
		leaves[k] = hashBlock(b)
	}
	return nil
}

// send hands out the next job, once a token is taken: a hole goes
// straight to the results, blocks to read to the workers.
func (w *walk) send(first, count int64, zero bool) error {
	select {
	case w.tokens <- struct{}{}:
	case <-w.ctx.Done():
		return w.ctx.Err()
	}
	j := job{seq: w.seq, first: first, count: count, zero: zero}
	w.seq++
	if zero {
		w.results <- result{job: j} // a token is held: results has room
		return nil
	}
	select {
	case w.jobs <- j:
		return nil
	case <-w.ctx.Done():
		return w.ctx.Err()
	}
}

// sendRead hands out the blocks [first, end) to read, in batches.
func (w *walk) sendRead(first, end int64) error {
	for i := first; i < end; {
		n := min(batchBlocks, end-i)
		if err := w.send(i, n, false); err != nil {
			return err
		}
		i += n
	}
	return nil
}

// produce hands out the jobs of runs in order: without a DataMapper,
// every block is read; with one, the blocks wholly in its holes are
// holes, those that meet its data are read.
func (w *walk) produce(runs []blockRun) error {
	dm, _ := w.r.(DataMapper)
	// [data, hole) is the data run known at or after the block looked at.
	data, hole := int64(0), int64(-1)
	for _, run := range runs {
		if dm == nil {
			if err := w.sendRead(run.first, run.end); err != nil {
				return err
			}
			continue
		}
		for i := run.first; i < run.end; {
			if off := i * BlockSize; off >= hole {
				var err error
				if data, hole, err = nextData(dm, off, w.size); err != nil {
					return err
				}
			}
			// Blocks wholly before data are holes; those that meet
			// [data, hole) are read.
			zeroUntil := run.end
			if data < w.size {
				zeroUntil = min(data/BlockSize, run.end)
			}
			if zeroUntil > i {
				if err := w.send(i, zeroUntil-i, true); err != nil {
					return err
				}
				i = zeroUntil
				continue
			}
			readUntil := min(run.end, NumLeaves(hole))
			if err := w.sendRead(i, readUntil); err != nil {
				return err
			}
			i = readUntil
		}
	}
	return nil
}

// nextData asks a DataMapper for the next data run and checks its answer.
func nextData(dm DataMapper, off, size int64) (int64, int64, error) {
	data, hole, err := dm.NextData(off, size)
	if err != nil {
		return 0, 0, fmt.Errorf("finding data after byte %d: %w", off, err)
	}
	if data < off || data > size || hole < data || hole > size || (data < size && hole == data) {
		return 0, 0, fmt.Errorf("finding data after byte %d: the data map answered [%d, %d) of %d bytes", off, data, hole, size)
	}
	return data, hole, nil
}
