package vsphere

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// ErrSessionClosed says a call ran on a session that was logged out, for
// example because its Secret changed or the controller is shutting down.
// Classify puts it in ClassTransient: fetch a session again and retry.
var ErrSessionClosed = errors.New("vsphere session was logged out")

// logoutTimeout bounds the logout of a replaced session.
const logoutTimeout = 10 * time.Second

// DefaultSessionIdle is how long a cached session nobody asked for is
// kept: longer than any call made on one (DefaultWaitTimeout), so that a
// session is never logged out under a call.
const DefaultSessionIdle = 30 * time.Minute

// ConnectFunc makes a Session; SessionCache calls it on a miss. It is a
// seam for tests.
type ConnectFunc func(ctx context.Context, ep Endpoint, creds Credentials, opts ...Option) (*Session, error)

// SessionCache reuses one logged-in Session per endpoint and credentials
// Secret. A new resourceVersion of the Secret means new credentials: the old
// session is logged out and a new one made. Each Session re-logs in by
// itself after the server drops it. Close logs every session out.
//
// Sessions are keyed by the Secret's namespace and name as well as the
// endpoint (its identity, EndpointID, so that spellings of one URL share
// one), never by the URL alone: two namespaces pointing at the same
// vCenter with different users must never share a session (and its
// privileges). A session nobody asked for within the idle time is logged
// out and forgotten (Sweep, which the controller runs every minute).
type SessionCache struct {
	connect ConnectFunc
	opts    []Option
	gate    *EndpointGate
	idle    time.Duration
	now     func() time.Time

	mu      sync.Mutex
	closed  bool
	entries map[sessionKey]*cacheEntry
	kept    map[string]keptCredentials // by owner, see Keep
}

type sessionKey struct {
	endpoint, datacenter string
	insecure             bool
	secret               string // namespace/name
}

type cacheEntry struct {
	mu       sync.Mutex // serialises connects for one key
	session  *Session
	version  string
	lastUsed time.Time // guarded by SessionCache.mu
}

// NewSessionCache returns an empty cache whose sessions are made with the
// given options (for example WithCallTimeout).
// Its sessions report to the cache's endpoint gate (see Enter).
func NewSessionCache(opts ...Option) *SessionCache {
	return &SessionCache{connect: ConnectWithOptions, opts: opts, idle: DefaultSessionIdle, now: time.Now,
		gate: NewEndpointGate(DefaultEndpointConcurrency, nil), entries: map[sessionKey]*cacheEntry{}}
}

// WithEndpointLimit sets how many operations run against one endpoint at
// once (zero or less: no limit).
func (c *SessionCache) WithEndpointLimit(n int) *SessionCache {
	c.gate = NewEndpointGate(n, c.gate.now)
	return c
}

// Enter starts an operation against the endpoint of url through the
// cache's gate, or refuses it at once when the endpoint runs its limit of
// operations or does not answer (see EndpointGate). Call leave when the
// operation ended.
func (c *SessionCache) Enter(url string) (leave func(), err error) { return c.gate.Enter(url) }

// WithIdleExpiry sets how long an unused session is kept (zero or less
// keeps DefaultSessionIdle) and the clock that measures it (nil: the real
// one).
func (c *SessionCache) WithIdleExpiry(idle time.Duration, now func() time.Time) *SessionCache {
	if idle > 0 {
		c.idle = idle
	}
	if now != nil {
		c.now = now
	}
	return c
}

// WithConnectFunc replaces how the cache connects (for tests).
func (c *SessionCache) WithConnectFunc(f ConnectFunc) *SessionCache {
	c.connect = f
	return c
}

// Get returns the session for the endpoint and the credentials Secret,
// connecting when there is none or the Secret's resourceVersion changed.
// The Secret must name the endpoint (KeyEndpoints): otherwise nothing is
// sent to it and the error is an *EndpointNotAllowedError.
func (c *SessionCache) Get(ctx context.Context, ep Endpoint, secret *corev1.Secret) (*Session, error) {
	if secret == nil {
		return nil, errors.New("getting vsphere session: no credentials secret given")
	}
	if err := CheckSecretEndpoint(secret, ep.URL); err != nil {
		return nil, err
	}
	key, err := keyOf(ep, secret.Namespace+"/"+secret.Name)
	if err != nil {
		return nil, err
	}
	e, err := c.entry(key)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.session != nil && e.version == secret.ResourceVersion && !e.session.isLoggedOut() {
		return e.session, nil
	}
	creds, err := CredentialsFromSecret(secret)
	if err != nil {
		return nil, err
	}
	return c.connectEntry(ctx, key, e, ep, creds, secret.ResourceVersion)
}

// CheckSecretEndpoint checks, before any connection, that the credentials
// Secret names the endpoint of url among those it may be used for
// (KeyEndpoints); the error is an *EndpointNotAllowedError naming the
// Secret, or the Secret's own problem.
func CheckSecretEndpoint(secret *corev1.Secret, url string) error {
	creds, err := CredentialsFromSecret(secret)
	if err != nil {
		return err
	}
	err = creds.AllowsEndpoint(url)
	var na *EndpointNotAllowedError
	if errors.As(err, &na) {
		na.SecretNamespace, na.SecretName = secret.Namespace, secret.Name
	}
	return err
}

// keyOf is the cache key of an endpoint and a Secret (namespace/name).
func keyOf(ep Endpoint, secret string) (sessionKey, error) {
	id, err := EndpointID(ep.URL)
	if err != nil {
		return sessionKey{}, fmt.Errorf("getting vsphere session: %w", err)
	}
	return sessionKey{endpoint: id, datacenter: ep.Datacenter, insecure: ep.InsecureSkipVerify, secret: secret}, nil
}

// entry is the cache entry of key, made when missing, marked used now.
func (c *SessionCache) entry(key sessionKey) (*cacheEntry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, fmt.Errorf("getting vsphere session for %s: %w", key.endpoint, ErrSessionClosed)
	}
	e := c.entries[key]
	if e == nil {
		e = &cacheEntry{}
		c.entries[key] = e
	}
	e.lastUsed = c.now()
	return e, nil
}

// connectEntry replaces e's session (logging the old one out) with a new
// one made with creds, recorded as of the Secret's version. e.mu is held.
func (c *SessionCache) connectEntry(ctx context.Context, key sessionKey, e *cacheEntry, ep Endpoint, creds Credentials, version string) (*Session, error) {
	logger := klog.FromContext(ctx).WithValues("endpoint", key.endpoint, "secret", key.secret)
	if old := e.session; old != nil {
		logger.V(2).Info("Credentials changed, replacing the vSphere session", "oldVersion", e.version, "newVersion", version)
		e.session = nil
		logoutQuietly(ctx, old, logger)
	}
	s, err := c.connect(ctx, ep, creds, append(slices.Clone(c.opts), WithGate(c.gate))...)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		// Close ran while we connected: do not leak the new session.
		logoutQuietly(ctx, s, logger)
		return nil, fmt.Errorf("getting vsphere session for %s: %w", key.endpoint, ErrSessionClosed)
	}
	e.session, e.version = s, version
	return s, nil
}

// logoutQuietly logs s out within logoutTimeout, even when ctx is done,
// and only logs a failure.
func logoutQuietly(ctx context.Context, s *Session, logger klog.Logger) {
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), logoutTimeout)
	defer cancel()
	if err := s.Logout(lctx); err != nil {
		logger.V(1).Info("Logging out a vSphere session failed", "err", err.Error())
	}
}

// Len returns how many sessions the cache holds.
func (c *SessionCache) Len() int {
	c.mu.Lock()
	entries := make([]*cacheEntry, 0, len(c.entries))
	for _, e := range c.entries {
		entries = append(entries, e)
	}
	c.mu.Unlock()
	n := 0
	for _, e := range entries {
		e.mu.Lock()
		if e.session != nil {
			n++
		}
		e.mu.Unlock()
	}
	return n
}

// Close logs every session out, for a clean shutdown. Get fails afterwards.
// It returns the logout errors joined, naming each endpoint.
func (c *SessionCache) Close(ctx context.Context) error {
	c.mu.Lock()
	c.closed = true
	entries := c.entries
	c.entries = map[sessionKey]*cacheEntry{}
	c.kept = nil
	c.mu.Unlock()

	keys := make([]sessionKey, 0, len(entries))
	for k := range entries {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].endpoint+keys[i].secret < keys[j].endpoint+keys[j].secret })
	var errs []error
	for _, k := range keys {
		e := entries[k]
		e.mu.Lock()
		s := e.session
		e.session = nil
		e.mu.Unlock()
		if s == nil {
			continue
		}
		if err := s.Logout(ctx); err != nil {
			errs = append(errs, fmt.Errorf("closing session for secret %s: %w", k.secret, err))
		}
	}
	return errors.Join(errs...)
}

// Sweep logs out and forgets the sessions nobody asked for within the
// idle time.
func (c *SessionCache) Sweep(ctx context.Context) {
	c.mu.Lock()
	var expired []*cacheEntry
	now := c.now()
	for k, e := range c.entries {
		if now.Sub(e.lastUsed) > c.idle {
			expired = append(expired, e)
			delete(c.entries, k)
		}
	}
	c.mu.Unlock()
	for _, e := range expired {
		e.mu.Lock()
		s := e.session
		e.session = nil
		e.mu.Unlock()
		if s != nil {
			logoutQuietly(ctx, s, klog.FromContext(ctx).WithValues("endpoint", s.url.String(), "idle", true))
		}
	}
}

func (s *Session) isLoggedOut() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loggedOut
}
