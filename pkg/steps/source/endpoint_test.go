package source

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/simulator"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/vsphere"
	"platform.example/vm-migration/test/builders"
)

// stalledEndpoint accepts TCP connections and never answers: a vCenter
// whose TLS stack hangs. It closes what it holds when the test ends.
func stalledEndpoint(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go func() { _, _ = io.Copy(io.Discard, c) }()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return "https://" + ln.Addr().String() + "/sdk"
}

// tenants are n migrations of the endpoint at url, each in its own
// namespace with its own credentials Secret, over one step.
func tenants(t *testing.T, url string, n int, callTimeout time.Duration) (*Step, []*v1alpha1.VirtualMachineMigration) {
	t.Helper()
	secrets := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	var ms []*v1alpha1.VirtualMachineMigration
	for i := range n {
		ns := "tenant-" + string(rune('a'+i))
		s := builders.CredentialsSecret(ns, "creds", map[string]string{"username": user, "password": password, "endpoints": url})
		s.ResourceVersion = "1"
		require.NoError(t, secrets.Add(s))
		m := builders.Migration(builders.InNamespace(ns), builders.Credentials("creds"), builders.SourceAt(url), builders.SourceVM("DC0_H0_VM0"))
		m.Spec.Source.InsecureSkipVerify = true
		ms = append(ms, m)
	}
	sessions := vsphere.NewSessionCache()
	t.Cleanup(func() { _ = sessions.Close(context.Background()) })
	return &Step{Secrets: corelisters.NewSecretLister(secrets), Sessions: sessions, CallTimeout: callTimeout}, ms
}

// TestUnreachableEndpointFailsFast: once a call to an endpoint timed out,
// the other migrations of that endpoint are told at once that it is
// unavailable, rather than each holding a worker for the whole call
// timeout; the observation is transient (the migration waits and looks
// again).
func TestUnreachableEndpointFailsFast(t *testing.T) {
	step, ms := tenants(t, stalledEndpoint(t), 3, time.Second)
	first := step.Observe(context.Background(), ms[0], statemachine.SourceNeedState)
	require.NotNil(t, first.Error)
	assert.Equal(t, statemachine.ErrorTransient, first.Error.Class, first.Error.Message)

	for _, m := range ms[1:] {
		start := time.Now()
		obs := step.Observe(context.Background(), m, statemachine.SourceNeedState)
		took := time.Since(start)
		require.NotNil(t, obs.Error)
		assert.Equal(t, statemachine.ErrorTransient, obs.Error.Class, obs.Error.Message)
		assert.Equal(t, ReasonSourceUnavailable, obs.Error.Reason)
		assert.Less(t, took, 200*time.Millisecond, "a migration of %s waited %s for an endpoint known to be unreachable", m.Namespace, took)
		t.Logf("%s: %s after %s", m.Namespace, obs.Error.Message, took)
	}
}

// TestSlowEndpointHoldsAtMostItsLimitOfWorkers: calls to one endpoint
// that answers slowly take at most the per-endpoint limit of workers; the
// others are told at once that it is busy (and look again later).
func TestSlowEndpointHoldsAtMostItsLimitOfWorkers(t *testing.T) {
	model := simulator.VPX()
	require.NoError(t, model.Create())
	model.DelayConfig.MethodDelay = map[string]int{"RetrieveProperties": 1500, "RetrievePropertiesEx": 1500}
	model.Service.TLS = new(tls.Config)
	model.Service.Listen = &url.URL{User: url.UserPassword(user, password)}
	server := model.Service.NewServer()
	t.Cleanup(func() { server.Close(); model.Remove() })
	endpoint := "https://" + server.URL.Host + "/sdk"
	step, ms := tenants(t, endpoint, vsphere.DefaultEndpointConcurrency+3, 30*time.Second)

	var wg sync.WaitGroup
	took := make([]time.Duration, len(ms))
	errs := make([]string, len(ms))
	for i, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			obs := step.Observe(context.Background(), m, statemachine.SourceNeedState)
			took[i] = time.Since(start)
			if obs.Error != nil {
				errs[i] = string(obs.Error.Class) + " " + obs.Error.Message
			}
		}()
	}
	wg.Wait()
	fast, slowOK := 0, 0
	for i, d := range took {
		switch {
		case d < 500*time.Millisecond:
			fast++
			assert.Contains(t, errs[i], string(statemachine.ErrorTransient))
		case errs[i] == "":
			slowOK++
		}
	}
	t.Logf("observe times: %v; errors: %q", took, errs)
	assert.Equal(t, vsphere.DefaultEndpointConcurrency, slowOK, "the calls within the limit did not all succeed")
	assert.GreaterOrEqual(t, fast, 3, "more than %d workers waited on one slow endpoint", vsphere.DefaultEndpointConcurrency)
}
