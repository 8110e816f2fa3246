package vsphere

import (
	"context"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stallingServer accepts TCP connections and never answers: a vCenter
// whose TLS stack hangs (or a proxy in front of a dead one). It counts the
// connections clients still hold open.
type stallingServer struct {
	ln       net.Listener
	open     atomic.Int32
	accepted atomic.Int32
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    []net.Conn
}

func newStallingServer(t *testing.T) *stallingServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &stallingServer{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			s.open.Add(1)
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer s.open.Add(-1)
				// Read until the client closes its end; never write.
				_, _ = io.Copy(io.Discard, c)
				_ = c.Close()
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		s.mu.Lock()
		for _, c := range s.conns {
			_ = c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *stallingServer) url() string { return "https://" + s.ln.Addr().String() + "/sdk" }

// TestStalledEndpointLeaksNothing: logging in to an endpoint that accepts
// connections but never completes the TLS handshake fails at the
// caller's deadline, and once the attempts ended no goroutine and no
// connection is left behind (the TLS dial ignored the context: each
// attempt left a goroutine blocked in the handshake and its socket open,
// for as long as the server kept it).
func TestStalledEndpointLeaksNothing(t *testing.T) {
	srv := newStallingServer(t)
	creds := Credentials{Username: testUser, Password: testPassword, Thumbprint: strings.Repeat("AB:", 31) + "AB"}
	runtime.GC()
	before := runtime.NumGoroutine()

	const attempts = 8
	for i := 0; i < attempts; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		start := time.Now()
		_, err := ConnectWithOptions(ctx, Endpoint{URL: srv.url()}, creds, WithDialTimeouts(time.Second, time.Second))
		cancel()
		require.Error(t, err)
		assert.Less(t, time.Since(start), 3*time.Second, "a login to a stalled endpoint outlived its context")
		assert.Equal(t, ClassTransient, Classify(err), err.Error())
	}
	require.Eventually(t, func() bool { return srv.accepted.Load() >= attempts }, 5*time.Second, 10*time.Millisecond)
	ok := assert.Eventually(t, func() bool {
		return srv.open.Load() == 0 && runtime.NumGoroutine() <= before+2
	}, 20*time.Second, 50*time.Millisecond, "connections or goroutines left behind")
	if !ok {
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		t.Logf("open connections: %d, goroutines: %d (before: %d)\n%s", srv.open.Load(), runtime.NumGoroutine(), before,
			goroutinesWith(string(buf[:n]), "tls"))
	}
}

// goroutinesWith keeps the goroutine stacks that mention s.
func goroutinesWith(stacks, s string) string {
	var keep []string
	for _, g := range strings.Split(stacks, "\n\n") {
		if strings.Contains(g, s) {
			keep = append(keep, g)
		}
	}
	return strings.Join(keep, "\n\n")
}
