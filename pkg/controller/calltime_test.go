package controller

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/soap"
	"k8s.io/client-go/util/flowcontrol"

	"platform.example/vm-migration/pkg/vsphere"
)

// slowServer answers after headerDelay with a body written in two halves
// bodyDelay apart.
func slowServer(t *testing.T, headerDelay, bodyDelay time.Duration) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(headerDelay)
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"first":"half",`))
		w.(http.Flusher).Flush()
		time.Sleep(bodyDelay)
		_, _ = w.Write([]byte(`"second":"half"}`))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// timedGet gets url through TimeAPICalls with a reconcile's context, and
// returns the response and that reconcile's clock.
func timedGet(t *testing.T, url string) (*http.Response, *callClock) {
	t.Helper()
	client := &http.Client{Transport: TimeAPICalls(http.DefaultTransport)}
	ctx, clock := withCallClock(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := client.Do(req)
	require.NoError(t, err)
	return resp, clock
}

func TestAPICallTimeCountsUntilTheBodyIsRead(t *testing.T) {
	const header, body = 40 * time.Millisecond, 40 * time.Millisecond
	srv := slowServer(t, header, body)
	resp, clock := timedGet(t, srv.URL)
	afterHeaders := time.Duration(clock.waited.Load())
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, `{"first":"half","second":"half"}`, string(data))

	assert.Zero(t, afterHeaders, "counted only once the body is read")
	waited := time.Duration(clock.waited.Load())
	assert.GreaterOrEqual(t, waited, header+body, "the wait for the headers and for the body")
	assert.Less(t, waited, 2*(header+body), "counted once, not at EOF and again at Close")
}

func TestAPICallClosedUnreadCounts(t *testing.T) {
	srv := slowServer(t, 30*time.Millisecond, 0)
	resp, clock := timedGet(t, srv.URL)
	require.NoError(t, resp.Body.Close())
	assert.GreaterOrEqual(t, time.Duration(clock.waited.Load()), 30*time.Millisecond)
}

func TestAPICallWithoutReconcileContextPassesThrough(t *testing.T) {
	srv := slowServer(t, 0, 0)
	client := &http.Client{Transport: TimeAPICalls(http.DefaultTransport)}
	resp, err := client.Get(srv.URL)
	require.NoError(t, err)
	_, err = io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	_, timed := resp.Body.(*timedBody)
	assert.False(t, timed, "a request outside a reconcile is not timed")
}

func TestAPICallThatFailsCounts(t *testing.T) {
	srv := slowServer(t, 0, 0)
	srv.Close()
	client := &http.Client{Transport: TimeAPICalls(http.DefaultTransport)}
	ctx, clock := withCallClock(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	_, err = client.Do(req) //nolint:bodyclose // it fails
	require.Error(t, err)
	assert.Positive(t, clock.waited.Load(), "the failed call's time is the call's")
}

func TestVSphereCallTime(t *testing.T) {
	model := simulator.VPX()
	require.NoError(t, model.Create())
	model.Service.TLS = new(tls.Config)
	model.Service.Listen = &url.URL{User: url.UserPassword(vcsimUser, vcsimPassword)}
	const delay = 25 * time.Millisecond
	model.DelayConfig.Delay = int(delay / time.Millisecond)
	server := model.Service.NewServer()
	t.Cleanup(func() { server.Close(); model.Remove() })

	ctx, clock := withCallClock(context.Background())
	s, err := vsphere.ConnectWithOptions(ctx, vsphere.Endpoint{URL: "https://" + server.URL.Host + "/sdk"},
		vsphere.Credentials{Username: vcsimUser, Password: vcsimPassword, Thumbprint: soap.ThumbprintSHA256(server.Certificate())},
		vsphere.WithRoundTripper(TimeVSphereCalls))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Logout(context.Background()) })
	connecting := time.Duration(clock.waited.Load())
	assert.GreaterOrEqual(t, connecting, 2*delay, "the service content and the login are calls of the reconcile that connects")

	before := time.Duration(clock.waited.Load())
	start := time.Now()
	_, err = s.Datacenter(ctx)
	require.NoError(t, err)
	took := time.Since(start)
	waited := time.Duration(clock.waited.Load()) - before
	assert.GreaterOrEqual(t, waited, delay, "finding the datacenter is at least one delayed call")
	assert.LessOrEqual(t, waited, took, "no more than the calls lasted")

	other := time.Duration(clock.waited.Load())
	_, err = s.Datacenter(context.Background())
	require.NoError(t, err)
	assert.Equal(t, other, time.Duration(clock.waited.Load()), "calls outside the reconcile's context are not its")
}

func TestOwnTimeIsNeverNegative(t *testing.T) {
	_, clock := withCallClock(context.Background())
	clock.add(30 * time.Millisecond)
	clock.add(30 * time.Millisecond)
	assert.Equal(t, 40*time.Millisecond, clock.ownTime(100*time.Millisecond))
	assert.Zero(t, clock.ownTime(50*time.Millisecond), "parallel calls that waited longer than the reconcile")
}

func TestThrottlingCountsAsCallTime(t *testing.T) {
	limiter := TimeThrottling(flowcontrol.NewTokenBucketRateLimiter(10, 1))
	ctx, clock := withCallClock(context.Background())
	require.NoError(t, limiter.Wait(ctx), "the first token is there")
	// Measured from the first token: a second Wait that returns late on a
	// loaded machine leaves less of the third token's interval, never less
	// of the two intervals together.
	first := time.Now()
	require.NoError(t, limiter.Wait(ctx), "the second comes after 100 ms")
	assert.GreaterOrEqual(t, time.Duration(clock.waited.Load()), 80*time.Millisecond, "the wait for the second token")
	require.NoError(t, limiter.Wait(context.Background()))
	assert.GreaterOrEqual(t, time.Since(first), 150*time.Millisecond, "outside a reconcile it still limits (the third token comes 200 ms after the first)")
	assert.Less(t, time.Duration(clock.waited.Load()), 200*time.Millisecond, "and counts for no reconcile")
}
