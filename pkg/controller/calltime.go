package controller

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vmware/govmomi/vim25/soap"
	"k8s.io/client-go/util/flowcontrol"
)

// A reconcile waits on the API server and on vSphere: a status write, a
// create, a power operation take what they take on the other side. What
// the controller controls is the rest, its own time: the reconcile's
// duration minus the time its calls took. Each reconcile carries a
// callClock in its context; the transports of the API clients
// (TimeAPICalls, through rest.Config.Wrap), their client-side rate limits
// (TimeThrottling: a request waits there for its turn before it is sent)
// and the vSphere sessions' (TimeVSphereCalls, through
// vsphere.WithRoundTripper) add to it the time of every call made with
// that context. Calls made with another context
// (informers' lists and watches, the event recorder, leader election)
// count nowhere.

// callClock accumulates the time one reconcile spent in API and vSphere
// calls. It is safe for concurrent use: a reconcile may call in parallel.
type callClock struct{ waited atomic.Int64 }

type callClockKey struct{}

// withCallClock returns ctx carrying a new, empty callClock.
func withCallClock(ctx context.Context) (context.Context, *callClock) {
	c := &callClock{}
	return context.WithValue(ctx, callClockKey{}, c), c
}

// clockOf is the callClock of ctx, nil when it has none.
func clockOf(ctx context.Context) *callClock {
	c, _ := ctx.Value(callClockKey{}).(*callClock)
	return c
}

// add counts d as waited.
func (c *callClock) add(d time.Duration) { c.waited.Add(int64(d)) }

// ownTime is total minus the time waited on calls, never below zero
// (parallel calls may wait longer in sum than the reconcile lasted).
func (c *callClock) ownTime(total time.Duration) time.Duration {
	return max(total-time.Duration(c.waited.Load()), 0)
}

// TimeAPICalls wraps an API client's transport (rest.Config.Wrap) so that
// each request made with a reconcile's context adds its time, from
// sending it until its response body was read or closed, to that
// reconcile's call time. Other requests pass through untouched.
func TimeAPICalls(next http.RoundTripper) http.RoundTripper {
	return &apiCallTimer{next: next}
}

type apiCallTimer struct{ next http.RoundTripper }

// RoundTrip implements http.RoundTripper.
func (t *apiCallTimer) RoundTrip(req *http.Request) (*http.Response, error) {
	clock := clockOf(req.Context())
	if clock == nil {
		return t.next.RoundTrip(req)
	}
	start := time.Now()
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.Body == nil {
		clock.add(time.Since(start))
		return resp, err
	}
	resp.Body = &timedBody{ReadCloser: resp.Body, clock: clock, start: start}
	return resp, nil
}

// WrappedRoundTripper lets client-go's debugging wrappers see through it.
func (t *apiCallTimer) WrappedRoundTripper() http.RoundTripper { return t.next }

// timedBody counts a call done when its body is read to the end, fails,
// or is closed, whichever comes first.
type timedBody struct {
	io.ReadCloser
	clock *callClock
	start time.Time
	once  sync.Once
}

func (b *timedBody) done() { b.once.Do(func() { b.clock.add(time.Since(b.start)) }) }

// Read implements io.Reader.
func (b *timedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.done()
	}
	return n, err
}

// Close implements io.Closer.
func (b *timedBody) Close() error {
	b.done()
	return b.ReadCloser.Close()
}

// TimeThrottling wraps an API client's rate limiter (rest.Config.RateLimiter)
// so that the time a request made with a reconcile's context waits for its
// turn counts as that call's time.
func TimeThrottling(next flowcontrol.RateLimiter) flowcontrol.RateLimiter {
	return &throttleTimer{RateLimiter: next}
}

type throttleTimer struct{ flowcontrol.RateLimiter }

// Wait implements flowcontrol.RateLimiter.
func (t *throttleTimer) Wait(ctx context.Context) error {
	clock := clockOf(ctx)
	if clock == nil {
		return t.RateLimiter.Wait(ctx)
	}
	start := time.Now()
	defer func() { clock.add(time.Since(start)) }()
	return t.RateLimiter.Wait(ctx)
}

// TimeVSphereCalls wraps a vSphere session's SOAP round tripper
// (vsphere.WithRoundTripper) so that each call made with a reconcile's
// context adds its time to that reconcile's call time: the call itself,
// with a re-login it needed, and the long polls of task waits.
func TimeVSphereCalls(next soap.RoundTripper) soap.RoundTripper {
	return &soapCallTimer{next: next}
}

type soapCallTimer struct{ next soap.RoundTripper }

// RoundTrip implements soap.RoundTripper.
func (t *soapCallTimer) RoundTrip(ctx context.Context, req, res soap.HasFault) error {
	clock := clockOf(ctx)
	if clock == nil {
		return t.next.RoundTrip(ctx, req, res)
	}
	start := time.Now()
	defer func() { clock.add(time.Since(start)) }()
	return t.next.RoundTrip(ctx, req, res)
}
