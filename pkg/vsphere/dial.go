package vsphere

import (
	"context"
	"crypto/sha1" //nolint:gosec // vSphere prints SHA-1 thumbprints; a user may give one
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"time"
)

// Bounds of one connection to an endpoint, each within the caller's
// context: a vCenter that does not answer, or accepts connections and
// never completes the handshake, fails the call in seconds, not at the
// call's own deadline, and leaves nothing behind.
const (
	// DefaultDialTimeout bounds the TCP connect.
	DefaultDialTimeout = 10 * time.Second
	// DefaultTLSHandshakeTimeout bounds the TLS handshake after it.
	DefaultTLSHandshakeTimeout = 10 * time.Second
)

// DialError says a connection to an endpoint could not be made (TCP
// connect or TLS handshake, certificate checks aside): the endpoint is
// unreachable or stalled. Classify puts it in ClassTransient.
type DialError struct {
	// Addr is the host:port dialled.
	Addr string
	// Err is the cause.
	Err error
}

// Error implements error.
func (e *DialError) Error() string { return fmt.Sprintf("connecting to %s: %v", e.Addr, e.Err) }

// Unwrap returns the cause.
func (e *DialError) Unwrap() error { return e.Err }

// CertificateError says the endpoint's certificate was not trusted:
// neither verified against the CA bundle (or the system's roots) nor
// matching the thumbprint. Classify puts it in ClassPermanent.
type CertificateError struct {
	// Addr is the host:port dialled.
	Addr string
	// Err is the verification failure.
	Err error
}

// Error implements error.
func (e *CertificateError) Error() string {
	return fmt.Sprintf("the certificate of %s is not trusted: %v", e.Addr, e.Err)
}

// Unwrap returns the cause.
func (e *CertificateError) Unwrap() error { return e.Err }

// tlsDialer makes the TLS connections of one endpoint's HTTP transport.
// It replaces govmomi's, whose tls.Dial ignores the context and has no
// timeout at all: an endpoint that accepts and then stalls kept every
// attempt's goroutine and socket for as long as it held them.
//
// It verifies as govmomi does: the certificate chain against roots (nil:
// the system's) and the host name, and, when that fails and a thumbprint
// is known, the leaf certificate's SHA-256 or SHA-1 thumbprint instead.
type tlsDialer struct {
	insecure   bool
	roots      *x509.CertPool
	thumbprint string // uppercase hex pairs joined by colons
	dial       time.Duration
	handshake  time.Duration
}

// DialTLSContext is an http.Transport's DialTLSContext.
func (d *tlsDialer) DialTLSContext(ctx context.Context, network, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, d.dial+d.handshake)
	defer cancel()
	raw, err := (&net.Dialer{Timeout: d.dial, KeepAlive: 30 * time.Second}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, &DialError{Addr: addr, Err: err}
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	hctx, hcancel := context.WithTimeout(ctx, d.handshake)
	defer hcancel()
	conn := tls.Client(raw, &tls.Config{
		ServerName:         host,
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, //nolint:gosec // verified below, in VerifyConnection
		VerifyConnection:   func(cs tls.ConnectionState) error { return d.verify(addr, host, cs) },
	})
	if err := conn.HandshakeContext(hctx); err != nil {
		_ = raw.Close()
		var cerr *CertificateError
		if errors.As(err, &cerr) {
			return nil, cerr
		}
		return nil, &DialError{Addr: addr, Err: err}
	}
	return conn, nil
}

// verify checks the certificate of the server at addr (see tlsDialer).
func (d *tlsDialer) verify(addr, host string, cs tls.ConnectionState) error {
	if d.insecure {
		return nil
	}
	if len(cs.PeerCertificates) == 0 {
		return &CertificateError{Addr: addr, Err: errors.New("no certificate presented")}
	}
	leaf := cs.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := leaf.Verify(x509.VerifyOptions{Roots: d.roots, Intermediates: inter, DNSName: host})
	if err == nil {
		return nil
	}
	if d.thumbprint == "" {
		return &CertificateError{Addr: addr, Err: err}
	}
	s256, s1 := sha256.Sum256(leaf.Raw), sha1.Sum(leaf.Raw) //nolint:gosec
	if d.thumbprint == hexPairs(s256[:]) || d.thumbprint == hexPairs(s1[:]) {
		return nil
	}
	return &CertificateError{Addr: addr, Err: fmt.Errorf("thumbprint does not match %s", d.thumbprint)}
}
