package transfer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"time"

	"platform.example/vm-migration/pkg/transfer/wire"
)

// Defaults of Options.
const (
	// DefaultChunkSize is the unit of reading, hashing, writing and checkpointing.
	DefaultChunkSize = 4 << 20
	// DefaultBuffers is how many chunks one disk has in flight.
	DefaultBuffers = 4
	// DefaultParallel is how many disks are copied at once.
	DefaultParallel = 2
	// DefaultRetries is how many times a failed read is retried in-process
	// without progress in between.
	DefaultRetries = 3
	// DefaultProgressInterval is the time between progress snapshots.
	DefaultProgressInterval = 5 * time.Second
)

// Options tune a run. The zero value of a field means its default.
type Options struct {
	// ChunkSize in bytes, a multiple of 64 KiB.
	ChunkSize int
	// Buffers per disk: memory is Parallel x Buffers x ChunkSize.
	Buffers int
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
}

// withDefaults fills in zero fields.
func (o Options) withDefaults() Options {
	if o.ChunkSize <= 0 {
		o.ChunkSize = DefaultChunkSize
	}
	o.ChunkSize = (o.ChunkSize + zeroBlock - 1) / zeroBlock * zeroBlock
	if o.Buffers <= 0 {
		o.Buffers = DefaultBuffers
	}
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

// copyState is where one disk's copy stands.
type copyState struct {
	off int64
	h   hash.Hash
}

// diskCopy copies one disk.
type diskCopy struct {
	opts Options
	plan *DiskPlan
	t    *tracker
	bufs [][]byte
	dst  *destination
	st   copyState
}

// run copies the disk and returns its result.
func (c *diskCopy) run(ctx context.Context) (wire.DiskResult, error) {
	start := time.Now()
	spec := c.plan.Spec
	res := wire.DiskResult{Key: spec.Key}
	done := func(err error) (wire.DiskResult, error) {
		res.Bytes = c.st.off
		res.DurationSeconds = time.Since(start).Seconds()
		if err != nil {
			res.Error = err.Error()
			c.t.state.Store(wire.StateFailed)
		}
		return res, err
	}
	if err := c.prepare(); err != nil {
		return done(err)
	}
	defer func() {
		if c.dst != nil {
			_ = c.dst.close()
		}
	}()
	res.ResumedFrom = c.st.off
	c.t.state.Store(wire.StateCopying)
	failures := 0
	for c.st.off < spec.CapacityBytes {
		before := c.st.off
		err := c.stream(ctx)
		if err == nil {
			continue
		}
		if c.st.off > before {
			failures = 0
		}
		// A 401 is worth a retry once the session is renewed.
		renew := unauthorized(err) && c.opts.RefreshSession != nil
		if ctx.Err() != nil || !(renew || retriable(err)) || failures >= c.opts.Retries {
			return done(fmt.Errorf("disk %d: %w", spec.Key, err))
		}
		failures++
		if renew {
			c.opts.Logf("disk %d: %v; renewing the session, retry %d of %d from byte %d", spec.Key, err, failures, c.opts.Retries, c.st.off)
			if rerr := c.opts.RefreshSession(ctx); rerr != nil {
				return done(fmt.Errorf("disk %d: %w (renewing the session: %v)", spec.Key, err, rerr))
			}
			continue
		}
		delay := c.opts.RetryDelay << (failures - 1)
		c.opts.Logf("disk %d: %v; retry %d of %d from byte %d in %s", spec.Key, err, failures, c.opts.Retries, c.st.off, delay)
		select {
		case <-ctx.Done():
			return done(fmt.Errorf("disk %d: %w", spec.Key, ctx.Err()))
		case <-time.After(delay):
		}
	}
	sum := c.st.h.Sum(nil)
	dst := c.dst
	c.dst = nil
	if err := dst.finish(); err != nil {
		return done(fmt.Errorf("disk %d: %w", spec.Key, err))
	}
	if c.plan.Checkpoint != "" {
		if err := removeCheckpoint(c.plan.Checkpoint); err != nil {
			return done(fmt.Errorf("disk %d: %w", spec.Key, err))
		}
	}
	res.SHA256 = hex.EncodeToString(sum)
	c.t.state.Store(wire.StateDone)
	return done(nil)
}

// prepare opens the destination and finds where to start: a checkpoint
// that holds, or the beginning.
func (c *diskCopy) prepare() error {
	spec := c.plan.Spec
	var err error
	if c.dst, err = openDestination(spec.Destination, spec.CapacityBytes, !c.opts.BufferedIO); err != nil {
		return fmt.Errorf("disk %d: %w", spec.Key, err)
	}
	if c.plan.Checkpoint == "" {
		c.plan.Checkpoint = defaultCheckpoint(spec, c.dst.block)
	}
	c.st = copyState{h: sha256.New()}
	if c.plan.Checkpoint != "" {
		cp, err := loadCheckpoint(c.plan.Checkpoint)
		if err != nil {
			c.opts.Logf("disk %d: starting over: %v", spec.Key, err)
		} else if cp != nil {
			h, why := resumeFrom(cp, c.plan.Source, spec.CapacityBytes, c.dst, c.bufs[0])
			if h == nil {
				c.opts.Logf("disk %d: starting over: %s", spec.Key, why)
			} else {
				c.st = copyState{off: cp.Offset, h: h}
				c.opts.Logf("disk %d: resuming at byte %d of %d", spec.Key, cp.Offset, spec.CapacityBytes)
			}
		}
	}
	if err := c.dst.reset(c.st.off, spec.CapacityBytes); err != nil {
		_ = c.dst.close()
		c.dst = nil
		return fmt.Errorf("disk %d: %w", spec.Key, err)
	}
	c.t.done.Store(c.st.off)
	c.t.resumedFrom.Store(c.st.off)
	return nil
}

// filled is a chunk read from the source, or the read's failure.
type filled struct {
	buf []byte
	n   int
	err error
}

// stream copies from the current offset to the end of its extent: one
// range request, read in chunks by a goroutine while this one hashes,
// writes and checkpoints the chunks before. Chunks read before a failure
// (or a cancellation) are still written and checkpointed.
func (c *diskCopy) stream(ctx context.Context) error {
	e, err := c.extentAt(c.st.off)
	if err != nil {
		return err
	}
	from := e.FileOffset + (c.st.off - e.Start)
	to := e.FileOffset + e.Length
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	body, err := e.File.OpenRange(rctx, from, to, e.FileSize)
	if err != nil {
		return &sourceError{err}
	}
	defer body.Close()

	free := make(chan []byte, len(c.bufs))
	for _, b := range c.bufs {
		free <- b
	}
	full := make(chan filled, len(c.bufs))
	go readChunks(rctx, body, to-from, free, full)

	var firstErr error
	for f := range full {
		switch {
		case firstErr != nil:
		case f.err != nil:
			firstErr = &sourceError{f.err}
			cancel()
		default:
			if err := c.consume(f.buf[:f.n]); err != nil {
				firstErr = err
				cancel()
			}
		}
		if f.buf != nil {
			free <- f.buf
		}
	}
	return firstErr
}

// readChunks reads want bytes from body into buffers from free and sends
// them to full, which it closes when done. A short read ends it with an error.
func readChunks(ctx context.Context, body io.Reader, want int64, free chan []byte, full chan<- filled) {
	defer close(full)
	for want > 0 {
		var buf []byte
		select {
		case buf = <-free:
		case <-ctx.Done():
			full <- filled{err: ctx.Err()}
			return
		}
		n := int(min(int64(len(buf)), want))
		if _, err := io.ReadFull(body, buf[:n]); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			full <- filled{buf: buf, err: err}
			return
		}
		want -= int64(n)
		full <- filled{buf: buf, n: n}
	}
	// The body must end here: the exact reader fails on any byte beyond.
	var probe [1]byte
	if _, err := body.Read(probe[:]); err != io.EOF {
		if err == nil {
			err = fmt.Errorf("%w: the body runs past its range", ErrBadResponse)
		}
		full <- filled{err: err}
	}
}

// consume hashes, writes and checkpoints one chunk. The hash and the
// write run side by side: both are a full pass over the chunk.
func (c *diskCopy) consume(b []byte) error {
	before, err := hashState(c.st.h)
	if err != nil {
		return err
	}
	start := c.st.off
	written := make(chan error, 1)
	go func() { written <- c.dst.writeChunk(b, start) }()
	c.st.h.Write(b)
	if err := <-written; err != nil {
		return err
	}
	c.st.off += int64(len(b))
	c.t.done.Store(c.st.off)
	if c.plan.Checkpoint == "" || c.st.off == c.plan.Spec.CapacityBytes {
		return nil
	}
	after, err := hashState(c.st.h)
	if err != nil {
		return err
	}
	return saveCheckpoint(c.plan.Checkpoint, &checkpoint{
		Version:             checkpointVersion,
		Source:              c.plan.Source,
		Capacity:            c.plan.Spec.CapacityBytes,
		Offset:              c.st.off,
		HashState:           after,
		ChunkStart:          start,
		ChunkStartHashState: before,
	})
}

// extentAt is the extent holding image offset off.
func (c *diskCopy) extentAt(off int64) (ExtentPlan, error) {
	for _, e := range c.plan.Extents {
		if off >= e.Start && off < e.Start+e.Length {
			return e, nil
		}
	}
	return ExtentPlan{}, fmt.Errorf("no extent holds image offset %d", off)
}
