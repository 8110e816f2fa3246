package vsphere

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// ErrNoKeptCredentials says no credentials are kept for an owner (see
// SessionCache.Keep).
var ErrNoKeptCredentials = errors.New("no credentials kept in memory")

// keptCredentials are credentials an owner may use after their Secret is
// gone: where they came from, and for which endpoint.
type keptCredentials struct {
	key     sessionKey
	ep      Endpoint
	creds   Credentials
	version string
}

// Keep remembers, in memory only, the credentials of secret for owner (a
// migration that stopped its source), checked against the endpoint first,
// so that owner can still reach ep once the Secret is gone: the namespace
// controller deletes it when the migration's namespace is deleted, and a
// Terminating namespace accepts no new one, while the source must still be
// powered on again. Forget drops them; nothing else does, and they are
// never written anywhere.
func (c *SessionCache) Keep(owner string, ep Endpoint, secret *corev1.Secret) error {
	if err := CheckSecretEndpoint(secret, ep.URL); err != nil {
		return err
	}
	creds, err := CredentialsFromSecret(secret)
	if err != nil {
		return err
	}
	key, err := keyOf(ep, secret.Namespace+"/"+secret.Name)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.kept == nil {
		c.kept = map[string]keptCredentials{}
	}
	c.kept[owner] = keptCredentials{key: key, ep: ep, creds: creds, version: secret.ResourceVersion}
	return nil
}

// Forget drops the credentials kept for owner.
func (c *SessionCache) Forget(owner string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.kept, owner)
}

// Keeps reports whether credentials are kept for owner.
func (c *SessionCache) Keeps(owner string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.kept[owner]
	return ok
}

// GetKept returns a session for owner at ep made with the credentials kept
// for it: the cached session of their Secret while it is logged in, else a
// new one. It fails with ErrNoKeptCredentials when none are kept for that
// endpoint.
func (c *SessionCache) GetKept(ctx context.Context, owner string, ep Endpoint) (*Session, error) {
	c.mu.Lock()
	k, ok := c.kept[owner]
	c.mu.Unlock()
	if !ok {
		return nil, ErrNoKeptCredentials
	}
	key, err := keyOf(ep, k.key.secret)
	if err != nil {
		return nil, err
	}
	if key != k.key {
		return nil, fmt.Errorf("credentials kept for %s are for endpoint %s: %w", owner, k.key.endpoint, ErrNoKeptCredentials)
	}
	e, err := c.entry(key)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.session != nil && !e.session.isLoggedOut() {
		return e.session, nil
	}
	return c.connectEntry(ctx, key, e, ep, k.creds, k.version)
}
