package cli

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	k8stesting "k8s.io/client-go/testing"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
)

// syncBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// streamsTo are the harness's streams with stdout going to out.
func streamsTo(h *harness, out io.Writer) genericiooptions.IOStreams {
	return genericiooptions.IOStreams{In: h.in, Out: out, ErrOut: h.errOut}
}

// watchRun runs a watch command against a fake watcher that the test
// feeds; steps run in order, each after the output contains its wait text.
type watchStep struct {
	waitFor string
	event   *watch.Event
}

func runWatch(t *testing.T, terminal bool, objs []runtime.Object, args []string, steps []watchStep) (string, int) {
	t.Helper()
	h := newHarness(t, objs)
	h.terminal = terminal
	fw := watch.NewFake()
	h.factory.mig.PrependWatchReactor("virtualmachinemigrations", func(k8stesting.Action) (bool, watch.Interface, error) {
		return true, fw, nil
	})
	out := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	codes := make(chan int, 1)
	go func() {
		e := &env{streams: streamsTo(h, out), factory: h.factory, terminal: func(io.Writer) bool { return h.terminal }}
		codes <- Execute(ctx, newCommand(e), args, h.errOut)
	}()
	for _, s := range steps {
		waitOutput(t, out, s.waitFor)
		if s.event != nil {
			fw.Action(s.event.Type, s.event.Object)
		}
	}
	select {
	case code := <-codes:
		return out.String(), code
	case <-time.After(200 * time.Millisecond):
	}
	cancel()
	select {
	case code := <-codes:
		return out.String(), code
	case <-time.After(5 * time.Second):
		require.FailNow(t, "the watch did not stop within 5s of its context ending")
	}
	return "", -1
}

// waitOutput waits up to 5s for the output to show text; on a timeout the
// failure shows the output as it last was.
func waitOutput(t *testing.T, out *syncBuffer, text string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Contains(c, out.String(), text)
	}, 5*time.Second, 5*time.Millisecond, "output never showed %q", text)
}

// progressed returns a copy of m with more bytes transferred, and the
// overall progress the controller writes of them.
func progressed(m *v1alpha1.VirtualMachineMigration, done0 int64) *v1alpha1.VirtualMachineMigration {
	m = m.DeepCopy()
	m.Status.Disks[0].BytesTransferred = done0
	m.Status.Progress = statemachine.Progress(&m.Status)
	return m
}

func TestWatchOneAsLines(t *testing.T) {
	m := fixtures()["transferring"]
	out, code := runWatch(t, false, objects(m), []string{"get", "transferring", "--watch"}, []watchStep{
		{waitFor: "TransferringDisks 31%", event: &watch.Event{Type: watch.Modified, Object: progressed(m, 6144*mib)}},
		// The same line again prints nothing; a change prints one line.
		{waitFor: "TransferringDisks 45%", event: &watch.Event{Type: watch.Modified, Object: progressed(m, 6144*mib)}},
		{waitFor: "TransferringDisks 45%", event: &watch.Event{Type: watch.Deleted, Object: m}},
	})
	require.Equal(t, 0, code, "exit code")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := []string{
		"2026-11-30T10:42:00Z transferring TransferringDisks 31% [disk-0 transfer 50% 85.0 MiB/s ETA 49s, disk-1 transfer 25% 85.0 MiB/s ETA 19s]",
		"2026-11-30T10:42:00Z transferring TransferringDisks 45% [disk-0 transfer 75% 85.0 MiB/s ETA 49s, disk-1 transfer 25% 85.0 MiB/s ETA 19s]",
		"virtualmachinemigration.migration.platform.example/transferring deleted",
	}
	assert.Equal(t, want, lines, "the lines the watch printed")
	assert.NotContains(t, out, clearScreen, "a watch into a pipe printed terminal escapes")
}

func TestWatchListAsRows(t *testing.T) {
	all := fixtures()
	out, _ := runWatch(t, false, objects(all["transferring"], all["queued"]), []string{"list", "-w"}, []watchStep{
		{waitFor: "queued", event: &watch.Event{Type: watch.Modified, Object: progressed(all["transferring"], 6144*mib)}},
		{waitFor: "45%"},
	})
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 4, "want a header, two rows and one changed row, got:\n%s", out)
	assert.True(t, strings.HasPrefix(lines[0], "NAME"), "the first line %q, want the header (NAME ...)", lines[0])
	assert.True(t, strings.HasPrefix(lines[3], "transferring"), "the last line %q, want the changed row of transferring", lines[3])
}

func TestWatchRedrawsInTerminal(t *testing.T) {
	m := fixtures()["transferring"]
	out, _ := runWatch(t, true, objects(m), []string{"get", "transferring", "--watch"}, []watchStep{
		{waitFor: "31%", event: &watch.Event{Type: watch.Modified, Object: progressed(m, 6144*mib)}},
		{waitFor: "45%"},
	})
	frames := strings.Split(out, clearScreen)
	require.GreaterOrEqual(t, len(frames)-1, 2, "want at least two redraws (clear screens), got:\n%q", out)
	last := frames[len(frames)-1]
	for _, want := range []string{"apps/transferring: TransferringDisks for 41m, 45%", "[======================>       ]  75%", "Next:"} {
		assert.Contains(t, last, want, "the last frame lacks %q", want)
	}

}
