package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClassify(t *testing.T) {
	tests := []struct{ method, path, watch, want string }{
		{"GET", "/api/v1/namespaces/bench/pods", "", "list pods"},
		{"GET", "/api/v1/namespaces/bench/pods", "true", "watch pods"},
		{"GET", "/api/v1/namespaces/bench/pods/p1", "", "get pods"},
		{"POST", "/api/v1/namespaces/bench/events", "", "create events"},
		{"PUT", "/apis/migration.platform.example/v1alpha1/namespaces/bench/virtualmachinemigrations/m1/status", "", "update virtualmachinemigrations/status"},
		{"PATCH", "/apis/migration.platform.example/v1alpha1/namespaces/bench/virtualmachinemigrations/m1", "", "patch virtualmachinemigrations"},
		{"DELETE", "/apis/batch/v1/namespaces/bench/jobs/j1", "", "delete jobs"},
		{"DELETE", "/apis/batch/v1/namespaces/bench/jobs", "", "deletecollection jobs"},
		{"GET", "/apis/storage.k8s.io/v1/storageclasses", "true", "watch storageclasses"},
		{"GET", "/api/v1/namespaces", "", "list namespaces"},
		{"GET", "/api/v1/namespaces/bench", "", "get namespaces"},
		{"GET", "/apis/kubevirt.io/v1", "", "get (discovery)"},
		{"GET", "/version", "", "get (discovery)"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			assert.Equal(t, tt.want, classify(tt.method, tt.path, tt.watch).String())
		})
	}
}

// TestProxyForwardsAndCounts sends requests through the proxy to a TLS
// server: they arrive with their Authorization header, and are counted
// by verb and resource, conflicts apart.
func TestProxyForwardsAndCounts(t *testing.T) {
	var auth []string
	upstream := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = append(auth, r.Header.Get("Authorization"))
		if r.Method == http.MethodPut {
			w.WriteHeader(http.StatusConflict)
		}
		_, _ = io.WriteString(w, "{}")
	}))
	defer upstream.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: upstream.Certificate().Raw})
	p, err := startProxy(upstream.URL, ca)
	require.NoError(t, err)
	defer p.Close()

	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(p.CA))
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	for _, method := range []string{http.MethodGet, http.MethodGet, http.MethodPut} {
		req, err := http.NewRequest(method, p.URL()+"/api/v1/namespaces/bench/configmaps/c1", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer t0ken")
		resp, err := client.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
	}
	assert.Equal(t, []string{"Bearer t0ken", "Bearer t0ken", "Bearer t0ken"}, auth)
	counts, _ := p.snapshot()
	assert.Equal(t, map[request]int{{"get", "configmaps"}: 2, {"update", "configmaps"}: 1}, counts)
	// A conflict is counted once the response is written: soon after.
	assert.Eventually(t, func() bool {
		_, conflicts := p.snapshot()
		return assert.ObjectsAreEqual(map[request]int{{"update", "configmaps"}: 1}, conflicts)
	}, 5*time.Second, 10*time.Millisecond)
}
