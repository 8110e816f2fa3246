package transfer

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"platform.example/vm-migration/pkg/blocktree"
	"platform.example/vm-migration/pkg/transfer/wire"
)

// scratchSize bounds the buffer that reads the image back to hash the
// pieces a previous round wrote.
const scratchSize = 1 << 20

// Run copies the planned disks, at most opts.Parallel at once, reporting
// progress to opts.ProgressSinks. A failed disk does not stop the others:
// what they copy is checkpointed for the next attempt. The result lists
// every disk in plan order; its Error and Reason are the first failure's.
func Run(ctx context.Context, plans []DiskPlan, opts Options) *wire.Result {
	opts = opts.withDefaults()
	trackers := make([]*tracker, len(plans))
	for i, p := range plans {
		trackers[i] = newTracker(p.Spec.Key, p.Spec.CapacityBytes)
	}
	rep := &reporter{trackers: trackers, sinks: opts.ProgressSinks, interval: opts.ProgressInterval, logf: opts.Logf, now: timeNow}
	stop := make(chan struct{})
	repDone := make(chan struct{})
	go func() {
		defer close(repDone)
		rep.run(ctx, stop)
	}()

	results := make([]wire.DiskResult, len(plans))
	errs := make([]error, len(plans))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(opts.Parallel, len(plans)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// One set of buffers per worker, reused disk after disk.
			bufs := make([][]byte, opts.buffersPerDisk())
			for i := range bufs {
				bufs[i] = alignedBuffer(int(opts.pieceSize()))
			}
			scratch := alignedBuffer(min(int(opts.pieceSize()), scratchSize))
			for i := range next {
				c := &diskCopy{opts: opts, plan: &plans[i], t: trackers[i], bufs: bufs, scratch: scratch}
				results[i], errs[i] = c.run(ctx)
			}
		}()
	}
	for i := range plans {
		next <- i
	}
	close(next)
	wg.Wait()
	close(stop)
	<-repDone

	if !slices.ContainsFunc(errs, func(err error) bool { return err != nil }) {
		errs = append(errs, removeCompletionRecords(plans))
	}
	res := &wire.Result{Kind: wire.KindResult, Succeeded: true, Scheme: blocktree.Scheme, Disks: results}
	for _, err := range errs {
		if err != nil {
			res.Succeeded = false
			res.Error = err.Error()
			res.Reason = Reason(err)
			break
		}
	}
	return res
}

// removeCompletionRecords removes the disks' completion records once
// every disk is complete: nothing but the image may stay in a staging
// volume (CDI clones every file in its root). Until then they stay, so
// that the next run keeps the disks that are done.
func removeCompletionRecords(plans []DiskPlan) error {
	for _, p := range plans {
		if p.Checkpoint == "" {
			continue
		}
		if err := removeCheckpoint(p.Checkpoint); err != nil {
			return fmt.Errorf("%w: disk %d: %w", ErrDestination, p.Spec.Key, err)
		}
	}
	return nil
}
