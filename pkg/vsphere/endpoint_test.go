package vsphere

import (
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
