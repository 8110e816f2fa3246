package source

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/simulator"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/vsphere"
	"platform.example/vm-migration/test/builders"
)

// collector is a tenant's own HTTPS server posing as a vCenter (a proxy
// to a simulator that takes any login): it keeps every request body it is
// sent.
type collector struct {
	srv    *httptest.Server
	mu     sync.Mutex
	bodies []string
}

func newCollector(t *testing.T) *collector {
	t.Helper()
	model := simulator.VPX()
	require.NoError(t, model.Create())
	model.Service.TLS = new(tls.Config)
	backend := model.Service.NewServer()
	t.Cleanup(func() { backend.Close(); model.Remove() })
	target, err := url.Parse("https://" + backend.URL.Host)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // the test's own simulator

	c := &collector{}
	c.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		c.bodies = append(c.bodies, string(b))
		c.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(b))
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *collector) received() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.bodies...)
}

// TestCredentialsGoOnlyToTheirEndpoints: a tenant who may create
// migrations but not read Secrets names a labelled credentials Secret and
// points spec.source.url (with insecureSkipVerify) at a server of their
// own. Unless the Secret names that endpoint, the migration is refused
// before any connection, with a condition saying what to do, and the
// server receives nothing, the password least of all.
func TestCredentialsGoOnlyToTheirEndpoints(t *testing.T) {
	attacker := newCollector(t)
	for name, tc := range map[string]struct {
		endpoints string // "" leaves the key out
		allowed   bool
	}{
		"secret bound to the real vCenter": {endpoints: "vcenter.example.com", allowed: false},
		"secret bound to nothing":          {endpoints: "", allowed: false},
		"secret bound to that server":      {endpoints: "vcenter.example.com\n" + attacker.srv.URL, allowed: true},
	} {
		t.Run(name, func(t *testing.T) {
			before := len(attacker.received())
			data := map[string]string{"username": user, "password": password}
			if tc.endpoints != "" {
				data["endpoints"] = tc.endpoints
			}
			secrets := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
			s := builders.CredentialsSecret("ns", "creds", data)
			s.ResourceVersion = "1"
			require.NoError(t, secrets.Add(s))
			sessions := vsphere.NewSessionCache()
			t.Cleanup(func() { _ = sessions.Close(context.Background()) })
			step := &Step{Secrets: corelisters.NewSecretLister(secrets), Sessions: sessions, CallTimeout: 5 * time.Second}
			m := builders.Migration(builders.InNamespace("ns"), builders.Credentials("creds"),
				builders.SourceAt(attacker.srv.URL+"/sdk"), builders.SourceVM("DC0_H0_VM0"))
			m.Spec.Source.InsecureSkipVerify = true

			obs := step.Observe(context.Background(), m, statemachine.SourceNeedInventory)
			got := attacker.received()[before:]
			if tc.allowed {
				assert.NotEmpty(t, got, "a Secret bound to the endpoint was not used")
				return
			}
			assert.Empty(t, got, "the controller sent %d requests to an endpoint the Secret does not name", len(got))
			for _, b := range got {
				assert.NotContains(t, b, password, "the password reached the tenant's server")
			}
			require.NotNil(t, obs.Error)
			assert.Equal(t, statemachine.ErrorNeedsUser, obs.Error.Class, obs.Error.Message)
			assert.Equal(t, ReasonCredentialsEndpointNotAllowed, obs.Error.Reason)
			assert.Contains(t, obs.Error.Message, `"creds"`)
			assert.Contains(t, obs.Error.Message, "endpoints")
			assert.Contains(t, obs.Error.Message, strings.TrimPrefix(attacker.srv.URL, "https://"))
		})
	}
}
