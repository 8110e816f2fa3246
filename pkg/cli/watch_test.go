package cli

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	k8stesting "k8s.io/client-go/testing"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
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
		t.Fatal("the watch did not stop when its context ended")
	}
	return "", -1
}

func waitOutput(t *testing.T, out *syncBuffer, text string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), text) {
		if time.Now().After(deadline) {
			t.Fatalf("output never showed %q:\n%s", text, out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// progressed returns a copy of m with more bytes transferred.
func progressed(m *v1alpha1.VirtualMachineMigration, done0 int64, progress string) *v1alpha1.VirtualMachineMigration {
	m = m.DeepCopy()
	m.Status.Disks[0].BytesTransferred = done0
	m.Status.Progress = progress
	return m
}

func TestWatchOneAsLines(t *testing.T) {
	m := fixtures()["transferring"]
	out, code := runWatch(t, false, objects(m), []string{"get", "transferring", "--watch"}, []watchStep{
		{waitFor: "TransferringDisks 45%", event: &watch.Event{Type: watch.Modified, Object: progressed(m, 6144*mib, "65%")}},
		// The same line again prints nothing; a change prints one line.
		{waitFor: "TransferringDisks 65%", event: &watch.Event{Type: watch.Modified, Object: progressed(m, 6144*mib, "65%")}},
		{waitFor: "TransferringDisks 65%", event: &watch.Event{Type: watch.Deleted, Object: m}},
	})
	if code != 0 {
		t.Fatalf("exit code %d", code)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := []string{
		"2026-11-30T10:42:00Z transferring TransferringDisks 45% [disk-0 transfer 50% 85.0 MiB/s ETA 49s, disk-1 transfer 25% 85.0 MiB/s ETA 19s]",
		"2026-11-30T10:42:00Z transferring TransferringDisks 65% [disk-0 transfer 75% 85.0 MiB/s ETA 49s, disk-1 transfer 25% 85.0 MiB/s ETA 19s]",
		"virtualmachinemigration.migration.platform.example/transferring deleted",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("watch printed:\n%s\nwant:\n%s", out, strings.Join(want, "\n"))
	}
	if strings.Contains(out, clearScreen) {
		t.Error("a watch into a pipe printed terminal escapes")
	}
}

func TestWatchListAsRows(t *testing.T) {
	all := fixtures()
	out, _ := runWatch(t, false, objects(all["transferring"], all["queued"]), []string{"list", "-w"}, []watchStep{
		{waitFor: "queued", event: &watch.Event{Type: watch.Modified, Object: progressed(all["transferring"], 6144*mib, "65%")}},
		{waitFor: "65%"},
	})
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "NAME") || !strings.HasPrefix(lines[3], "transferring") {
		t.Errorf("want a header, two rows and one changed row, got:\n%s", out)
	}
}

func TestWatchRedrawsInTerminal(t *testing.T) {
	m := fixtures()["transferring"]
	out, _ := runWatch(t, true, objects(m), []string{"get", "transferring", "--watch"}, []watchStep{
		{waitFor: "45%", event: &watch.Event{Type: watch.Modified, Object: progressed(m, 6144*mib, "65%")}},
		{waitFor: "65%"},
	})
	frames := strings.Split(out, clearScreen)
	if len(frames) < 3 {
		t.Fatalf("want at least two redraws, got %d frames:\n%q", len(frames)-1, out)
	}
	last := frames[len(frames)-1]
	for _, want := range []string{"apps/transferring: TransferringDisks for 41m, 65%", "[======================>       ]  75%", "Next:"} {
		if !strings.Contains(last, want) {
			t.Errorf("the last frame lacks %q:\n%s", want, last)
		}
	}
}
