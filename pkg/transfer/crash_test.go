package transfer_test

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"platform.example/vm-migration/pkg/transfer"
	"platform.example/vm-migration/pkg/transfer/wire"
)

// childEnv makes the test binary run the vm-transfer command instead of
// the tests, so a test can kill a real process.
const childEnv = "VM_TRANSFER_TEST_RUN_COMMAND"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(transfer.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestSIGKILLResendsAtMostOneChunkPerStream runs the command as its own
// process, kills it with SIGKILL at several instants of the copy, and
// restarts it each time. After each kill, the bytes the server sent in
// that run minus the bytes the checkpoint gained are what the next run
// fetches again: at most one chunk per stream. The last run completes and
// its SHA-256 and image are the source's. A run's bytes are counted once
// the proxy has closed the run's connections: it may write to them after
// the process is gone, and those bytes are the run's, not the next one's.
func TestSIGKILLResendsAtMostOneChunkPerStream(t *testing.T) {
	const chunk = 1 * mib
	// Served bytes, counted from each run's start, at which it is killed.
	killAt := []int64{1*mib + 12345, 3*mib + 700<<10, 2*mib + 1, 4*mib + 256<<10, 3 * mib, 1*mib + 999<<10}
	for _, streams := range []int{1, 4} {
		t.Run(fmt.Sprintf("streams=%d", streams), func(t *testing.T) {
			e := newSim(t)
			data, d := e.stagedDisk(t, "kill", testSize, 21)
			c := newCLI(t, e, e.jobSpec(d), testPassword, e.creds.Thumbprint)
			checkpoint := filepath.Join(filepath.Dir(d.Destination), ".disk.img.checkpoint")
			// Slow each connection down (about 16 MiB/s) so the kills land mid-copy.
			e.setFaults(faults{delay: 2 * time.Millisecond})
			args := []string{"--streams", fmt.Sprint(streams), "--chunk-mib", fmt.Sprint(chunk / mib), "--retries", "0"}

			var durable, totalResent int64
			for i, at := range killAt {
				mark, before := e.connMark(), e.served.Load()
				killed := c.runAndKill(t, args, func() bool { return e.served.Load()-before >= at })
				require.True(t, killed, "run %d ended before the kill", i+1)
				e.waitConnsClosed(t, mark)
				served := e.served.Load() - before
				now, err := transfer.CheckpointedBytes(checkpoint)
				require.NoError(t, err)
				resent := served - (now - durable)
				t.Logf("kill %d at %d bytes served: %d sent in the run, checkpoint %d -> %d, re-sent %d (limit %d)",
					i+1, at, served, durable, now, resent, int64(streams)*chunk)
				require.GreaterOrEqual(t, now, durable, "the checkpoint went backwards")
				require.LessOrEqual(t, resent, int64(streams)*chunk, "more than one chunk per stream sent again")
				durable, totalResent = now, totalResent+resent
			}

			e.setFaults(faults{})
			before := e.served.Load()
			res := c.finish(t, e, args)
			require.Equal(t, treeRoot(data), res.Disks[0].SHA256)
			require.Equal(t, int64(len(data))-durable, e.served.Load()-before, "the last run fetched exactly what was missing")
			require.Equal(t, int64(len(data))+totalResent, e.served.Load(), "bytes served in all")
			t.Logf("%d kills, %d bytes re-sent in all for a %d-byte disk; sha256 %s", len(killAt), totalResent, len(data), res.Disks[0].SHA256)
			checkImage(t, d.Destination, data)
		})
	}
}

// command is the test binary running the command with the CLI's files.
func (c *cli) command(args []string) *exec.Cmd {
	all := append([]string{"--spec", c.spec, "--credentials-dir", c.creds, "--termination-log", c.term,
		"--progress-file", c.progress, "--progress-interval", "100ms"}, args...)
	cmd := exec.Command(os.Args[0], all...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	return cmd
}

// runAndKill starts the command and sends it SIGKILL as soon as when()
// holds; it says whether the process was still running then.
func (c *cli) runAndKill(t *testing.T, args []string, when func() bool) bool {
	t.Helper()
	cmd := c.command(args)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	tick := time.NewTicker(200 * time.Microsecond)
	defer tick.Stop()
	deadline := time.After(time.Minute)
	for !when() {
		select {
		case <-exited:
			t.Logf("stderr: %s", stderr.String())
			return false
		case <-deadline:
			_ = cmd.Process.Kill()
			<-exited
			require.FailNow(t, "the kill condition was never met")
		case <-tick.C:
		}
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	<-exited
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// runProcess runs the command to its end.
func (c *cli) runProcess(t *testing.T, args []string) (int, string, string) {
	t.Helper()
	cmd := c.command(args)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); !ok {
		require.NoError(t, err, "running the command (an exit status is fine)")
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// TestSIGKILLWithSeveralDisks copies three disks, two at a time over two
// streams each, and kills the command with SIGKILL at several instants,
// restarting it each time: disks finish in some runs and not in others.
// Of the bytes a killed run was sent, those a later run is sent again are
// at most one chunk per stream of each disk in flight at the kill; a disk
// a run finished is never sent again. The last run completes and every
// image and SHA-256 is its disk's. Bytes are attributed to runs by the
// spans the proxy served, once each run's connections are closed.
func TestSIGKILLWithSeveralDisks(t *testing.T) {
	const chunk, streams, parallel = 1 * mib, 2, 2
	e := newSim(t)
	sizes := []int{10*mib + 64<<10, 11*mib + 128<<10, 10 * mib}
	var disks []wire.DiskSpec
	var datas [][]byte
	for i, size := range sizes {
		data, d := e.stagedDisk(t, fmt.Sprintf("multi_%d", i), size, uint64(50+i))
		disks, datas = append(disks, d), append(datas, data)
	}
	c := newCLI(t, e, e.jobSpec(disks...), testPassword, e.creds.Thumbprint)
	args := []string{"--streams", fmt.Sprint(streams), "--parallel", fmt.Sprint(parallel),
		"--chunk-mib", fmt.Sprint(chunk / mib), "--retries", "0"}
	// Served bytes, counted from each run's start, at which it is killed;
	// the last killed run not before one of its disks is recorded whole
	// (how far the bytes get depends on what the kills cost each run).
	killAt := []int64{3 * mib, 9*mib + 4321, 5*mib + 100<<10, 7 * mib}
	diskDone := func() bool {
		for _, d := range disks {
			if done, _ := transfer.CheckpointComplete(filepath.Join(filepath.Dir(d.Destination), ".disk.img.checkpoint")); done {
				return true
			}
		}
		return false
	}
	res := killThenFinish(t, e, c, args, killAt, diskDone)
	kept := 0
	for i, d := range disks {
		require.Equal(t, treeRoot(datas[i]), res.Disks[i].SHA256, "disk %d", d.Key)
		checkImage(t, d.Destination, datas[i])
		if res.Disks[i].Kept {
			kept++
		}
	}
	// The kills fall so that disks finish in runs that are then killed.
	require.NotZero(t, kept, "no disk completed by a killed run: the test does not test what it says")

	var files []string
	for i := range disks {
		files = append(files, fmt.Sprintf("multi_%d-flat.vmdk", i))
	}
	total := checkResent(t, e.servedSpans(), files, len(killAt), streams*chunk, parallel*streams*chunk)
	want := int64(sizes[0] + sizes[1] + sizes[2])
	require.Equal(t, want+total, e.served.Load(), "bytes served in all: the disks once, plus what was sent again")
}

// killThenFinish runs the command with the datastore slowed down and
// kills it with SIGKILL once each run was served killAt[i] bytes (the
// last killed run also not before lastAlso holds, when given), then runs
// it to its end and returns its result. The proxy labels what it serves
// with the run's number, from 1; each run's connections are closed before
// the next starts.
func killThenFinish(t *testing.T, e *simEnv, c *cli, args []string, killAt []int64, lastAlso ...func() bool) *wire.Result {
	t.Helper()
	e.setFaults(faults{delay: 2 * time.Millisecond})
	for i, at := range killAt {
		e.run.Store(int64(i + 1))
		mark, before := e.connMark(), e.served.Load()
		killed := c.runAndKill(t, args, func() bool {
			if e.served.Load()-before < at {
				return false
			}
			return i < len(killAt)-1 || len(lastAlso) == 0 || lastAlso[0]()
		})
		require.True(t, killed, "run %d ended before the kill", i+1)
		e.waitConnsClosed(t, mark)
		t.Logf("run %d killed with %d bytes served in it", i+1, e.served.Load()-before)
	}
	e.setFaults(faults{})
	e.run.Store(int64(len(killAt) + 1))
	return c.finish(t, e, args)
}

// finish runs the command to its end, which must succeed, waits until the
// proxy closed the run's connections, and returns its result.
func (c *cli) finish(t *testing.T, e *simEnv, args []string) *wire.Result {
	t.Helper()
	mark := e.connMark()
	code, stdout, stderr := c.runProcess(t, args)
	require.Equal(t, transfer.ExitOK, code, stderr)
	e.waitConnsClosed(t, mark)
	last := strings.Split(strings.TrimSpace(stdout), "\n")
	res, err := wire.ParseResult([]byte(last[len(last)-1]))
	require.NoError(t, err)
	return res
}

// checkResent checks, for each killed run, the bytes of each file it was
// sent that a later run was sent again: at most perFile per file and
// perRun in all. It returns the total sent again.
func checkResent(t *testing.T, spans []servedSpan, files []string, runs int, perFile, perRun int64) int64 {
	t.Helper()
	var total int64
	for run := int64(1); run <= int64(runs); run++ {
		var inRun int64
		for _, file := range files {
			again := overlap(spansOf(spans, file, func(r int64) bool { return r == run }),
				spansOf(spans, file, func(r int64) bool { return r > run }))
			require.LessOrEqual(t, again, perFile,
				"run %d: %d bytes of %s it was sent were sent again later (limit: one chunk per stream, %d)", run, again, file, perFile)
			inRun += again
		}
		t.Logf("run %d: %d bytes it was sent were sent again later (limit %d)", run, inRun, perRun)
		require.LessOrEqual(t, inRun, perRun, "run %d: more than one chunk per stream of each disk in flight sent again", run)
		total += inRun
	}
	return total
}

// TestSIGKILLAllocatedOnly kills an allocated-only copy of a thin disk
// with SIGKILL at several instants: each restart resumes within the bound
// (one chunk per stream sent again), the datastore serves the allocated
// areas plus what was sent again, and the image and SHA-256 are the disk's.
func TestSIGKILLAllocatedOnly(t *testing.T) {
	const chunk, streams = 1 * mib, 2
	e := newSim(t)
	data, _, d := e.thinDisk(t, "thinkill", thinSize, 75, 30)
	allocated := allocatedOf(t, e.plan(t, e.jobSpec(d))[0])
	c := newCLI(t, e, e.jobSpec(d), testPassword, e.creds.Thumbprint)
	args := []string{"--streams", fmt.Sprint(streams), "--chunk-mib", fmt.Sprint(chunk / mib), "--retries", "0"}
	killAt := []int64{2 * mib, 3*mib + 300<<10, 3 * mib}
	res := killThenFinish(t, e, c, args, killAt)
	require.Equal(t, treeRoot(data), res.Disks[0].SHA256)
	require.True(t, res.Disks[0].AllocatedOnly)
	require.GreaterOrEqual(t, res.Disks[0].BytesRead, allocated, "bytes read over the runs cover the allocated areas")
	require.LessOrEqual(t, res.Disks[0].BytesRead, e.served.Load(), "bytes read over the runs: at most what was served")
	checkThinImage(t, d.Destination, data, allocated)
	total := checkResent(t, e.servedSpans(), []string{"thinkill-flat.vmdk"}, len(killAt), streams*chunk, streams*chunk)
	require.Equal(t, allocated+total, e.served.Load(), "bytes served in all: the allocated areas once, plus what was sent again")
	t.Logf("%d of %d bytes allocated; %d kills re-sent %d bytes", allocated, thinSize, len(killAt), total)
}

// spansOf merges the spans of a file served by the runs that keep selects.
func spansOf(spans []servedSpan, file string, keep func(run int64) bool) []byteSpan {
	var out []byteSpan
	for _, s := range spans {
		if s.file == file && keep(s.run) {
			out = append(out, byteSpan{s.start, s.end})
		}
	}
	slices.SortFunc(out, func(a, b byteSpan) int { return cmp.Compare(a.start, b.start) })
	merged := out[:0]
	for _, s := range out {
		if n := len(merged); n > 0 && s.start <= merged[n-1].end {
			merged[n-1].end = max(merged[n-1].end, s.end)
			continue
		}
		merged = append(merged, s)
	}
	return merged
}

// byteSpan is [start, end) of a file.
type byteSpan struct{ start, end int64 }

// overlap is how many bytes two merged, sorted span lists share.
func overlap(a, b []byteSpan) int64 {
	var n int64
	for i, j := 0, 0; i < len(a) && j < len(b); {
		lo, hi := max(a[i].start, b[j].start), min(a[i].end, b[j].end)
		if hi > lo {
			n += hi - lo
		}
		if a[i].end < b[j].end {
			i++
		} else {
			j++
		}
	}
	return n
}
