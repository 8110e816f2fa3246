package vsphere

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEndpointID(t *testing.T) {
	same := []string{
		"https://vc.example.com/sdk",
		"https://VC.Example.COM:443/sdk/",
		"HTTPS://vc.example.com",
		"https://vc.example.com./sdk?x=1#frag",
		"vc.example.com/sdk/",
	}
	for _, raw := range same {
		id, err := EndpointID(raw)
		require.NoError(t, err, raw)
		assert.Equal(t, "vc.example.com:443", id, raw)
	}
	for raw, want := range map[string]string{
		"https://vc.example.com:8443/sdk": "vc.example.com:8443",
		"https://10.0.0.5/sdk":            "10.0.0.5:443",
		"https://[FD00::1]/sdk":           "[fd00::1]:443",
		"https://[fd00::1]:9443":          "[fd00::1]:9443",
	} {
		id, err := EndpointID(raw)
		require.NoError(t, err, raw)
		assert.Equal(t, want, id, raw)
	}
	for _, bad := range []string{"", "http://vc.example.com/sdk", "https://user:pw@vc.example.com/sdk", "https:///sdk"} {
		_, err := EndpointID(bad)
		assert.Error(t, err, bad)
	}
}

func TestCredentialsAllowEndpoints(t *testing.T) {
	creds := func(endpoints string) Credentials {
		c, err := credentialsFromMap(map[string][]byte{"username": []byte("u"), "password": []byte("p"), "endpoints": []byte(endpoints)})
		require.NoError(t, err)
		return c
	}
	c := creds("https://VC.example.com/sdk\nesx-1.example.com:8443, 10.0.0.5  *.esx.example.org\n[fd00::1]\n")
	assert.Equal(t, []string{"vc.example.com:443", "esx-1.example.com:8443", "10.0.0.5:443", "*.esx.example.org:443", "[fd00::1]:443"}, c.Endpoints)
	for _, ok := range []string{
		"https://vc.example.com/sdk", "https://vc.example.com:443", "https://esx-1.example.com:8443/sdk",
		"https://10.0.0.5/sdk", "https://host-7.esx.example.org/sdk", "https://a.b.esx.example.org/sdk", "https://[fd00::1]/sdk",
	} {
		assert.NoError(t, c.AllowsEndpoint(ok), ok)
	}
	for _, refused := range []string{
		"https://vc.example.com:8443/sdk", "https://esx-1.example.com/sdk", "https://10.0.0.6/sdk", "https://esx.example.org/sdk",
		"https://evil-esx.example.org/sdk", "https://host-7.esx.example.org:8443/sdk", "https://vc.example.com.evil.net/sdk",
	} {
		err := c.AllowsEndpoint(refused)
		var na *EndpointNotAllowedError
		require.ErrorAs(t, err, &na, refused)
		assert.Equal(t, ClassAuth, Classify(err))
		assert.Contains(t, err.Error(), "vc.example.com:443")
	}
	err := creds("").AllowsEndpoint("https://vc.example.com/sdk")
	require.ErrorContains(t, err, "names no endpoint it may be used for")

	for _, bad := range []string{"*", "*.com", "vc.*.example.com", "http://vc.example.com", "https://u:p@vc.example.com", "*.10.0.0.5"} {
		_, err := credentialsFromMap(map[string][]byte{"username": []byte("u"), "password": []byte("p"), "endpoints": []byte(bad)})
		assert.ErrorContains(t, err, "key endpoints", bad)
	}
}

// TestConnectRefusesAnEndpointTheCredentialsDoNotName: credentials that
// name their endpoints (as the transfer pod reads them from the mounted
// Secret) are never sent to another one, whoever connects.
func TestConnectRefusesAnEndpointTheCredentialsDoNotName(t *testing.T) {
	env := newSim(t, vpx, nil)
	creds := env.creds
	creds.Endpoints = []string{"vc.example.com:443"}
	_, err := Connect(testCtx(t), env.ep, creds)
	var na *EndpointNotAllowedError
	require.ErrorAs(t, err, &na)
	creds.Endpoints = []string{strings.TrimPrefix(env.ep.URL, "https://")}
	s, err := Connect(testCtx(t), env.ep, creds)
	require.NoError(t, err)
	require.NoError(t, s.Logout(testCtx(t)))
}
