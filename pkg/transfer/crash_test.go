package transfer_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
			mark, before := e.connMark(), e.served.Load()
			code, stdout, stderr := c.runProcess(t, args)
			require.Equal(t, transfer.ExitOK, code, stderr)
			e.waitConnsClosed(t, mark)
			last := strings.Split(strings.TrimSpace(stdout), "\n")
			res, err := wire.ParseResult([]byte(last[len(last)-1]))
			require.NoError(t, err)
			require.Equal(t, sha(data), res.Disks[0].SHA256)
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
