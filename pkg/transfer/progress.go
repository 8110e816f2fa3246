package transfer

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"platform.example/vm-migration/pkg/transfer/wire"
)

// ProgressSink receives progress snapshots. A sink's error is reported and
// does not stop the transfer.
type ProgressSink interface {
	// Report delivers one snapshot.
	Report(ctx context.Context, p wire.Progress) error
}

// ProgressSinkFunc adapts a function to ProgressSink.
type ProgressSinkFunc func(ctx context.Context, p wire.Progress) error

// Report calls f.
func (f ProgressSinkFunc) Report(ctx context.Context, p wire.Progress) error { return f(ctx, p) }

// JSONLinesSink writes each snapshot as one JSON line to W (stdout).
type JSONLinesSink struct {
	// W receives the lines.
	W  io.Writer
	mu sync.Mutex
}

// Report writes one line.
func (s *JSONLinesSink) Report(_ context.Context, p wire.Progress) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return writeJSONLine(s.W, p)
}

// FileSink atomically rewrites Path with the latest snapshot.
type FileSink struct {
	// Path of the progress file.
	Path string
}

// Report replaces the file.
func (s FileSink) Report(_ context.Context, p wire.Progress) error {
	data, err := json.Marshal(p)
	if err != nil {
		return err
	}
	if err := WriteFileAtomic(s.Path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing progress file: %w", err)
	}
	return nil
}

// writeJSONLine marshals v as one line on w, in a single write.
func writeJSONLine(w io.Writer, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(data, '\n'))
	return err
}

// timeNow is the reporter's clock.
var timeNow = time.Now

// tracker is one disk's live counters, shared by its copy and the reporter.
type tracker struct {
	key         int32
	total       int64
	done        atomic.Int64
	resumedFrom atomic.Int64
	// read counts the bytes read from the source.
	read  atomic.Int64
	state atomic.Value // string
}

// newTracker starts a disk in StateWaiting.
func newTracker(key int32, total int64) *tracker {
	t := &tracker{key: key, total: total}
	t.state.Store(wire.StateWaiting)
	return t
}

// reporter snapshots the trackers at a bounded rate and hands the
// snapshots to the sinks.
type reporter struct {
	trackers []*tracker
	sinks    []ProgressSink
	interval time.Duration
	logf     func(format string, args ...any)
	now      func() time.Time

	prevTime time.Time
	prevDone []int64
}

// snapshot computes a Progress, rates measured since the previous one.
func (r *reporter) snapshot() wire.Progress {
	now := r.now()
	elapsed := now.Sub(r.prevTime).Seconds()
	p := wire.Progress{Kind: wire.KindProgress, Time: now.UTC(), Disks: make([]wire.DiskProgress, len(r.trackers))}
	for i, t := range r.trackers {
		done := t.done.Load()
		d := wire.DiskProgress{
			Key:         t.key,
			State:       t.state.Load().(string),
			BytesDone:   done,
			TotalBytes:  t.total,
			ResumedFrom: t.resumedFrom.Load(),
		}
		if elapsed > 0 && done >= r.prevDone[i] {
			d.RateBytesPerSecond = int64(float64(done-r.prevDone[i]) / elapsed)
		}
		if d.RateBytesPerSecond > 0 && d.State == wire.StateCopying {
			eta := (t.total - done) / d.RateBytesPerSecond
			d.ETASeconds = &eta
		}
		r.prevDone[i] = done
		p.Disks[i] = d
	}
	r.prevTime = now
	return p
}

// emit hands one snapshot to every sink.
func (r *reporter) emit(ctx context.Context) {
	p := r.snapshot()
	for _, s := range r.sinks {
		if err := s.Report(ctx, p); err != nil {
			r.logf("progress: %v", err)
		}
	}
}

// run emits a snapshot every interval until stop is closed, then a last one.
func (r *reporter) run(ctx context.Context, stop <-chan struct{}) {
	r.prevTime = r.now()
	r.prevDone = make([]int64, len(r.trackers))
	for i, t := range r.trackers {
		r.prevDone[i] = t.done.Load()
	}
	if len(r.sinks) == 0 {
		<-stop
		return
	}
	tick := time.NewTicker(r.interval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			r.emit(ctx)
		case <-stop:
			// The last snapshot goes out even when ctx is cancelled: it says where the run stopped.
			r.emit(context.WithoutCancel(ctx))
			return
		}
	}
}
