package vcsimlocal

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	"platform.example/vm-migration/pkg/vsphere"
)

// Names in the simulator's inventory (govmomi's VPX model).
const (
	// Datacenter is the datacenter VMs are created in unless they name
	// another (DC1, DC2... with Options.Datacenters).
	Datacenter = "DC0"
	// Host is Datacenter's standalone ESXi host, where its VMs run (a VM in
	// DCn runs on DCn_H0).
	Host = "DC0_H0"
	// Datastore holds a VM's files unless it names another (LocalDS_1...
	// with Options.Datastores).
	Datastore = "LocalDS_0"
	// NetworkVM is the standard port group "VM Network".
	NetworkVM = "VM Network"
	// NetworkDVPG is the distributed port group of the model.
	NetworkDVPG = "DC0_DVPG0"
	// Username is the login the simulator accepts.
	Username = "migration@vsphere.local"
)

// Options configure Start.
type Options struct {
	// Address to listen on, host:port; empty means 127.0.0.1 and a free port.
	// Only loopback addresses and those of the test node's links
	// (198.18.0.0/15, test/framework) are accepted: the simulator never
	// listens where another machine could reach it.
	Address string
	// Password of Username; empty means a random one.
	Password string
	// Datacenters to create (DC0, DC1...), each with its standalone host
	// DCn_H0, its networks and its datastores; 0 means 1.
	Datacenters int
	// Datastores in each datacenter (LocalDS_0, LocalDS_1...); 0 means 1.
	Datastores int
	// Hosts are the standalone ESXi hosts of each datacenter (DCn_H0,
	// DCn_H1...); 0 means 1. VMSpec.Host places a VM on one of them.
	Hosts int
}

// Server is a running simulator.
type Server struct {
	// URL of the SDK endpoint, https://127.0.0.1:port/sdk.
	URL string
	// Thumbprint is the SHA-256 thumbprint of the server certificate
	// (uppercase hex with colons), for the credentials Secret.
	Thumbprint string
	// Username and Password log in.
	Username, Password string

	model          *simulator.Model
	server         *simulator.Server
	client         *govmomi.Client
	sessionManager types.ManagedObjectReference

	mu            sync.Mutex
	sessionDenied int                      // /folder requests refused for want of a live session
	held          int                      // reads waiting on a hold
	faults        map[string]*extentFault  // by VM folder name
	holds         map[string]chan struct{} // by VM folder name; closed on release
	served        map[string]int64         // flat-extent bytes sent, by VM folder name
	paces         map[string]*pace         // by VM folder name (pace.go)
	vms           map[string]*VM
	soapCalls     map[string]int // SOAP requests by method
	cbt           *ChangeTracking
}

// extentFault fails the flat-extent reads of the first sessions of a VM.
type extentFault struct {
	sessions int             // how many distinct sessions fail; negative: all
	failed   map[string]bool // session cookies chosen to fail
	count    int             // requests refused
}

// nodeLinks is the range the test node's links take their addresses from
// (RFC 2544's benchmarking range; test/framework).
var nodeLinks = &net.IPNet{IP: net.IPv4(198, 18, 0, 0), Mask: net.CIDRMask(15, 32)}

// localOnly says ip is on loopback or on a test node's link.
func localOnly(ip net.IP) bool {
	return ip != nil && (ip.IsLoopback() || nodeLinks.Contains(ip))
}

// Start creates the simulator's inventory and serves it.
func Start(ctx context.Context, opts Options) (s *Server, err error) {
	host := "127.0.0.1:0"
	if opts.Address != "" {
		host = opts.Address
	}
	if h, _, err := net.SplitHostPort(host); err != nil || !localOnly(net.ParseIP(h)) {
		return nil, fmt.Errorf("listen address %q is not an IP address on loopback or on the test node's link (198.18.0.0/15)", host)
	}
	password := opts.Password
	if password == "" {
		password, err = randomPassword()
		if err != nil {
			return nil, err
		}
	}
	m := simulator.VPX()
	m.Machine = 1
	m.Datacenter = max(opts.Datacenters, 1)
	m.Datastore = max(opts.Datastores, 1)
	m.Host = max(opts.Hosts, 1)
	if err := m.Create(); err != nil {
		return nil, fmt.Errorf("creating the simulator inventory: %w", err)
	}
	m.Service.TLS = new(tls.Config)
	m.Service.Listen = &url.URL{Host: host, User: url.UserPassword(Username, password)}
	srv := m.Service.NewServer()
	s = &Server{
		URL:        "https://" + srv.URL.Host + "/sdk",
		Thumbprint: soap.ThumbprintSHA256(srv.Certificate()),
		Username:   Username,
		Password:   password,
		model:      m,
		server:     srv,
		faults:     map[string]*extentFault{},
		holds:      map[string]chan struct{}{},
		served:     map[string]int64{},
		vms:        map[string]*VM{},
		soapCalls:  map[string]int{},
	}
	// No request has reached the server yet: its handler can still be
	// wrapped with the session check and the fault injection.
	srv.Config.Handler, s.cbt = s.wrap(srv.Config.Handler), ServeChangeTracking(m)
	// A client verifying by thumbprint fails its first handshake by
	// design: keep the server's complaints out of the output.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	u, err := soap.ParseURL(s.URL)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", s.URL, err)
	}
	u.User = url.UserPassword(Username, password)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := govmomi.NewClient(cctx, u, true)
	if err != nil {
		return nil, fmt.Errorf("logging in to the simulator: %w", err)
	}
	s.client = c
	s.sessionManager = *c.ServiceContent.SessionManager
	return s, nil
}

// ChangeTracking is the simulator's answer to QueryChangedDiskAreas, to
// shape it (faults, paging, a map that leaves areas out).
func (s *Server) ChangeTracking() *ChangeTracking { return s.cbt }

// Ref is the VM's managed object reference.
func (v *VM) Ref() types.ManagedObjectReference {
	return types.ManagedObjectReference{Type: "VirtualMachine", Value: v.MoRef}
}

// randomPassword is 24 random hex characters with a suffix that meets
// usual complexity rules.
func randomPassword() (string, error) {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating a password: %w", err)
	}
	return hex.EncodeToString(b) + "-Vc!", nil
}

// Close stops the server and removes the simulator's files.
func (s *Server) Close() {
	if s.client != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = s.client.Logout(ctx)
		cancel()
	}
	s.mu.Lock()
	for vm, ch := range s.holds {
		close(ch)
		delete(s.holds, vm)
	}
	s.mu.Unlock()
	s.server.Close()
	s.model.Remove()
}

// wrap refuses /folder requests without the cookie of a live vSphere
// session (real hosts do; plain vcsim serves anyone) and injects the
// configured extent faults.
func (s *Server) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/sdk" {
			s.countSOAPCall(r)
		}
		if strings.HasPrefix(r.URL.Path, "/folder/") {
			c, err := r.Cookie(soap.SessionCookieName)
			if err != nil || !s.liveSession(r.Context(), c.Value) {
				s.mu.Lock()
				s.sessionDenied++
				s.mu.Unlock()
				http.Error(w, "no live session", http.StatusUnauthorized)
				return
			}
			if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "-flat.vmdk") {
				if s.refuse(r.URL.Path, c.Value) {
					http.Error(w, "injected fault: datastore unavailable", http.StatusServiceUnavailable)
					return
				}
				if hold := s.hold(r.URL.Path); hold != nil {
					s.addHeld(1)
					select {
					case <-hold:
					case <-r.Context().Done():
					}
					s.addHeld(-1)
					if r.Context().Err() != nil {
						return
					}
				}
				// The simulator rewrites r.URL.Path while serving: take the
				// VM folder now.
				folder := vmFolder(r.URL.Path)
				w = &countingWriter{ResponseWriter: s.paced(folder, w), add: func(n int) { s.addServed(folder, n) }}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// liveSession asks the simulator's session manager, in process, whether
// the cookie is the key of a session that is still logged in.
func (s *Server) liveSession(ctx context.Context, cookie string) bool {
	if cookie == "" {
		return false
	}
	res, err := methods.SessionIsActive(ctx, s.model.Service, &types.SessionIsActive{
		This: s.sessionManager, SessionID: cookie, UserName: s.Username,
	})
	return err == nil && res.Returnval
}

// SessionRefusals is how many datastore requests were refused for want of
// a live session.
func (s *Server) SessionRefusals() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessionDenied
}

// EndSessions ends every vSphere session but the server's own, as an
// administrator would (SessionManager.TerminateSession), and returns how
// many it ended: their holders must log in again.
func (s *Server) EndSessions(ctx context.Context) (int, error) {
	var sm mo.SessionManager
	if err := s.client.RetrieveOne(ctx, s.sessionManager, []string{"sessionList", "currentSession"}, &sm); err != nil {
		return 0, fmt.Errorf("listing the sessions: %w", err)
	}
	var ids []string
	for _, us := range sm.SessionList {
		if sm.CurrentSession == nil || us.Key != sm.CurrentSession.Key {
			ids = append(ids, us.Key)
		}
	}
	if len(ids) == 0 {
		return 0, nil
	}
	if _, err := methods.TerminateSession(ctx, s.client, &types.TerminateSession{This: s.sessionManager, SessionId: ids}); err != nil {
		return 0, fmt.Errorf("ending %d sessions: %w", len(ids), err)
	}
	return len(ids), nil
}

// countingWriter counts the body bytes written through it.
type countingWriter struct {
	http.ResponseWriter
	add func(int)
}

// Write implements io.Writer and counts.
func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.add(n)
	return n, err
}

// Flush passes a flush on when the underlying writer can.
func (c *countingWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *Server) addServed(folder string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.served[folder] += int64(n)
}

// ExtentBytesServed is how many bytes of a VM's flat extents were sent, in
// all: more than the disks' total means data was sent again.
func (s *Server) ExtentBytesServed(vm string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.served[vm]
}

// vmFolder is the VM folder of a /folder path.
func vmFolder(path string) string {
	folder, _, _ := strings.Cut(strings.TrimPrefix(path, "/folder/"), "/")
	return folder
}

// hold is the channel a flat-extent read of the path's VM waits on, if any.
func (s *Server) hold(path string) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.holds[vmFolder(path)]
}

// addHeld counts the reads waiting on a hold.
func (s *Server) addHeld(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held += n
}

// heldReads is how many reads wait on a hold now.
func (s *Server) heldReads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

// HoldExtentReads makes the flat-extent downloads of a VM wait until the
// returned release is called (or the client gives up), so that a transfer
// stays in flight as long as a test needs.
func (s *Server) HoldExtentReads(vm string) (release func()) {
	ch := make(chan struct{})
	s.mu.Lock()
	s.holds[vm] = ch
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.holds[vm] == ch {
				delete(s.holds, vm)
				close(ch)
			}
		})
	}
}

// refuse decides whether a flat-extent read fails.
func (s *Server) refuse(path, cookie string) bool {
	rest := strings.TrimPrefix(path, "/folder/")
	folder, _, ok := strings.Cut(rest, "/")
	if !ok {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.faults[folder]
	if f == nil {
		return false
	}
	if !f.failed[cookie] {
		if f.sessions >= 0 && len(f.failed) >= f.sessions {
			return false
		}
		f.failed[cookie] = true
	}
	f.count++
	return true
}

// FailExtentReads makes the flat-extent downloads of a VM fail with 503:
// every download of the first sessions (vSphere logins) that read one,
// or of all sessions when sessions is negative. Zero removes the fault.
// A transfer command logs in once per run, so sessions counts transfer runs.
func (s *Server) FailExtentReads(vm string, sessions int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sessions == 0 {
		delete(s.faults, vm)
		return
	}
	s.faults[vm] = &extentFault{sessions: sessions, failed: map[string]bool{}}
}

// RefusedReads is how many flat-extent downloads of a VM were refused.
func (s *Server) RefusedReads(vm string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.faults[vm]; f != nil {
		return f.count
	}
	return 0
}

// finderIn is a finder set to a datacenter.
func (s *Server) finderIn(ctx context.Context, datacenter string) (*find.Finder, *object.Datacenter, error) {
	f := find.NewFinder(s.client.Client, true)
	dc, err := f.Datacenter(ctx, datacenter)
	if err != nil {
		return nil, nil, fmt.Errorf("finding datacenter %s: %w", datacenter, err)
	}
	f.SetDatacenter(dc)
	return f, dc, nil
}

// vm finds a VM by name, in the datacenter AddVM put it in (Datacenter for
// the simulator's own VMs).
func (s *Server) vm(ctx context.Context, name string) (*object.VirtualMachine, error) {
	datacenter := Datacenter
	s.mu.Lock()
	if v := s.vms[name]; v != nil {
		datacenter = v.Datacenter
	}
	s.mu.Unlock()
	f, _, err := s.finderIn(ctx, datacenter)
	if err != nil {
		return nil, err
	}
	vm, err := f.VirtualMachine(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("finding VM %s: %w", name, err)
	}
	return vm, nil
}

// Snapshots lists the names of a VM's snapshots, the whole tree.
func (s *Server) Snapshots(ctx context.Context, name string) ([]string, error) {
	vm, err := s.vm(ctx, name)
	if err != nil {
		return nil, err
	}
	var props mo.VirtualMachine
	if err := vm.Properties(ctx, vm.Reference(), []string{"snapshot"}, &props); err != nil {
		return nil, fmt.Errorf("reading the snapshots of %s: %w", name, err)
	}
	return vsphere.SnapshotNames(props.Snapshot), nil
}

// PowerState is the VM's power state as vSphere names it (poweredOn,
// poweredOff, suspended).
func (s *Server) PowerState(ctx context.Context, name string) (string, error) {
	vm, err := s.vm(ctx, name)
	if err != nil {
		return "", err
	}
	st, err := vm.PowerState(ctx)
	if err != nil {
		return "", fmt.Errorf("reading the power state of %s: %w", name, err)
	}
	return string(st), nil
}

// maxSOAPPeek is how much of a SOAP request is read to find its method.
const maxSOAPPeek = 4096

// countSOAPCall counts a SOAP request by its method: the first element
// inside the envelope's Body. The body is put back for the simulator.
func (s *Server) countSOAPCall(r *http.Request) {
	head := make([]byte, maxSOAPPeek)
	n, _ := io.ReadFull(r.Body, head)
	head = head[:n]
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), r.Body), r.Body}
	method := soapMethod(string(head))
	s.mu.Lock()
	s.soapCalls[method]++
	s.mu.Unlock()
}

// soapMethod is the name of the first element after the SOAP Body's start
// tag, without a namespace prefix; "unknown" when there is none.
func soapMethod(envelope string) string {
	i := strings.Index(envelope, "Body>")
	if i < 0 {
		return "unknown"
	}
	rest := envelope[i+len("Body>"):]
	start := strings.IndexByte(rest, '<')
	if start < 0 {
		return "unknown"
	}
	rest = rest[start+1:]
	end := strings.IndexAny(rest, " />\t\r\n")
	if end <= 0 {
		return "unknown"
	}
	name := rest[:end]
	if _, local, ok := strings.Cut(name, ":"); ok {
		name = local
	}
	return name
}

// SOAPCalls returns how many SOAP requests the server received, by
// method, since it started.
func (s *Server) SOAPCalls() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.soapCalls))
	for k, v := range s.soapCalls {
		out[k] = v
	}
	return out
}
