package manager

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"platform.example/vm-migration/pkg/controller"
)

// notFoundServer answers every request with a 404 Status and counts the
// requests it saw.
func notFoundServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var seen atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		seen.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"the server saw this request","reason":"NotFound","code":404}`))
	}))
	t.Cleanup(srv.Close)
	return srv, &seen
}

// clientCalls is one request through each of the controller's clients.
func clientCalls(clients controller.Clients) []struct {
	name string
	call func(context.Context) error
} {
	get := metav1.GetOptions{}
	return []struct {
		name string
		call func(context.Context) error
	}{
		{"kube", func(ctx context.Context) error {
			_, err := clients.Kube.CoreV1().ConfigMaps("ns").Get(ctx, "x", get)
			return err
		}},
		{"migration", func(ctx context.Context) error {
			_, err := clients.Migration.MigrationV1alpha1().VirtualMachineMigrations("ns").Get(ctx, "x", get)
			return err
		}},
		{"kubevirt", func(ctx context.Context) error {
			_, err := clients.KubeVirt.KubevirtV1().VirtualMachines("ns").Get(ctx, "x", get)
			return err
		}},
		{"cdi", func(ctx context.Context) error {
			_, err := clients.CDI.CdiV1beta1().DataVolumes("ns").Get(ctx, "x", get)
			return err
		}},
		{"metadata", func(ctx context.Context) error {
			_, err := clients.Metadata.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("ns").Get(ctx, "x", get)
			return err
		}},
	}
}

// TestClientsShareOneRateLimit: with a burst of 1 and a token every 1000 s,
// the first request through any client takes the only token, and a
// request through every other client then waits for it (refused at once
// here: its context ends before the next token), unsent. With a bucket per
// client (before issue 32) each client had a token of its own and sent
// its request at once: --kube-api-qps bounded each of five clients, not
// the controller.
func TestClientsShareOneRateLimit(t *testing.T) {
	srv, seen := notFoundServer(t)
	clients, err := NewClients(&rest.Config{Host: srv.URL, QPS: 0.001, Burst: 1})
	require.NoError(t, err)
	calls := clientCalls(clients)

	require.Error(t, calls[0].call(context.Background()), "the server answers 404")
	require.Equal(t, int64(1), seen.Load(), "the first request, through the %s client, reaches the server", calls[0].name)
	for _, c := range calls[1:] {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := c.call(ctx)
		cancel()
		assert.ErrorContains(t, err, "rate limiter", "the %s client's request was not held back by the bucket the kube client emptied: it has a bucket of its own", c.name)
	}
	assert.Equal(t, int64(1), seen.Load(), "requests through the other clients reached the server: the clients do not share one rate limit")
}

// countingLimiter is a RateLimiter that admits every request and counts
// them.
type countingLimiter struct {
	flowcontrol.RateLimiter
	waits atomic.Int64
}

func (c *countingLimiter) Wait(context.Context) error {
	c.waits.Add(1)
	return nil
}

func (c *countingLimiter) TryAccept() bool {
	c.waits.Add(1)
	return true
}

// TestClientsKeepAConfigsOwnLimit: a config with a rate limiter of its own
// keeps it (every client waits on it), and one with a negative QPS is not
// limited at all (no request waits).
func TestClientsKeepAConfigsOwnLimit(t *testing.T) {
	srv, seen := notFoundServer(t)
	own := &countingLimiter{RateLimiter: flowcontrol.NewFakeAlwaysRateLimiter()}
	clients, err := NewClients(&rest.Config{Host: srv.URL, RateLimiter: own, QPS: 0.001, Burst: 1})
	require.NoError(t, err)
	for _, c := range clientCalls(clients) {
		require.Error(t, c.call(context.Background()), "the server answers 404 to the %s client", c.name)
	}
	assert.Equal(t, int64(5), own.waits.Load(), "each client's request waits on the config's own rate limiter")
	assert.Equal(t, int64(5), seen.Load())

	unlimited := shareLimit(&rest.Config{Host: srv.URL, QPS: -1})
	assert.Nil(t, unlimited.RateLimiter, "a negative QPS means no client-side limit")
	clients, err = NewClients(unlimited)
	require.NoError(t, err)
	for range 3 {
		for _, c := range clientCalls(clients) {
			require.Error(t, c.call(context.Background()), "the server answers 404 to the %s client", c.name)
		}
	}
	assert.Equal(t, int64(20), seen.Load(), "with a negative QPS nothing is held back")
}
