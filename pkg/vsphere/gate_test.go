package vsphere

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEndpointGate(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	g := NewEndpointGate(2, func() time.Time { return now })
	const url = "https://vc.example.com/sdk"

	// The limit counts every spelling of the endpoint.
	leave1, err := g.Enter(url)
	require.NoError(t, err)
	leave2, err := g.Enter("https://VC.example.com:443/sdk/")
	require.NoError(t, err)
	_, err = g.Enter(url)
	var busy *EndpointBusyError
	require.ErrorAs(t, err, &busy)
	assert.Equal(t, ClassTransient, Classify(err))
	other, err := g.Enter("https://vc2.example.com/sdk")
	require.NoError(t, err, "another endpoint has its own limit")
	other()
	leave1()
	leave1() // leaving twice frees one place only
	leave3, err := g.Enter(url)
	require.NoError(t, err)
	_, err = g.Enter(url)
	require.ErrorAs(t, err, &busy, "leaving twice freed two places")
	leave2()
	leave3()

	// Calls that get no answer close the endpoint for a doubling backoff.
	id := "vc.example.com:443"
	var unavailable *EndpointUnavailableError
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		g.record(id, &DialError{Addr: id, Err: errors.New("connection refused")})
		_, err = g.Enter(url)
		require.ErrorAs(t, err, &unavailable, "failure %d", i+1)
		assert.Equal(t, now.Add(want), unavailable.Until)
		assert.Contains(t, err.Error(), "connection refused")
		assert.Equal(t, ClassTransient, Classify(err))
	}
	g.record(id, fmt.Errorf("call: %w", context.DeadlineExceeded))
	_, err = g.Enter(url)
	require.ErrorAs(t, err, &unavailable)
	assert.Equal(t, now.Add(8*time.Second), unavailable.Until, "a call without an answer before its deadline counts")
	for range 20 {
		g.record(id, &DialError{Addr: id, Err: errors.New("no route to host")})
	}
	_, err = g.Enter(url)
	require.ErrorAs(t, err, &unavailable)
	assert.Equal(t, now.Add(endpointBackoffMax), unavailable.Until, "the backoff is bounded")

	// After the backoff a call goes through; an answer (a fault is one)
	// opens the endpoint again.
	now = now.Add(endpointBackoffMax)
	leave, err := g.Enter(url)
	require.NoError(t, err)
	g.record(id, errors.New("ServerFaultCode: NotAuthenticated"))
	leave()
	g.record(id, &DialError{Addr: id, Err: errors.New("refused")})
	_, err = g.Enter(url)
	require.ErrorAs(t, err, &unavailable)
	assert.Equal(t, now.Add(time.Second), unavailable.Until, "an answer did not reset the backoff")
}
