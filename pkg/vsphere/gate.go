package vsphere

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
)

// DefaultEndpointConcurrency is how many operations run against one
// endpoint at once by default.
const DefaultEndpointConcurrency = 4

// Backoff of an endpoint whose calls fail to connect or time out.
const (
	endpointBackoffMin = time.Second
	endpointBackoffMax = 5 * time.Minute
)

// EndpointBusyError says an operation was not started because its
// endpoint already runs the most operations allowed at once. It is
// transient: look again later.
type EndpointBusyError struct {
	// Endpoint is the endpoint's identity (EndpointID).
	Endpoint string
	// Limit is the number of operations allowed at once.
	Limit int
}

// Error implements error.
func (e *EndpointBusyError) Error() string {
	return fmt.Sprintf("vSphere endpoint %s already runs %d operations of this controller (the per-endpoint limit): looking again later", e.Endpoint, e.Limit)
}

// EndpointUnavailableError says an operation was not started because the
// endpoint's recent calls failed to connect or timed out: it is not called
// again before Until. It is transient.
type EndpointUnavailableError struct {
	// Endpoint is the endpoint's identity (EndpointID).
	Endpoint string
	// Until is when it is called again.
	Until time.Time
	// Cause is the last failure seen.
	Cause string
}

// Error implements error.
func (e *EndpointUnavailableError) Error() string {
	return fmt.Sprintf("vSphere endpoint %s is unreachable or not answering (%s): not calling it again before %s",
		e.Endpoint, e.Cause, e.Until.UTC().Format(time.RFC3339))
}

// EndpointGate bounds, per endpoint, the operations in flight (a worker
// each) and stops calling an endpoint whose calls fail to connect or time
// out, for a backoff that doubles with each such failure (from a second to
// five minutes) and ends with the first call that gets an answer. An
// operation that cannot start is refused at once, never queued: a
// controller worker is never held waiting for an endpoint.
type EndpointGate struct {
	limit int
	now   func() time.Time

	mu    sync.Mutex
	state map[string]*endpointState
}

type endpointState struct {
	inFlight  int
	failures  int
	openUntil time.Time
	cause     string
}

// NewEndpointGate returns a gate allowing limit operations per endpoint
// at once (zero or less: no limit); now is its clock (nil: the real one).
func NewEndpointGate(limit int, now func() time.Time) *EndpointGate {
	if now == nil {
		now = time.Now
	}
	return &EndpointGate{limit: limit, now: now, state: map[string]*endpointState{}}
}

// Enter starts an operation against the endpoint of url, or refuses it
// (*EndpointBusyError, *EndpointUnavailableError). The caller must call
// leave once the operation ended.
func (g *EndpointGate) Enter(url string) (leave func(), err error) {
	id, err := EndpointID(url)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.stateOf(id)
	if now := g.now(); now.Before(st.openUntil) {
		return nil, &EndpointUnavailableError{Endpoint: id, Until: st.openUntil, Cause: st.cause}
	}
	if g.limit > 0 && st.inFlight >= g.limit {
		return nil, &EndpointBusyError{Endpoint: id, Limit: g.limit}
	}
	st.inFlight++
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			st.inFlight--
		})
	}, nil
}

// record notes the outcome of one call to the endpoint id: an answer (a
// fault is one) closes it; a failure to connect, or a call that timed
// out, keeps it closed for the next backoff.
func (g *EndpointGate) record(id string, err error) {
	unreachable := unanswered(err)
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.stateOf(id)
	if !unreachable {
		st.failures, st.openUntil, st.cause = 0, time.Time{}, ""
		return
	}
	st.failures++
	backoff := endpointBackoffMin << min(st.failures-1, 16)
	st.openUntil = g.now().Add(min(backoff, endpointBackoffMax))
	st.cause = err.Error()
}

func (g *EndpointGate) stateOf(id string) *endpointState {
	st := g.state[id]
	if st == nil {
		st = &endpointState{}
		g.state[id] = st
	}
	return st
}

// unanswered says err is a call the endpoint did not answer: no connection,
// a stalled handshake, or no answer before the deadline.
func unanswered(err error) bool {
	if err == nil {
		return false
	}
	var de *DialError
	var ne net.Error
	return errors.As(err, &de) || errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// gateRoundTripper tells the gate how each call to its endpoint went.
type gateRoundTripper struct {
	gate     *EndpointGate
	endpoint string
	next     soap.RoundTripper
}

// RoundTrip implements soap.RoundTripper.
func (r *gateRoundTripper) RoundTrip(ctx context.Context, req, res soap.HasFault) error {
	err := r.next.RoundTrip(ctx, req, res)
	if _, logout := req.(*methods.LogoutBody); logout && err != nil {
		return err // a logout within a short deadline says little of the endpoint
	}
	if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return err // the caller gave up (cancelled): nothing learnt
	}
	r.gate.record(r.endpoint, err)
	return err
}

// WithGate makes a Session report the outcome of each call to gate, which
// refuses operations against an endpoint that does not answer (see
// EndpointGate).
func WithGate(gate *EndpointGate) Option {
	return func(o *options) { o.gate = gate }
}
