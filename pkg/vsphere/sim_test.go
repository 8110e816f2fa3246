package vsphere

import (
	"context"
	"crypto/tls"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/soap"
)

// Test credentials: a distinctive password so leak tests can search for it.
const (
	testUser     = "migrator@vsphere.local"
	testPassword = "Xq7-Hunter2-Zebra!9"
)

// simEnv is an in-process vcsim with TLS and our own credentials.
type simEnv struct {
	name   string
	model  *simulator.Model
	server *simulator.Server
	ep     Endpoint
	creds  Credentials
}

type modelKind string

const (
	vpx modelKind = "VPX"
	esx modelKind = "ESX"
)

var bothModels = []modelKind{vpx, esx}

// newSim starts a simulator of the given kind. tweak may change the model
// before it is created (counts of VMs, hosts...).
func newSim(t testing.TB, kind modelKind, tweak func(*simulator.Model)) *simEnv {
	t.Helper()
	var m *simulator.Model
	if kind == esx {
		m = simulator.ESX()
	} else {
		m = simulator.VPX()
	}
	if tweak != nil {
		tweak(m)
	}
	require.NoError(t, m.Create())
	m.Service.TLS = new(tls.Config)
	m.Service.Listen = &url.URL{User: url.UserPassword(testUser, testPassword)}
	s := m.Service.NewServer()
	t.Cleanup(func() {
		s.Close()
		m.Remove()
	})
	return &simEnv{
		name:   string(kind),
		model:  m,
		server: s,
		// No /sdk: Connect appends it.
		ep: Endpoint{URL: "https://" + s.URL.Host},
		creds: Credentials{
			Username:   testUser,
			Password:   testPassword,
			Thumbprint: strings.ToLower(strings.ReplaceAll(soap.ThumbprintSHA256(s.Certificate()), ":", "")),
		},
	}
}

// connect logs in with the environment's credentials.
func (e *simEnv) connect(t testing.TB, opts ...Option) *Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := ConnectWithOptions(ctx, e.ep, e.creds, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Logout(context.Background()) })
	return s
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}
