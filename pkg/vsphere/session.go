package vsphere

import (
	"context"
	"errors"
	"fmt"
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

// ConnectFunc makes a Session; SessionCache calls it on a miss. It is a
// seam for tests.
type ConnectFunc func(ctx context.Context, ep Endpoint, creds Credentials, opts ...Option) (*Session, error)

// SessionCache reuses one logged-in Session per endpoint and credentials
// Secret. A new resourceVersion of the Secret means new credentials: the old
// session is logged out and a new one made. Each Session re-logs in by
// itself after the server drops it. Close logs every session out.
//
// Sessions are keyed by the Secret's namespace and name as well as the
// endpoint, never by the URL alone: two namespaces pointing at the same
// vCenter with different users must never share a session (and its
// privileges).
type SessionCache struct {
	connect ConnectFunc
	opts    []Option

	mu      sync.Mutex
	closed  bool
	entries map[sessionKey]*cacheEntry
}

type sessionKey struct {
	url, datacenter string
	insecure        bool
	secret          string // namespace/name
}

type cacheEntry struct {
	mu      sync.Mutex // serialises connects for one key
	session *Session
	version string
}

// NewSessionCache returns an empty cache whose sessions are made with the
// given options (for example WithCallTimeout).
func NewSessionCache(opts ...Option) *SessionCache {
	return &SessionCache{connect: ConnectWithOptions, opts: opts, entries: map[sessionKey]*cacheEntry{}}
}

// WithConnectFunc replaces how the cache connects (for tests).
func (c *SessionCache) WithConnectFunc(f ConnectFunc) *SessionCache {
	c.connect = f
	return c
}

// Get returns the session for the endpoint and the credentials Secret,
// connecting when there is none or the Secret's resourceVersion changed.
func (c *SessionCache) Get(ctx context.Context, ep Endpoint, secret *corev1.Secret) (*Session, error) {
	if secret == nil {
		return nil, errors.New("getting vsphere session: no credentials secret given")
	}
	u, err := NormalizeURL(ep.URL)
	if err != nil {
		return nil, fmt.Errorf("getting vsphere session: %w", err)
	}
	key := sessionKey{url: u.String(), datacenter: ep.Datacenter, insecure: ep.InsecureSkipVerify,
		secret: secret.Namespace + "/" + secret.Name}

	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, fmt.Errorf("getting vsphere session for %s: %w", key.url, ErrSessionClosed)
	}
	e := c.entries[key]
	if e == nil {
		e = &cacheEntry{}
		c.entries[key] = e
	}
	c.mu.Unlock()

	e.mu.Lock()
	defer e.mu.Unlock()
	if e.session != nil && e.version == secret.ResourceVersion && !e.session.isLoggedOut() {
		return e.session, nil
	}
	logger := klog.FromContext(ctx).WithValues("endpoint", key.url, "secret", key.secret)
	if old := e.session; old != nil {
		logger.V(2).Info("Credentials changed, replacing the vSphere session", "oldVersion", e.version, "newVersion", secret.ResourceVersion)
		e.session = nil
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), logoutTimeout)
		if err := old.Logout(lctx); err != nil {
			logger.V(1).Info("Logging out the replaced vSphere session failed", "err", err.Error())
		}
		cancel()
	}
	creds, err := CredentialsFromSecret(secret)
	if err != nil {
		return nil, err
	}
	s, err := c.connect(ctx, ep, creds, c.opts...)
	if err != nil {
		return nil, err
	}

	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		// Close ran while we connected: do not leak the new session.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), logoutTimeout)
		_ = s.Logout(lctx)
		cancel()
		return nil, fmt.Errorf("getting vsphere session for %s: %w", key.url, ErrSessionClosed)
	}
	e.session, e.version = s, secret.ResourceVersion
	return s, nil
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
	c.mu.Unlock()

	keys := make([]sessionKey, 0, len(entries))
	for k := range entries {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].url+keys[i].secret < keys[j].url+keys[j].secret })
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

func (s *Session) isLoggedOut() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loggedOut
}
