package transfer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
)

// fetched is a piece of the image read from the source into buf.
type fetched struct {
	start, end int64
	buf        []byte
	// credit is the stream's, given back once the piece is durable.
	credit chan struct{}
}

// data is the piece's bytes.
func (p fetched) data() []byte { return p.buf[:p.end-p.start] }

// round copies what is left of the disk until the whole image is hashed,
// the context ends or something fails. Streams fetch pieces in image
// order, each over its own connection, with at most one chunk (two
// pieces) requested and not yet durable per stream; one writer writes the
// pieces, syncs the image and then checkpoints them; one hasher hashes
// them in image order and frees their buffers. Whatever was fetched before
// a failure is still written and checkpointed.
func (c *diskCopy) round(ctx context.Context) error {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var once sync.Once
	var firstErr error
	fail := func(err error) {
		once.Do(func() {
			firstErr = err
			cancel()
		})
	}
	readBack := c.ledger.writtenCopy()
	d := &dispatcher{layout: c.layout, next: c.ledger.hashedBytes(), skip: readBack}
	free := make(chan []byte, len(c.bufs))
	for _, b := range c.bufs {
		free <- b
	}
	toWrite := make(chan fetched, len(c.bufs))
	toHash := make(chan fetched, len(c.bufs))
	var streams sync.WaitGroup
	for range c.opts.Streams {
		streams.Go(func() { c.stream(rctx, d, free, toWrite, fail) })
	}
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		if err := c.writeLoop(toWrite, toHash); err != nil {
			fail(err)
		}
	}()
	go func() {
		streams.Wait()
		close(toWrite)
	}()
	if err := c.hashLoop(toHash, free, readBack); err != nil {
		fail(err)
	}
	<-writerDone
	if err := c.saveProgress(); err != nil {
		fail(err)
	}
	if firstErr == nil && ctx.Err() != nil {
		return &sourceError{ctx.Err()}
	}
	return firstErr
}

// stream fetches pieces until none is left, the context ends or a read
// fails. A credit is taken before a piece is requested and given back by
// the writer once it is durable: bytes the server sent that a crash would
// lose are at most piecesPerChunk pieces, whatever the socket buffers hold.
func (c *diskCopy) stream(ctx context.Context, d *dispatcher, free chan []byte, out chan<- fetched, fail func(error)) {
	credit := make(chan struct{}, piecesPerChunk)
	for {
		select {
		case credit <- struct{}{}:
		case <-ctx.Done():
			return
		}
		var buf []byte
		select {
		case buf = <-free:
		case <-ctx.Done():
			return
		}
		start, end, ok := d.take()
		if !ok {
			free <- buf
			return
		}
		if err := c.fetch(ctx, start, end, buf); err != nil {
			free <- buf
			if ctx.Err() == nil {
				fail(err)
			}
			return
		}
		out <- fetched{start: start, end: end, buf: buf, credit: credit}
	}
}

// fetch reads the piece [start, end) of the image into buf: each area
// it holds with one Range request, zeros between them.
func (c *diskCopy) fetch(ctx context.Context, start, end int64, buf []byte) error {
	b := buf[:end-start]
	at := start
	for _, a := range c.layout.areasIn(start, end) {
		clear(b[at-start : a.Start-start])
		if err := c.fetchRange(ctx, a.Start, a.End, b[a.Start-start:a.End-start]); err != nil {
			return err
		}
		at = a.End
	}
	clear(b[at-start:])
	return nil
}

// fetchRange reads [start, end) of the image, inside one extent, into b
// with one Range request, which must hold exactly those bytes.
func (c *diskCopy) fetchRange(ctx context.Context, start, end int64, b []byte) error {
	i := c.layout.extentAt(start)
	if i < 0 {
		return fmt.Errorf("no extent holds image offset %d", start)
	}
	e := c.layout.extents[i]
	from := e.FileOffset + (start - e.Start)
	body, err := e.File.OpenRange(ctx, from, from+(end-start), e.FileSize)
	if err != nil {
		return &sourceError{err}
	}
	defer body.Close()
	n, err := io.ReadFull(body, b)
	c.t.read.Add(int64(n))
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return &sourceError{err}
	}
	// The body must end here: the exact reader fails on any byte beyond,
	// and reading to the end lets the connection be reused.
	var probe [1]byte
	if _, err := body.Read(probe[:]); err != io.EOF {
		if err == nil {
			err = fmt.Errorf("%w: the body runs past its range", ErrBadResponse)
		}
		return &sourceError{err}
	}
	return nil
}

// writeLoop writes the pieces it receives, in batches of what has
// arrived: writes, then one fdatasync of the image, then the checkpoint
// naming them; only then are the streams' credits given back and the
// pieces passed to the hasher. It closes out when done.
func (c *diskCopy) writeLoop(in <-chan fetched, out chan<- fetched) error {
	defer close(out)
	var batch []fetched
	for p := range in {
		batch = append(batch[:0], p)
	more:
		for {
			select {
			case q, ok := <-in:
				if !ok {
					break more
				}
				batch = append(batch, q)
			default:
				break more
			}
		}
		for _, q := range batch {
			if err := c.dst.writeChunk(q.data(), q.start); err != nil {
				return err
			}
		}
		if err := c.makeDurable(batch); err != nil {
			return err
		}
		for _, q := range batch {
			<-q.credit
			out <- q
		}
	}
	return nil
}

// makeDurable syncs the image and records the pieces in the checkpoint:
// the checkpoint never names bytes that a crash of the node could lose.
// Without a checkpoint (no resume) there is nothing to sync for.
func (c *diskCopy) makeDurable(batch []fetched) error {
	if c.plan.Checkpoint != "" {
		if err := c.dst.sync(); err != nil {
			return err
		}
	}
	c.ledger.addWritten(batch)
	return c.saveProgress()
}

// saveProgress writes the ledger's checkpoint, when there is one to keep,
// once the leaves it names are synced in the partial tree file (the
// hasher wrote them before it moved the ledger on).
func (c *diskCopy) saveProgress() error {
	if c.plan.Checkpoint == "" || c.ledger.hashedBytes() == c.plan.Spec.CapacityBytes {
		return nil
	}
	cp := c.ledger.checkpoint(c.plan, c.layout.size, c.t.read.Load())
	if c.leaves != nil {
		if err := c.leaves.sync(cp.Tree.Leaves); err != nil {
			return err
		}
	}
	return saveCheckpoint(c.plan.Checkpoint, cp)
}

// hashLoop hashes the image in order: pieces as they come out of the
// writer (kept aside until their turn), and pieces a previous round left
// written (read back from the image). It returns once the image is hashed
// or in is closed, having freed every buffer it received.
func (c *diskCopy) hashLoop(in <-chan fetched, free chan<- []byte, readBack map[int64]int64) error {
	pending := map[int64]fetched{}
	defer func() {
		for _, p := range pending {
			free <- p.buf
		}
	}()
	for {
		for {
			at := c.ledger.hashedBytes()
			if end, ok := readBack[at]; ok {
				if err := c.hashFromImage(at, end); err != nil {
					return err
				}
				continue
			}
			if end := c.layout.end(at); at < end && !c.layout.hasData(at, end) {
				if err := c.hashHole(at, end); err != nil {
					return err
				}
				continue
			}
			p, ok := pending[at]
			if !ok {
				break
			}
			delete(pending, at)
			err := c.hashPiece(p.start, p.end, p.data())
			free <- p.buf
			if err != nil {
				return err
			}
		}
		if c.ledger.hashedBytes() == c.plan.Spec.CapacityBytes {
			return nil
		}
		p, ok := <-in
		if !ok {
			return nil
		}
		pending[p.start] = p
	}
}

// hashPiece hashes the piece [start, end) and moves the ledger on.
func (c *diskCopy) hashPiece(start, end int64, b []byte) error {
	if err := c.ledger.st.b.Write(b); err != nil {
		return err
	}
	return c.hashed(start, end)
}

// hashed moves the ledger on over [start, end), which the builder has
// just taken in.
func (c *diskCopy) hashed(start, end int64) error {
	tree, err := c.ledger.st.b.State()
	if err != nil {
		return err
	}
	c.ledger.advance(start, end, tree)
	c.t.done.Store(end)
	return nil
}

// hashHole hashes a piece that holds no area, which reads as zeros:
// nothing is read, and its whole blocks are not hashed either (ZeroLeaf).
// Holes are taken a piece at a time, so that checkpoints keep coming.
func (c *diskCopy) hashHole(start, end int64) error {
	if err := c.ledger.st.b.WriteZeros(end - start); err != nil {
		return err
	}
	return c.hashed(start, end)
}

// hashFromImage hashes a piece that is already in the image.
func (c *diskCopy) hashFromImage(start, end int64) error {
	for off := start; off < end; {
		n := min(int64(len(c.scratch)), end-off)
		if err := c.dst.readAt(c.scratch[:n], off); err != nil {
			return err
		}
		if err := c.ledger.st.b.Write(c.scratch[:n]); err != nil {
			return err
		}
		off += n
	}
	return c.hashed(start, end)
}

// errRoundEnded says a round stopped short without a reason: a bug.
var errRoundEnded = errors.New("the copy stopped before the end of the image")
