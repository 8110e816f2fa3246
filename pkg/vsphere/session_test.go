package vsphere

import (
	"context"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/soap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

func (e *simEnv) secret(ns, name, version string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: version},
		Data: map[string][]byte{
			"username":   []byte(e.creds.Username),
			"password":   []byte(e.creds.Password),
			"thumbprint": []byte(e.creds.Thumbprint),
			"endpoints":  []byte(e.ep.URL),
		},
	}
}

func TestSessionCache(t *testing.T) {
	for _, kind := range bothModels {
		t.Run(string(kind), func(t *testing.T) {
			env := newSim(t, kind, nil)
			ctx := testCtx(t)
			var connects atomic.Int32
			cache := NewSessionCache(WithCallTimeout(5 * time.Second)).WithConnectFunc(
				func(ctx context.Context, ep Endpoint, creds Credentials, opts ...Option) (*Session, error) {
					connects.Add(1)
					return ConnectWithOptions(ctx, ep, creds, opts...)
				})

			s1, err := cache.Get(ctx, env.ep, env.secret("team-a", "vc", "1"))
			require.NoError(t, err)
			again, err := cache.Get(ctx, Endpoint{URL: env.ep.URL + "/sdk/"}, env.secret("team-a", "vc", "1"))
			require.NoError(t, err)
			assert.Same(t, s1, again, "same endpoint (spelled differently) and resourceVersion reuse the session")
			assert.EqualValues(t, 1, connects.Load())

			other, err := cache.Get(ctx, env.ep, env.secret("team-b", "vc", "1"))
			require.NoError(t, err)
			assert.NotSame(t, s1, other, "another namespace's secret never shares a session")
			assert.Equal(t, 2, cache.Len())

			// The Secret changed: the old session is logged out, a new one made.
			s2, err := cache.Get(ctx, env.ep, env.secret("team-a", "vc", "2"))
			require.NoError(t, err)
			assert.NotSame(t, s1, s2)
			assert.True(t, s1.isLoggedOut())
			_, err = FindVM(ctx, s2, v1alpha1.VMSelector{MoRef: firstVM(t, s2).ref.Value})
			require.NoError(t, err)
			// A straggler still holding the old session gets a transient error.
			_, err = PowerState(ctx, object.NewVirtualMachine(s1.Client(), firstVM(t, s2).ref))
			require.Error(t, err)
			assert.Equal(t, ClassTransient, Classify(err), err.Error())

			// Missing keys fail with a clear error.
			bad := env.secret("team-c", "vc", "1")
			delete(bad.Data, "password")
			_, err = cache.Get(ctx, env.ep, bad)
			require.ErrorContains(t, err, "missing or empty keys: password")

			require.NoError(t, cache.Close(ctx))
			assert.True(t, s2.isLoggedOut())
			assert.True(t, other.isLoggedOut())
			assert.Equal(t, 0, cache.Len())
			_, err = cache.Get(ctx, env.ep, env.secret("team-a", "vc", "2"))
			require.ErrorIs(t, err, ErrSessionClosed)
		})
	}
}

// terminate ends s's server-side session from a second session, as an
// idle timeout or an administrator would.
func terminate(t *testing.T, env *simEnv, s *Session) {
	t.Helper()
	ctx := testCtx(t)
	us, err := session.NewManager(s.Client()).UserSession(ctx)
	require.NoError(t, err)
	require.NotNil(t, us)
	admin := env.connect(t)
	require.NoError(t, session.NewManager(admin.Client()).TerminateSession(ctx, []string{us.Key}))
}

func TestSessionExpiryReLogsIn(t *testing.T) {
	for _, kind := range bothModels {
		t.Run(string(kind), func(t *testing.T) {
			env := newSim(t, kind, nil)
			var calls atomic.Int32
			s := env.connect(t, WithRoundTripper(func(next soap.RoundTripper) soap.RoundTripper {
				return &countingRoundTripper{next: next, n: &calls}
			}))
			ctx := testCtx(t)
			vm, err := FindVM(ctx, s, v1alpha1.VMSelector{MoRef: firstVM(t, s).ref.Value})
			require.NoError(t, err)

			terminate(t, env, s)
			inv, err := Inventory(ctx, s, vm)
			require.NoError(t, err, "the session expired mid-use and came back")
			assert.NotEmpty(t, inv.Disks)
			assert.Equal(t, 1, s.Relogins())

			// Twice in a row works as well.
			terminate(t, env, s)
			require.NoError(t, PowerOff(ctx, vm))
			assert.Equal(t, 2, s.Relogins())
		})
	}
}

func TestSessionExpiryWithChangedPasswordIsAuth(t *testing.T) {
	env := newSim(t, vpx, nil)
	s := env.connect(t)
	ctx := testCtx(t)
	ref := firstVM(t, s).ref
	terminate(t, env, s)
	// The password changed on the server while the session lived.
	env.model.Service.Listen.User = url.UserPassword(testUser, "rotated-elsewhere")
	_, err := PowerState(ctx, object.NewVirtualMachine(s.Client(), ref))
	require.Error(t, err)
	assert.Equal(t, ClassAuth, Classify(err), err.Error())
	assert.NotContains(t, err.Error(), testPassword)
}

func TestHungCallEndsAtDeadline(t *testing.T) {
	for _, kind := range bothModels {
		t.Run(string(kind), func(t *testing.T) {
			env := newSim(t, kind, func(m *simulator.Model) {
				m.DelayConfig.MethodDelay = map[string]int{"PowerOnVM_Task": 1500}
			})
			s := env.connect(t, WithCallTimeout(200*time.Millisecond))
			ctx := testCtx(t)
			vm := object.NewVirtualMachine(s.Client(), firstVM(t, s).ref)
			require.NoError(t, PowerOff(ctx, vm))

			start := time.Now()
			err := PowerOn(ctx, vm)
			elapsed := time.Since(start)
			require.Error(t, err)
			assert.Less(t, elapsed, time.Second, "the call ended at its deadline, not when the server answered")
			assert.Equal(t, ClassTransient, Classify(err), err.Error())
			assert.ErrorIs(t, err, context.DeadlineExceeded)
		})
	}
}

// countingRoundTripper counts SOAP calls.
type countingRoundTripper struct {
	next soap.RoundTripper
	n    *atomic.Int32
}

func (c *countingRoundTripper) RoundTrip(ctx context.Context, req, res soap.HasFault) error {
	c.n.Add(1)
	return c.next.RoundTrip(ctx, req, res)
}

// TestSessionCacheExpiresIdleSessions: a session nobody asked for within
// the idle time is logged out and forgotten (a user naming a new URL in
// each migration must not grow the cache for ever); one in use stays.
func TestSessionCacheExpiresIdleSessions(t *testing.T) {
	env := newSim(t, vpx, nil)
	ctx := testCtx(t)
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	cache := NewSessionCache(WithCallTimeout(5*time.Second)).WithIdleExpiry(10*time.Minute, func() time.Time { return now })

	busy, err := cache.Get(ctx, env.ep, env.secret("team-a", "vc", "1"))
	require.NoError(t, err)
	idle, err := cache.Get(ctx, env.ep, env.secret("team-b", "vc", "1"))
	require.NoError(t, err)
	require.Equal(t, 2, cache.Len())

	now = now.Add(6 * time.Minute)
	again, err := cache.Get(ctx, env.ep, env.secret("team-a", "vc", "1"))
	require.NoError(t, err)
	require.Same(t, busy, again)
	now = now.Add(5 * time.Minute)
	cache.Sweep(ctx)

	assert.Equal(t, 1, cache.Len(), "the idle session is still cached")
	assert.True(t, idle.isLoggedOut(), "the idle session was not logged out")
	assert.False(t, busy.isLoggedOut(), "the session in use was logged out")
	fresh, err := cache.Get(ctx, env.ep, env.secret("team-b", "vc", "1"))
	require.NoError(t, err)
	assert.NotSame(t, idle, fresh, "an expired session came back")
	require.NoError(t, cache.Close(ctx))
}
