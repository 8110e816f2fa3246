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
