package vsphere

import (
	"fmt"
	"net"
	"strings"
)

// defaultHTTPSPort is the port of an endpoint URL that names none.
const defaultHTTPSPort = "443"

// EndpointID is the identity of an endpoint URL: its host name, lower-cased
// and without a trailing dot, and its port (443 when the URL names none),
// as "host:port" ("[fd00::1]:443" for an IPv6 address). The spellings of
// one endpoint (the scheme's and the host's case, the default port, a
// trailing slash, /sdk or not) have one identity, which is what sessions,
// transfer limits, claims and the endpoints a credentials Secret may be
// used for are keyed by. A host's name and its IP address are two
// identities: what must meet across them (the claim on a source VM, the
// per-host limits) is keyed on the instance UUIDs vSphere reports instead.
func EndpointID(raw string) (string, error) {
	u, err := NormalizeURL(raw)
	if err != nil {
		return "", err
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host == "" {
		return "", fmt.Errorf("endpoint url %s has no host", u.Redacted())
	}
	port := u.Port()
	if port == "" {
		port = defaultHTTPSPort
	}
	return net.JoinHostPort(host, port), nil
}

// KeyEndpoints is the key of the credentials Secret naming the endpoints
// its credentials may be sent to: one per line (or separated by commas or
// spaces), each a URL (https://vc.example.com/sdk), a host with or without
// a port (vc.example.com, 10.0.0.5:8443), or "*.example.com" for every
// host under a domain (port 443 unless given). Ports default to 443.
const KeyEndpoints = "endpoints"

// EndpointNotAllowedError says credentials were not used because their
// Secret does not name the endpoint: nothing was sent to it.
type EndpointNotAllowedError struct {
	// SecretNamespace and SecretName name the credentials Secret, when known.
	SecretNamespace, SecretName string
	// Endpoint is the endpoint's identity (EndpointID).
	Endpoint string
	// Allowed are the endpoints the Secret names, normalised.
	Allowed []string
}

// Error implements error.
func (e *EndpointNotAllowedError) Error() string {
	secret := "the credentials"
	if e.SecretName != "" {
		secret = fmt.Sprintf("credentials Secret %q in namespace %q", e.SecretName, e.SecretNamespace)
	}
	if len(e.Allowed) == 0 {
		return fmt.Sprintf("%s names no endpoint it may be used for (key %q), so it is not sent to %s: add %s to that key (a host, host:port or URL per line)",
			secret, KeyEndpoints, e.Endpoint, e.Endpoint)
	}
	return fmt.Sprintf("%s may be used for %s only (key %q), not for %s: nothing was sent there; if this Secret is meant for that endpoint, add it to the key",
		secret, strings.Join(e.Allowed, ", "), KeyEndpoints, e.Endpoint)
}

// parseEndpoints reads the endpoints a Secret names (KeyEndpoints) into
// their normalised forms: "host:port", or "*.domain:port".
func parseEndpoints(raw string) ([]string, error) {
	var out []string
	for _, entry := range strings.FieldsFunc(raw, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r' }) {
		norm, err := normalizeEndpointPattern(entry)
		if err != nil {
			return nil, fmt.Errorf("entry %q: %w", entry, err)
		}
		out = append(out, norm)
	}
	return out, nil
}

// normalizeEndpointPattern is one entry of KeyEndpoints, normalised.
func normalizeEndpointPattern(entry string) (string, error) {
	if rest, ok := strings.CutPrefix(entry, "*."); ok {
		id, err := EndpointID("https://wildcard." + rest)
		if err != nil {
			return "", err
		}
		host, port, _ := net.SplitHostPort(id)
		domain := strings.TrimPrefix(host, "wildcard.")
		if net.ParseIP(domain) != nil || !strings.Contains(domain, ".") {
			return "", fmt.Errorf("a wildcard must name a domain of at least two labels, such as *.esx.example.com")
		}
		return net.JoinHostPort("*."+domain, port), nil
	}
	if strings.Contains(entry, "*") {
		return "", fmt.Errorf("a wildcard may only be a leading *. of a domain")
	}
	if !strings.Contains(entry, "://") {
		entry = "https://" + entry
	}
	return EndpointID(entry)
}

// AllowsEndpoint checks that url is an endpoint the credentials may be
// sent to (their Secret's KeyEndpoints), and returns an
// *EndpointNotAllowedError when it is not, or when they name none.
func (c Credentials) AllowsEndpoint(url string) error {
	id, err := EndpointID(url)
	if err != nil {
		return err
	}
	host, port, _ := net.SplitHostPort(id)
	for _, allowed := range c.Endpoints {
		if allowed == id {
			return nil
		}
		aHost, aPort, _ := net.SplitHostPort(allowed)
		if suffix, ok := strings.CutPrefix(aHost, "*"); ok && aPort == port && strings.HasSuffix(host, suffix) && len(host) > len(suffix) {
			return nil
		}
	}
	return &EndpointNotAllowedError{Endpoint: id, Allowed: c.Endpoints}
}
