package vsphere

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// TestKeptCredentials: credentials kept for an owner reach the endpoint
// once their Secret is gone, through the Secret's session while it lives
// and a new one after; nothing is kept for a Secret not bound to the
// endpoint, and nothing once forgotten.
func TestKeptCredentials(t *testing.T) {
	env := newSim(t, vpx, nil)
	ctx := testCtx(t)
	cache := NewSessionCache()
	secret := env.secret("apps", "vc", "7")

	_, err := cache.GetKept(ctx, "apps/web-01", env.ep)
	require.ErrorIs(t, err, ErrNoKeptCredentials)

	require.NoError(t, cache.Keep("apps/web-01", env.ep, secret))
	assert.True(t, cache.Keeps("apps/web-01"))
	s1, err := cache.Get(ctx, env.ep, secret)
	require.NoError(t, err)
	kept, err := cache.GetKept(ctx, "apps/web-01", env.ep)
	require.NoError(t, err)
	assert.Same(t, s1, kept, "the Secret's session is reused")

	// The session ends (an idle sweep, a logout): a new one from memory.
	require.NoError(t, s1.Logout(ctx))
	again, err := cache.GetKept(ctx, "apps/web-01", env.ep)
	require.NoError(t, err)
	assert.NotSame(t, s1, again)
	_, err = FindVM(ctx, again, v1alpha1.VMSelector{MoRef: firstVM(t, again).ref.Value})
	require.NoError(t, err)

	_, err = cache.GetKept(ctx, "apps/web-01", Endpoint{URL: "https://other.example.com/sdk"})
	require.ErrorIs(t, err, ErrNoKeptCredentials, "kept credentials went to another endpoint")

	unbound := env.secret("apps", "other", "1")
	unbound.Data["endpoints"] = []byte("vc.example.com")
	var na *EndpointNotAllowedError
	require.ErrorAs(t, cache.Keep("apps/web-02", env.ep, unbound), &na)
	assert.False(t, cache.Keeps("apps/web-02"))

	cache.Forget("apps/web-01")
	_, err = cache.GetKept(ctx, "apps/web-01", env.ep)
	require.ErrorIs(t, err, ErrNoKeptCredentials)
	require.NoError(t, cache.Close(ctx))
}
