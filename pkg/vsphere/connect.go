package vsphere

import (
	"context"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/soap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// Keys of the credentials Secret (and file names in a mounted Secret
// directory).
const (
	// KeyUsername holds the vSphere user name.
	KeyUsername = "username"
	// KeyPassword holds the vSphere password.
	KeyPassword = "password"
	// KeyCACert holds an optional PEM bundle of CA certificates that sign the
	// endpoint's certificate.
	KeyCACert = "ca.crt"
	// KeyThumbprint holds an optional SHA-1 or SHA-256 thumbprint of the
	// endpoint's certificate.
	KeyThumbprint = "thumbprint"
)

// credentialKeys are the keys of a credentials Secret (or files of a
// mounted one) that are read.
var credentialKeys = []string{KeyUsername, KeyPassword, KeyCACert, KeyThumbprint, KeyEndpoints}

// Defaults for the per-call deadlines of a Session.
const (
	// DefaultCallTimeout bounds every SOAP call that has no earlier deadline.
	DefaultCallTimeout = time.Minute
	// DefaultWaitTimeout bounds a long poll for property updates (task
	// completion) that has no earlier deadline.
	DefaultWaitTimeout = 15 * time.Minute
)

// Credentials log in to a vSphere endpoint and verify its certificate.
// Formatting a Credentials value with fmt never prints the password.
type Credentials struct {
	// Username is the vSphere user, for example administrator@vsphere.local.
	Username string
	// Password of the user.
	Password string
	// CACertPEM is an optional PEM bundle that verifies the endpoint.
	CACertPEM []byte
	// Thumbprint is an optional SHA-1 or SHA-256 thumbprint of the endpoint's
	// certificate, in any common spelling (colons or not, any case).
	Thumbprint string
	// Endpoints are the endpoints the credentials may be sent to
	// (KeyEndpoints), normalised: "host:port" or "*.domain:port". The
	// controller sends none that names none; Connect checks them when
	// there are some.
	Endpoints []string
}

// String describes the credentials without the password.
func (c Credentials) String() string {
	return fmt.Sprintf("Credentials{Username: %q, Password: %s, CACertPEM: %d bytes, Thumbprint: %q, Endpoints: %q}",
		c.Username, redacted(c.Password), len(c.CACertPEM), c.Thumbprint, c.Endpoints)
}

// GoString describes the credentials without the password (for %#v).
func (c Credentials) GoString() string { return c.String() }

// MarshalLog gives structured loggers (logr, klog) a copy without the
// password.
func (c Credentials) MarshalLog() any {
	return struct {
		Username   string
		Password   string
		CACertPEM  int
		Thumbprint string
		Endpoints  []string
	}{c.Username, redacted(c.Password), len(c.CACertPEM), c.Thumbprint, c.Endpoints}
}

// MarshalJSON writes the credentials without the password, so they cannot
// leak through an object dumped as JSON.
func (c Credentials) MarshalJSON() ([]byte, error) {
	return json.Marshal(c.MarshalLog())
}

func redacted(s string) string {
	if s == "" {
		return `""`
	}
	return "<redacted>"
}

// Endpoint names a vCenter or ESXi SDK endpoint.
type Endpoint struct {
	// URL of the endpoint, for example https://vcenter.example.com/sdk. The
	// /sdk path is appended when missing.
	URL string
	// Datacenter is the datacenter to work in; empty means the only one.
	Datacenter string
	// InsecureSkipVerify turns TLS verification off. Only for tests and labs.
	InsecureSkipVerify bool
}

// CredentialsFromSecret reads Credentials from a Secret with the keys
// username and password, and optionally ca.crt, thumbprint and endpoints
// (which the controller requires: see SessionCache.Get). Trailing
// newlines are trimmed from username, password and thumbprint. The error
// names missing keys, never values.
func CredentialsFromSecret(secret *corev1.Secret) (Credentials, error) {
	if secret == nil {
		return Credentials{}, errors.New("reading vsphere credentials: no secret given")
	}
	data := make(map[string][]byte, len(secret.Data)+len(secret.StringData))
	for k, v := range secret.StringData {
		data[k] = []byte(v)
	}
	for k, v := range secret.Data {
		data[k] = v
	}
	creds, err := credentialsFromMap(data)
	if err != nil {
		return Credentials{}, fmt.Errorf("reading vsphere credentials from secret %s/%s: %w", secret.Namespace, secret.Name, err)
	}
	return creds, nil
}

// LoadCredentialsDir reads Credentials from a mounted Secret directory: one
// file per key (username, password, optional ca.crt, thumbprint and
// endpoints).
func LoadCredentialsDir(dir string) (Credentials, error) {
	data := map[string][]byte{}
	for _, key := range credentialKeys {
		b, err := os.ReadFile(filepath.Join(dir, key))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			// The path error names the file, not its content.
			return Credentials{}, fmt.Errorf("reading vsphere credentials from %s: %w", dir, err)
		}
		data[key] = b
	}
	creds, err := credentialsFromMap(data)
	if err != nil {
		return Credentials{}, fmt.Errorf("reading vsphere credentials from %s: %w", dir, err)
	}
	return creds, nil
}

func credentialsFromMap(data map[string][]byte) (Credentials, error) {
	var missing []string
	for _, key := range []string{KeyUsername, KeyPassword} {
		if len(trimNewline(data[key])) == 0 {
			missing = append(missing, key)
		}
	}
	if len(missing) > 0 {
		return Credentials{}, fmt.Errorf("missing or empty keys: %s", strings.Join(missing, ", "))
	}
	creds := Credentials{
		Username: string(trimNewline(data[KeyUsername])),
		Password: string(trimNewline(data[KeyPassword])),
	}
	if ca := data[KeyCACert]; len(ca) > 0 {
		if _, err := certPool(ca); err != nil {
			return Credentials{}, fmt.Errorf("key %s: %w", KeyCACert, err)
		}
		creds.CACertPEM = ca
	}
	if tp := strings.TrimSpace(string(data[KeyThumbprint])); tp != "" {
		norm, err := NormalizeThumbprint(tp)
		if err != nil {
			return Credentials{}, fmt.Errorf("key %s: %w", KeyThumbprint, err)
		}
		creds.Thumbprint = norm
	}
	endpoints, err := parseEndpoints(string(data[KeyEndpoints]))
	if err != nil {
		return Credentials{}, fmt.Errorf("key %s: %w", KeyEndpoints, err)
	}
	creds.Endpoints = endpoints
	return creds, nil
}

func trimNewline(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

func certPool(pem []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("no PEM certificate found")
	}
	return pool, nil
}

// NormalizeThumbprint turns a SHA-1 (20 bytes) or SHA-256 (32 bytes)
// certificate thumbprint in any common spelling ("sha256:ab cd..", "AB:CD..",
// "abcd..") into the form govmomi compares against: uppercase hex pairs
// joined by colons.
func NormalizeThumbprint(s string) (string, error) {
	t := strings.TrimSpace(s)
	lower := strings.ToLower(t)
	for _, p := range []string{"sha256=", "sha-256=", "sha1=", "sha-1=", "sha256:", "sha-256:", "sha1:", "sha-1:"} {
		if strings.HasPrefix(lower, p) {
			t = t[len(p):]
			break
		}
	}
	t = strings.Map(func(r rune) rune {
		switch r {
		case ':', ' ', '\t', '\n', '\r', '-':
			return -1
		}
		return r
	}, t)
	raw, err := hex.DecodeString(t)
	if err != nil {
		return "", errors.New("thumbprint is not hexadecimal")
	}
	if len(raw) != 20 && len(raw) != 32 {
		return "", fmt.Errorf("thumbprint has %d bytes, want 20 (SHA-1) or 32 (SHA-256)", len(raw))
	}
	return hexPairs(raw), nil
}

// hexPairs spells bytes as vSphere spells a thumbprint: uppercase hex
// pairs joined by colons.
func hexPairs(b []byte) string {
	pairs := make([]string, len(b))
	for i, x := range b {
		pairs[i] = fmt.Sprintf("%02X", x)
	}
	return strings.Join(pairs, ":")
}

// NormalizeURL parses an endpoint URL, requires https and a host, drops any
// query or fragment, and appends /sdk when the path does not end in it. It
// refuses URLs that carry credentials (user:password@host).
func NormalizeURL(raw string) (*url.URL, error) {
	s := strings.TrimSpace(raw)
	if s == "" {
		return nil, errors.New("endpoint url is empty")
	}
	if !strings.Contains(s, "://") {
		s = "https://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		// url.Error quotes the input, which could hold a password: keep only the cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("parsing endpoint url: %w", err)
	}
	if u.User != nil {
		return nil, fmt.Errorf("endpoint url %s must not carry credentials: put them in the secret", u.Redacted())
	}
	if u.Scheme != "https" {
		return nil, fmt.Errorf("endpoint url %s: scheme must be https", u.Redacted())
	}
	if u.Hostname() == "" {
		return nil, fmt.Errorf("endpoint url %s has no host", u.Redacted())
	}
	u.RawQuery, u.Fragment, u.RawFragment = "", "", ""
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	if !strings.HasSuffix(u.Path, vim25.Path) {
		u.Path += vim25.Path
	}
	return u, nil
}

// Option tunes a Session made by ConnectWithOptions.
type Option func(*options)

type options struct {
	callTimeout time.Duration
	waitTimeout time.Duration
	dial        time.Duration
	handshake   time.Duration
	gate        *EndpointGate
	wrap        []func(soap.RoundTripper) soap.RoundTripper
}

// WithCallTimeout bounds each SOAP call that has no earlier deadline
// (default DefaultCallTimeout). Zero or less keeps the default.
func WithCallTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.callTimeout = d
		}
	}
}

// WithWaitTimeout bounds each long poll for property updates, the call task
// waits use, when it has no earlier deadline (default DefaultWaitTimeout).
func WithWaitTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.waitTimeout = d
		}
	}
}

// WithDialTimeouts bounds the TCP connect and the TLS handshake of each
// connection (defaults DefaultDialTimeout, DefaultTLSHandshakeTimeout);
// zero or less keeps a default.
func WithDialTimeouts(dial, handshake time.Duration) Option {
	return func(o *options) {
		if dial > 0 {
			o.dial = dial
		}
		if handshake > 0 {
			o.handshake = handshake
		}
	}
}

// WithRoundTripper wraps the session's SOAP round tripper, outermost, for
// example to count or trace calls. The wrapper sees every call, including
// re-logins after a session expiry.
func WithRoundTripper(wrap func(soap.RoundTripper) soap.RoundTripper) Option {
	return func(o *options) {
		if wrap != nil {
			o.wrap = append(o.wrap, wrap)
		}
	}
}

// Session is a logged-in connection to one vSphere endpoint. It re-logs in
// by itself when the server reports the session gone (NotAuthenticated), and
// puts a deadline on every SOAP call. It is safe for concurrent use.
type Session struct {
	endpoint Endpoint
	url      *url.URL
	creds    Credentials
	opts     options

	soap   *soap.Client
	client *vim25.Client
	// login uses the raw SOAP client, so a re-login never recurses.
	login *session.Manager

	mu        sync.Mutex
	loggedOut bool
	relogins  int
	dc        *object.Datacenter

	// names is the last listing of the datacenter's VM names (findVMByName).
	names vmNames
	// now is the clock of that listing's age; tests replace it.
	now func() time.Time
}

// Connect logs in to a vSphere endpoint. TLS is verified against
// creds.CACertPEM, then against creds.Thumbprint, then against the system
// roots; only ep.InsecureSkipVerify turns verification off.
func Connect(ctx context.Context, ep Endpoint, creds Credentials) (*Session, error) {
	return ConnectWithOptions(ctx, ep, creds)
}

// ConnectWithOptions is Connect with options for deadlines and round-trip
// wrappers.
func ConnectWithOptions(ctx context.Context, ep Endpoint, creds Credentials, opts ...Option) (*Session, error) {
	o := options{callTimeout: DefaultCallTimeout, waitTimeout: DefaultWaitTimeout,
		dial: DefaultDialTimeout, handshake: DefaultTLSHandshakeTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	u, err := NormalizeURL(ep.URL)
	if err != nil {
		return nil, fmt.Errorf("connecting to vsphere: %w", err)
	}
	if creds.Username == "" || creds.Password == "" {
		return nil, fmt.Errorf("connecting to %s: credentials need a username and a password", u)
	}
	if len(creds.Endpoints) > 0 {
		// Credentials that name their endpoints go to no other, whoever
		// connects (the transfer pod reads them from the mounted Secret).
		if err := creds.AllowsEndpoint(u.String()); err != nil {
			return nil, err
		}
	}
	logger := klog.FromContext(ctx).WithValues("endpoint", u.String())

	sc, err := soapClient(u, ep, creds, o, logger)
	if err != nil {
		return nil, err
	}
	s := &Session{endpoint: ep, url: u, creds: creds, opts: o, soap: sc, now: time.Now}

	// Layers, outermost first: caller wrappers, the endpoint gate's
	// report, per-call deadline, re-login, the SOAP client.
	var rt soap.RoundTripper = sc
	rt = &reloginRoundTripper{s: s, next: rt}
	rt = o.outer(u, rt)

	client, err := vimClient(ctx, sc, rt)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", u, err)
	}
	s.client = client

	// The login manager goes through the same layers but the re-login.
	s.login = session.NewManager(&vim25.Client{Client: sc, ServiceContent: client.ServiceContent, RoundTripper: o.outer(u, sc)})

	if err := s.doLogin(ctx); err != nil {
		return nil, err
	}
	logger.V(2).Info("Logged in to vSphere", "user", creds.Username, "apiType", client.ServiceContent.About.ApiType,
		"version", client.ServiceContent.About.Version)
	return s, nil
}

// outer puts the layers every call of a session goes through around next:
// the per-call deadline, the endpoint gate's report, the caller wrappers
// (outermost).
func (o options) outer(u *url.URL, next soap.RoundTripper) soap.RoundTripper {
	rt := soap.RoundTripper(&deadlineRoundTripper{call: o.callTimeout, wait: o.waitTimeout, next: next})
	if o.gate != nil {
		id, err := EndpointID(u.String())
		if err == nil {
			rt = &gateRoundTripper{gate: o.gate, endpoint: id, next: rt}
		}
	}
	for _, w := range o.wrap {
		rt = w(rt)
	}
	return rt
}

// soapClient is the SOAP client of an endpoint, verifying TLS against
// creds' CA bundle and thumbprint unless insecureSkipVerify. Its TLS
// connections are made by a tlsDialer, bounded and within the call's
// context.
func soapClient(u *url.URL, ep Endpoint, creds Credentials, o options, logger klog.Logger) (*soap.Client, error) {
	sc := soap.NewClient(u, ep.InsecureSkipVerify)
	d := &tlsDialer{insecure: ep.InsecureSkipVerify, dial: o.dial, handshake: o.handshake}
	sc.DefaultTransport().DialTLSContext = d.DialTLSContext
	if ep.InsecureSkipVerify {
		logger.Info("TLS verification of the vSphere endpoint is off (insecureSkipVerify)")
		return sc, nil
	}
	if len(creds.CACertPEM) > 0 {
		pool, err := certPool(creds.CACertPEM)
		if err != nil {
			return nil, fmt.Errorf("connecting to %s: ca.crt: %w", u, err)
		}
		sc.DefaultTransport().TLSClientConfig.RootCAs = pool
		d.roots = pool
	}
	if creds.Thumbprint != "" {
		tp, err := NormalizeThumbprint(creds.Thumbprint)
		if err != nil {
			return nil, fmt.Errorf("connecting to %s: %w", u, err)
		}
		// Kept in the client too, for what reads it there (NFC leases).
		sc.SetThumbprint(u.Host, tp)
		d.thumbprint = tp
	}
	return sc, nil
}

// vimClient is the vim25 client over rt, with the service content read.
func vimClient(ctx context.Context, sc *soap.Client, rt soap.RoundTripper) (*vim25.Client, error) {
	client, err := vim25.NewClient(ctx, rt)
	if err != nil {
		return nil, err
	}
	// vim25.NewClient only fills Client when given the bare *soap.Client.
	client.Client = sc
	if client.Namespace == "" {
		client.Namespace = "urn:" + vim25.Namespace
	}
	if client.Version == "" {
		client.Version = vim25.Version
	}
	return client, nil
}

func (s *Session) doLogin(ctx context.Context) error {
	if err := s.login.Login(ctx, url.UserPassword(s.creds.Username, s.creds.Password)); err != nil {
		return fmt.Errorf("logging in to %s as %q: %w", s.url, s.creds.Username, err)
	}
	return nil
}

// Client returns the logged-in vim25 client. Its embedded *soap.Client
// carries the session cookie for datastore HTTP transfers.
func (s *Session) Client() *vim25.Client { return s.client }

// URL returns the normalised endpoint URL (with /sdk).
func (s *Session) URL() *url.URL {
	u := *s.url
	return &u
}

// IsVC says whether the endpoint is a vCenter (not a standalone ESXi host).
func (s *Session) IsVC() bool { return s.client.IsVC() }

// Relogins returns how many times the session logged in again after the
// server dropped it.
func (s *Session) Relogins() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.relogins
}

// Datacenter returns the endpoint's datacenter named in the Endpoint, or the
// only one when none is named (ha-datacenter on a standalone ESXi host).
func (s *Session) Datacenter(ctx context.Context) (*object.Datacenter, error) {
	s.mu.Lock()
	dc := s.dc
	s.mu.Unlock()
	if dc != nil {
		return dc, nil
	}
	finder := find.NewFinder(s.client, false)
	dc, err := finder.DatacenterOrDefault(ctx, s.endpoint.Datacenter)
	if err != nil {
		if s.endpoint.Datacenter == "" {
			names := s.datacenterNames(ctx, finder)
			if len(names) > 1 {
				return nil, fmt.Errorf("finding the datacenter on %s: several exist (%s): name one", s.url, strings.Join(names, ", "))
			}
		}
		return nil, fmt.Errorf("finding datacenter %q on %s: %w", s.endpoint.Datacenter, s.url, err)
	}
	s.mu.Lock()
	s.dc = dc
	s.mu.Unlock()
	return dc, nil
}

func (s *Session) datacenterNames(ctx context.Context, finder *find.Finder) []string {
	dcs, err := finder.DatacenterList(ctx, "*")
	if err != nil {
		return nil
	}
	names := make([]string, 0, len(dcs))
	for _, dc := range dcs {
		names = append(names, dc.InventoryPath)
	}
	sort.Strings(names)
	return names
}

// Logout ends the session on the server. Calling it again is a no-op.
func (s *Session) Logout(ctx context.Context) error {
	s.mu.Lock()
	if s.loggedOut {
		s.mu.Unlock()
		return nil
	}
	s.loggedOut = true
	s.mu.Unlock()
	defer s.soap.CloseIdleConnections()
	if err := s.login.Logout(ctx); err != nil {
		if Classify(err) == ClassAuth {
			// The server already dropped the session.
			return nil
		}
		return fmt.Errorf("logging out of %s: %w", s.url, err)
	}
	klog.FromContext(ctx).V(2).Info("Logged out of vSphere", "endpoint", s.url.String())
	return nil
}

// relogin logs in again after the server reported NotAuthenticated for a
// session that has not been logged out. gen is the relogin count the caller
// saw before its call failed, so concurrent callers log in only once.
func (s *Session) relogin(ctx context.Context, gen int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loggedOut {
		return ErrSessionClosed
	}
	if s.relogins != gen {
		return nil // another caller already logged in again
	}
	if err := s.doLogin(ctx); err != nil {
		return err
	}
	s.relogins++
	klog.FromContext(ctx).V(2).Info("Logged in to vSphere again after the session expired", "endpoint", s.url.String(), "relogins", s.relogins)
	return nil
}
