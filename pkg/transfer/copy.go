package transfer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"platform.example/vm-migration/pkg/blocktree"

	"platform.example/vm-migration/pkg/transfer/wire"
)

// Defaults and bounds of Options.
const (
	// DefaultChunkSize is the unit of the resume promise: the most one
	// stream has requested from the source and not yet made durable, so
	// the most a crash makes it fetch again. Each request reads half of it.
	DefaultChunkSize = 8 << 20
	// DefaultStreams is how many Range connections read one disk.
	DefaultStreams = 1
	// MaxStreams bounds Options.Streams.
	MaxStreams = 16
	// DefaultParallel is how many disks are copied at once.
	DefaultParallel = wire.DefaultParallelDisks
	// DefaultRetries is how many times a failed read is retried in-process
	// without progress in between.
	DefaultRetries = 3
	// DefaultProgressInterval is the time between progress snapshots.
	DefaultProgressInterval = 5 * time.Second
)

// piecesPerChunk is how many requests one chunk is read with: a stream
// reads the next piece while the one before is written and synced.
const piecesPerChunk = 2

// Options tune a run. The zero value of a field means its default.
type Options struct {
	// ChunkSize in bytes, rounded up to a multiple of 128 KiB. A stream
	// never has more than one chunk requested and not yet durable.
	ChunkSize int
	// Streams is how many Range connections read each disk at once, at
	// most MaxStreams. Memory is Parallel x (2 x Streams + 1) half-chunks.
	Streams int
	// Parallel is how many disks are copied at once.
	Parallel int
	// Retries of a failed source read before the disk fails; negative means none.
	Retries int
	// RetryDelay is the first wait before a retry; it doubles each time.
	RetryDelay time.Duration
	// BufferedIO turns direct I/O off: every write then goes through the
	// page cache (direct I/O is used only where the file system allows it).
	BufferedIO bool
	// ProgressInterval is the time between progress snapshots.
	ProgressInterval time.Duration
	// ProgressSinks receive the snapshots.
	ProgressSinks []ProgressSink
	// RefreshSession, when set, renews the vSphere session after the
	// datastore answered 401 (the session expired or was ended): the read
	// is then retried, within Retries.
	RefreshSession func(ctx context.Context) error
	// Logf reports what a person may want to know (retries, restarts).
	Logf func(format string, args ...any)
	// HashWorkers is how many goroutines hash one disk's whole blocks at
	// once; 0 means GOMAXPROCS.
	HashWorkers int
}

// withDefaults fills in zero fields.
func (o Options) withDefaults() Options {
	if o.ChunkSize <= 0 {
		o.ChunkSize = DefaultChunkSize
	}
	unit := piecesPerChunk * zeroBlock
	o.ChunkSize = (o.ChunkSize + unit - 1) / unit * unit
	o.Streams = min(max(o.Streams, DefaultStreams), MaxStreams)
	if o.Parallel <= 0 {
		o.Parallel = DefaultParallel
	}
	if o.Retries == 0 {
		o.Retries = DefaultRetries
	}
	if o.Retries < 0 {
		o.Retries = 0
	}
	if o.RetryDelay <= 0 {
		o.RetryDelay = time.Second
	}
	if o.ProgressInterval <= 0 {
		o.ProgressInterval = DefaultProgressInterval
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return o
}

// pieceSize is the length of one request.
func (o Options) pieceSize() int64 { return int64(o.ChunkSize / piecesPerChunk) }

// buffersPerDisk is how many pieces one disk holds in memory: two per
// stream (one arriving, one being written) and one the hasher may lag by.
func (o Options) buffersPerDisk() int { return piecesPerChunk*o.Streams + 1 }

// sourceError marks a failure of the source (the network, the server):
// worth a retry, unlike a failure of the destination.
type sourceError struct{ err error }

func (e *sourceError) Error() string { return e.err.Error() }
func (e *sourceError) Unwrap() error { return e.err }

// retriable says a retry of the read may succeed.
func retriable(err error) bool {
	var se *sourceError
	if !errors.As(err, &se) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var st *StatusError
	if errors.As(err, &st) {
		return st.Temporary()
	}
	return true
}

// unauthorized says the datastore refused the session.
func unauthorized(err error) bool {
	var st *StatusError
	return errors.As(err, &st) && st.Code == http.StatusUnauthorized
}

// diskCopy copies one disk.
type diskCopy struct {
	opts Options
	plan *DiskPlan
	t    *tracker
	// bufs hold the pieces in memory; scratch reads back the image.
	bufs    [][]byte
	scratch []byte
	dst     *destination
	layout  pieceLayout
	ledger  ledger
	// kept is the completion record of an image an earlier run completed,
	// which still matches it: nothing is copied.
	kept *checkpoint
	// tree is where the image's tree file goes ("" for none); leaves is
	// the partial tree file the builder writes the leaves to.
	tree   string
	leaves *leafFile
}

// run copies the disk and returns its result: the image is complete,
// synced, and its completion record written (when it has a checkpoint).
func (c *diskCopy) run(ctx context.Context) (wire.DiskResult, error) {
	start := time.Now()
	spec := c.plan.Spec
	res := wire.DiskResult{Key: spec.Key, AllocatedOnly: c.plan.Areas != nil, AllocatedBytes: c.plan.AllocatedBytes, FullCopyReason: c.plan.FullCopyReason}
	done := func(err error) (wire.DiskResult, error) {
		res.Bytes = c.ledger.hashedBytes()
		res.BytesRead = c.ledger.st.readBefore + c.t.read.Load()
		res.DurationSeconds = time.Since(start).Seconds()
		if err != nil {
			res.Error = err.Error()
			c.t.state.Store(wire.StateFailed)
		}
		return res, err
	}
	if err := c.prepare(ctx); err != nil {
		return done(err)
	}
	defer func() {
		if c.dst != nil {
			_ = c.dst.close()
		}
		if c.leaves != nil {
			_ = c.leaves.close()
		}
	}()
	res.ResumedFrom = c.ledger.hashedBytes()
	if k := c.kept; k != nil {
		res.SHA256, res.Kept = k.Root, true
		res.AllocatedOnly, res.AllocatedBytes, res.FullCopyReason = allocatedOnly(k.Map), k.AllocatedBytes, k.FullCopyReason
		c.ledger.st.readBefore = k.BytesRead
		c.t.state.Store(wire.StateDone)
		return done(nil)
	}
	c.t.state.Store(wire.StateCopying)
	if err := c.copyWithRetries(ctx); err != nil {
		return done(fmt.Errorf("disk %d: %w", spec.Key, err))
	}
	sum, err := c.complete()
	if err != nil {
		return done(fmt.Errorf("disk %d: %w", spec.Key, err))
	}
	res.SHA256 = sum
	c.t.state.Store(wire.StateDone)
	return done(nil)
}

// complete finishes a copied image: its root, the image flushed, its
// completion record (when it has a checkpoint), then its tree file. The
// record comes before the tree file: a crash between them leaves a
// record, and the next run keeps the image and writes its tree file
// again (the other way round, it would find a checkpoint whose partial
// tree file is gone, and copy it all again).
func (c *diskCopy) complete() (string, error) {
	sum, err := c.ledger.st.b.Root()
	if err != nil {
		return "", err
	}
	dst := c.dst
	c.dst = nil
	if err := dst.finish(); err != nil {
		return "", err
	}
	if c.plan.Checkpoint != "" {
		if err := saveCheckpoint(c.plan.Checkpoint, completionRecord(c.plan, sum, c.ledger.st.readBefore+c.t.read.Load())); err != nil {
			return "", fmt.Errorf("recording the complete image: %w", err)
		}
	}
	if c.leaves != nil {
		if err := c.leaves.finish(sum); err != nil {
			return "", err
		}
	}
	return sum, nil
}

// copyWithRetries runs rounds until the whole image is hashed, retrying
// failed reads (after renewing the session on a 401) while they make
// progress or the retries last.
func (c *diskCopy) copyWithRetries(ctx context.Context) error {
	key := c.plan.Spec.Key
	failures := 0
	for c.ledger.hashedBytes() < c.plan.Spec.CapacityBytes {
		before := c.ledger.doneBytes()
		err := c.round(ctx)
		if err == nil && c.ledger.hashedBytes() < c.plan.Spec.CapacityBytes {
			err = errRoundEnded
		}
		if err == nil {
			continue
		}
		if c.ledger.doneBytes() > before {
			failures = 0
		}
		// A 401 is worth a retry once the session is renewed.
		renew := unauthorized(err) && c.opts.RefreshSession != nil
		if ctx.Err() != nil || !(renew || retriable(err)) || failures >= c.opts.Retries {
			return err
		}
		failures++
		at := c.ledger.hashedBytes()
		if renew {
			c.opts.Logf("disk %d: %v; renewing the session, retry %d of %d from byte %d", key, err, failures, c.opts.Retries, at)
			if rerr := c.opts.RefreshSession(ctx); rerr != nil {
				return fmt.Errorf("%w (renewing the session: %v)", err, rerr)
			}
			continue
		}
		delay := c.opts.RetryDelay << (failures - 1)
		c.opts.Logf("disk %d: %v; retry %d of %d from byte %d in %s", key, err, failures, c.opts.Retries, at, delay)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
	}
	return nil
}

// prepare opens the destination and finds where to start: a complete
// image kept, a checkpoint that holds, or the beginning.
func (c *diskCopy) prepare(ctx context.Context) error {
	spec := c.plan.Spec
	var err error
	if c.dst, err = openDestination(spec.Destination, spec.CapacityBytes, !c.opts.BufferedIO); err != nil {
		return fmt.Errorf("disk %d: %w", spec.Key, err)
	}
	if c.plan.Checkpoint == "" {
		c.plan.Checkpoint = defaultCheckpoint(spec, c.dst.block)
	}
	c.layout = newPieceLayout(c.plan, c.opts.pieceSize())
	c.tree = treePath(spec, c.dst.block)
	if c.plan.Checkpoint != "" {
		c.resume(ctx)
	}
	if c.ledger.st.b == nil && c.kept == nil {
		if err = c.start(); err != nil {
			_ = c.dst.close()
			c.dst = nil
			return fmt.Errorf("disk %d: %w", spec.Key, err)
		}
	}
	st := &c.ledger.st
	err = c.dst.reset(st.hashed, st.writtenRanges(), spec.CapacityBytes)
	if errors.Is(err, errNoPunchHole) && len(st.written) > 0 {
		c.opts.Logf("disk %d: fetching again the %d pieces past byte %d: %v", spec.Key, len(st.written), st.hashed, err)
		st.written = map[int64]int64{}
		err = c.dst.reset(st.hashed, nil, spec.CapacityBytes)
	}
	if err == nil {
		err = c.zeroHoles()
	}
	if err != nil {
		_ = c.dst.close()
		c.dst = nil
		return fmt.Errorf("disk %d: %w", spec.Key, err)
	}
	c.t.done.Store(st.hashed)
	c.t.resumedFrom.Store(st.hashed)
	return nil
}

// newBuilder is the copy's tree builder, anew (st nil) or resumed, whose
// leaves go to the partial tree file.
func (c *diskCopy) newBuilder(st *blocktree.BuilderState) (*blocktree.Builder, error) {
	sink := func(i int64, l blocktree.Leaf) error {
		if c.leaves == nil {
			return nil
		}
		return c.leaves.put(i, l)
	}
	opts := blocktree.Options{Workers: c.opts.HashWorkers}
	if st == nil {
		return blocktree.NewBuilder(c.plan.Spec.CapacityBytes, opts, sink), nil
	}
	return blocktree.ResumeBuilder(c.plan.Spec.CapacityBytes, *st, opts, sink)
}

// start sets the copy up from the first byte: a new builder and a new
// partial tree file. A tree file of an earlier image goes: it never sits
// beside an image that is being written.
func (c *diskCopy) start() error {
	b, err := c.newBuilder(nil)
	if err != nil {
		return err
	}
	tree, _ := b.State()
	c.ledger.st = copyState{b: b, tree: tree, written: map[int64]int64{}, readBefore: c.ledger.st.readBefore}
	if c.tree == "" {
		return nil
	}
	if err := os.Remove(c.tree); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: removing the tree file of an earlier image: %v", ErrDestination, err)
	}
	c.leaves, err = createLeafFile(c.tree, c.plan.Spec.CapacityBytes)
	return err
}

// resume loads the checkpoint into the ledger when it holds.
func (c *diskCopy) resume(ctx context.Context) {
	key := c.plan.Spec.Key
	cp, err := loadCheckpoint(c.plan.Checkpoint)
	switch {
	case err != nil:
		c.opts.Logf("disk %d: starting over: %v", key, err)
		return
	case cp == nil:
		return
	case cp.Complete:
		c.keepComplete(ctx, cp)
		return
	}
	st, lf, why := resumeFrom(cp, c.plan, c.layout, c.dst, c.tree, c.newBuilder)
	if st == nil {
		c.opts.Logf("disk %d: starting over: %s", key, why)
		return
	}
	if why != "" {
		c.opts.Logf("disk %d: %s", key, why)
	}
	if c.tree != "" {
		if err := os.Remove(c.tree); err != nil && !errors.Is(err, os.ErrNotExist) {
			lf.discard()
			c.opts.Logf("disk %d: starting over: removing the tree file of an earlier image: %v", key, err)
			return
		}
	}
	c.ledger.st, c.leaves = *st, lf
	c.opts.Logf("disk %d: resuming at byte %d of %d (%d pieces past it already written)", key, st.hashed, c.plan.Spec.CapacityBytes, len(st.written))
}

// keepComplete keeps the image an earlier run completed when its tree,
// computed again, still has its completion record's root (the tree file
// is then written again), and otherwise lets the copy start over.
func (c *diskCopy) keepComplete(ctx context.Context, cp *checkpoint) {
	key := c.plan.Spec.Key
	root, why := completeImage(ctx, cp, c.plan.Source, c.plan.Spec.CapacityBytes, c.dst, c.tree)
	if root == "" {
		c.opts.Logf("disk %d: starting over: %s", key, why)
		return
	}
	c.kept = cp
	c.ledger.st.hashed = c.plan.Spec.CapacityBytes
	c.opts.Logf("disk %d: complete from an earlier run, and the image's tree root is still %s: nothing to copy", key, root)
}

// zeroHoles makes the pieces of a block device's image that hold no area
// (past the resume offset) read as zeros, before anything is copied:
// nothing writes them, and the device may hold old data there (the
// writer zeroes the rest of a piece it writes). A file's holes are holes
// already (reset). With a checkpoint, the zeros are synced before one
// names bytes past them.
func (c *diskCopy) zeroHoles() error {
	if !c.dst.block || c.kept != nil || c.plan.Areas == nil {
		return nil
	}
	for _, h := range c.layout.emptyPieces(c.ledger.st.hashed) {
		if err := c.dst.zero(h.Start, h.End-h.Start); err != nil {
			return err
		}
	}
	if c.plan.Checkpoint == "" {
		return nil
	}
	return c.dst.sync()
}
