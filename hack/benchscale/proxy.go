package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// request is a kind of API request: its verb and resource (with the
// subresource, "virtualmachinemigrations/status").
type request struct{ verb, resource string }

func (r request) String() string { return r.verb + " " + r.resource }

// countingProxy forwards the controller's API requests to the API server
// and counts them by verb and resource, and separately those answered
// with a conflict (409).
type countingProxy struct {
	upstream *url.URL
	server   *http.Server
	listener net.Listener
	// CA is the proxy's self-signed serving certificate, PEM, for the
	// controller's kubeconfig (client-go sends credentials only over TLS).
	CA []byte

	mu        sync.Mutex
	counts    map[request]int
	conflicts map[request]int
	// latencies of the requests that are not watches, in seconds.
	latencies []float64
}

// startProxy serves on 127.0.0.1 over TLS with a certificate of its own
// and forwards over TLS to upstream, trusting ca.
func startProxy(upstream string, ca []byte) (*countingProxy, error) {
	u, err := url.Parse(upstream)
	if err != nil {
		return nil, fmt.Errorf("parsing the API server's URL: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, errors.New("the API server's CA bundle holds no certificate")
	}
	p := &countingProxy{upstream: u, counts: map[request]int{}, conflicts: map[request]int{}}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(u); r.Out.Host = u.Host },
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, MaxIdleConnsPerHost: 100, ForceAttemptHTTP2: true},
		FlushInterval: -1, // watches stream
	}
	cert, err := selfSigned()
	if err != nil {
		return nil, err
	}
	p.CA = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for the proxy: %w", err)
	}
	p.listener = tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}, MinVersion: tls.VersionTLS12})
	p.server = &http.Server{Handler: p.count(rp)} //nolint:gosec // loopback, closed with the benchmark
	go func() { _ = p.server.Serve(p.listener) }()
	return p, nil
}

// URL is where the controller reaches the API server through the proxy.
func (p *countingProxy) URL() string { return "https://" + p.listener.Addr().String() }

// selfSigned is a serving certificate for 127.0.0.1, its own CA.
func selfSigned() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("generating the proxy's key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bench-scale proxy"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(72 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("signing the proxy's certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// Close stops the proxy.
func (p *countingProxy) Close() { _ = p.server.Close() }

func (p *countingProxy) count(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := classify(r.Method, r.URL.Path, r.URL.Query().Get("watch"))
		p.mu.Lock()
		p.counts[key]++
		p.mu.Unlock()
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(rec, r)
		took := time.Since(start).Seconds()
		p.mu.Lock()
		defer p.mu.Unlock()
		if rec.code == http.StatusConflict {
			p.conflicts[key]++
		}
		if key.verb != "watch" {
			p.latencies = append(p.latencies, took)
		}
	})
}

// latencyQuantiles are the q-quantiles of the round trips of the requests
// that were not watches, from the n-th on, in seconds; and their count.
func (p *countingProxy) latencyQuantiles(from int, qs ...float64) ([]float64, int) {
	p.mu.Lock()
	lat := slices.Clone(p.latencies[min(from, len(p.latencies)):])
	p.mu.Unlock()
	slices.Sort(lat)
	out := make([]float64, len(qs))
	for i, q := range qs {
		if len(lat) > 0 {
			out[i] = lat[min(int(q*float64(len(lat))), len(lat)-1)]
		}
	}
	return out, len(lat)
}

// requestsSoFar is how many non-watch requests were timed so far.
func (p *countingProxy) requestsSoFar() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.latencies)
}

// snapshot returns the counts so far.
func (p *countingProxy) snapshot() (counts, conflicts map[request]int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return clone(p.counts), clone(p.conflicts)
}

func clone(m map[request]int) map[request]int {
	out := make(map[request]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// diff is after minus before, for counters of any key.
func diff[K comparable](after, before map[K]int) map[K]int {
	out := map[K]int{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// sortedRequests orders requests by count, then name.
func sortedRequests(m map[request]int) []request {
	keys := make([]request, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i].String() < keys[j].String()
	})
	return keys
}

// statusRecorder keeps the status code of a response.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

// Unwrap lets the proxy flush a watch stream through the recorder.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// classify names an API request by verb and resource, as the API server's
// own request metrics do: get, list, watch, create, update, patch,
// delete, deletecollection; "resource/subresource"; "(discovery)" for
// paths that name no resource.
func classify(method, path, watch string) request {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	var rest []string
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		rest = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		rest = parts[3:]
	}
	if len(rest) >= 2 && rest[0] == "namespaces" && len(rest) > 2 {
		rest = rest[2:]
	}
	if len(rest) == 0 {
		return request{verb: strings.ToLower(method), resource: "(discovery)"}
	}
	resource, named := rest[0], len(rest) >= 2
	if len(rest) >= 3 {
		resource += "/" + rest[2]
	}
	verb := ""
	switch method {
	case http.MethodGet:
		verb = "list"
		switch {
		case watch == "true" || watch == "1":
			verb = "watch"
		case named:
			verb = "get"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "deletecollection"
		if named {
			verb = "delete"
		}
	default:
		verb = strings.ToLower(method)
	}
	return request{verb: verb, resource: resource}
}
