package transfer_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	"platform.example/vm-migration/pkg/transfer"
	"platform.example/vm-migration/pkg/transfer/wire"
	"platform.example/vm-migration/pkg/vsphere"
	"platform.example/vm-migration/test/vcsimlocal"
)

const (
	testUser     = "xfer@vsphere.local"
	testPassword = "Pw-Transfer-Secret-71!"
	mib          = 1 << 20
)

// faults says how the proxy in front of vcsim mangles flat-extent GETs.
type faults struct {
	// cutAfter aborts the connection once this many body bytes of flat
	// extents were served in all (0: never). It fires once.
	cutAfter int64
	// contentRange replaces the Content-Range header of 206 answers.
	contentRange string
	// extra appends bytes to the body (sent chunked, without a length).
	extra []byte
	// revokeAt ends the client's vSphere session once this many body bytes
	// were served, and cuts the stream: the proxy then refuses the old
	// cookie with 401, as a real host does.
	revokeAt int64
	// delay sleeps before each write of a flat extent's body.
	delay time.Duration
	// dropRange removes the Range header of requests, so the server sends 200.
	dropRange bool
}

// simEnv is vcsim behind a TLS proxy that checks the session cookie on
// /folder (real hosts do, vcsim does not), counts the bytes of flat extents
// it serves, and injects faults.
type simEnv struct {
	model  *simulator.Model
	server *simulator.Server
	// cbt answers QueryChangedDiskAreas (thinDisk turns tracking on).
	cbt   *vcsimlocal.ChangeTracking
	proxy *httptest.Server
	ep    vsphere.Endpoint
	creds vsphere.Credentials

	// served counts the body bytes of flat extents written to clients,
	// including those written after the client went away.
	served atomic.Int64
	// conns numbers the proxy's connections in the order it accepts them
	// (connSeq is the last number given) and keeps the open ones.
	connMu  sync.Mutex
	connSeq int64
	conns   map[net.Conn]int64

	// run labels the spans served from now on; spans lists, in order,
	// what each write to a client carried (see servedSpans).
	run   atomic.Int64
	spans []servedSpan

	mu      sync.Mutex
	faults  faults
	revoked map[string]bool // session cookies the proxy refuses
	session *vsphere.Session
	client  *vim25.Client
	vm      *object.VirtualMachine
	ds      *object.Datastore
}

func newSim(t testing.TB) *simEnv {
	t.Helper()
	m := simulator.VPX()
	require.NoError(t, m.Create())
	m.Service.TLS = new(tls.Config)
	m.Service.Listen = &url.URL{User: url.UserPassword(testUser, testPassword)}
	s := m.Service.NewServer()
	e := &simEnv{model: m, server: s, revoked: map[string]bool{}, conns: map[net.Conn]int64{}, cbt: vcsimlocal.ServeChangeTracking(m)}

	target := &url.URL{Scheme: "https", Host: s.URL.Host}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	rp.ErrorLog = nil
	rp.ModifyResponse = e.modifyResponse
	e.proxy = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/folder/") {
			c, err := r.Cookie(soap.SessionCookieName)
			e.mu.Lock()
			refused := err != nil || c.Value == "" || e.revoked[c.Value]
			e.mu.Unlock()
			if refused {
				http.Error(w, "no session", http.StatusUnauthorized)
				return
			}
			if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "-flat.vmdk") {
				e.mu.Lock()
				if e.faults.dropRange {
					r.Header.Del("Range")
				}
				e.mu.Unlock()
				w = &countingWriter{ResponseWriter: w, e: e, cookie: c.Value, run: e.run.Load(),
					file: path.Base(r.URL.Path), next: rangeStart(r.Header.Get("Range"))}
			}
		}
		rp.ServeHTTP(w, r)
	}))
	// The SOAP client's first handshake of a connection fails by design when
	// it verifies by thumbprint: keep the server's complaints out of the log.
	e.proxy.Config.ErrorLog = log.New(io.Discard, "", 0)
	e.proxy.Config.ConnState = e.trackConn
	e.proxy.StartTLS()
	e.ep = vsphere.Endpoint{URL: "https://" + e.proxy.Listener.Addr().String() + "/sdk", Datacenter: "DC0"}
	e.creds = vsphere.Credentials{Username: testUser, Password: testPassword, Thumbprint: soap.ThumbprintSHA256(e.proxy.Certificate())}
	t.Cleanup(func() {
		e.proxy.Close()
		s.Close()
		m.Remove()
	})

	ctx := context.Background()
	sess, err := vsphere.Connect(ctx, e.ep, e.creds)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sess.Logout(context.Background()) })
	e.session, e.client = sess, sess.Client()
	f := find.NewFinder(e.client, true)
	dc, err := f.Datacenter(ctx, "DC0")
	require.NoError(t, err)
	f.SetDatacenter(dc)
	e.vm, err = f.VirtualMachine(ctx, "DC0_H0_VM0")
	require.NoError(t, err)
	e.ds, err = f.Datastore(ctx, "LocalDS_0")
	require.NoError(t, err)
	task, err := e.vm.PowerOff(ctx)
	require.NoError(t, err)
	require.NoError(t, task.Wait(ctx))
	return e
}

// endSession ends a session in vcsim from another session, as an
// administrator (or an idle timeout) would.
func (e *simEnv) endSession(key string) {
	ctx := context.Background()
	admin, err := vsphere.Connect(ctx, e.ep, e.creds)
	if err != nil {
		panic(err)
	}
	defer func() { _ = admin.Logout(ctx) }()
	if err := session.NewManager(admin.Client()).TerminateSession(ctx, []string{key}); err != nil {
		panic(err)
	}
}

// trackConn is the proxy's ConnState hook. A connection is closed once
// the server is done with it: its handlers have returned and write no more.
func (e *simEnv) trackConn(c net.Conn, state http.ConnState) {
	e.connMu.Lock()
	defer e.connMu.Unlock()
	switch state {
	case http.StateNew:
		e.connSeq++
		e.conns[c] = e.connSeq
	case http.StateClosed, http.StateHijacked:
		delete(e.conns, c)
	}
}

// connMark is the number the proxy's next connection will get.
func (e *simEnv) connMark() int64 {
	e.connMu.Lock()
	defer e.connMu.Unlock()
	return e.connSeq + 1
}

// waitConnsClosed waits until the proxy has closed every connection it
// accepted since connMark returned mark. A handler may still write to a
// connection after its client is gone (a write that was under way, or a
// write after the client's FIN, which the socket accepts): once they are
// closed, served holds every byte those connections were sent and takes
// no more of them.
func (e *simEnv) waitConnsClosed(t testing.TB, mark int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		e.connMu.Lock()
		defer e.connMu.Unlock()
		for _, n := range e.conns {
			if n >= mark {
				return false
			}
		}
		return true
	}, 10*time.Second, time.Millisecond, "the proxy still serves connections opened since #%d", mark)
}

// waitRunServed waits, after an in-process run, until served holds every
// byte the run was sent and takes no more of them. Even a run that
// succeeded may still be counting: a handler writes its last bytes to the
// socket and adds them to served after, so the client can have them all,
// and Run return, first. And a handler of a run that failed or was
// cancelled may write to a connection its client has given up. The run
// reads through e.client, whose transport keeps idle connections open and
// reuses them from one run to the next: they are closed (so are those that
// go idle later, until the transport is used again), then waitConnsClosed
// waits until the proxy has closed every connection, which it does once
// their handlers have returned. Nothing else keeps a connection open.
func (e *simEnv) waitRunServed(t testing.TB) {
	t.Helper()
	e.client.CloseIdleConnections()
	e.waitConnsClosed(t, 1)
}

func (e *simEnv) setFaults(f faults) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.faults = f
}

func (e *simEnv) modifyResponse(res *http.Response) error {
	if !strings.HasSuffix(res.Request.URL.Path, "-flat.vmdk") || res.Request.Method != http.MethodGet {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.faults.contentRange != "" && res.StatusCode == http.StatusPartialContent {
		res.Header.Set("Content-Range", e.faults.contentRange)
	}
	if len(e.faults.extra) > 0 {
		res.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(res.Body, bytes.NewReader(e.faults.extra)), res.Body}
		res.ContentLength = -1
		res.Header.Del("Content-Length")
	}
	return nil
}

// countingWriter counts flat-extent bytes, logs the spans it serves and
// cuts the stream on request.
type countingWriter struct {
	http.ResponseWriter
	e      *simEnv
	cookie string
	// run, file and next say what the next byte written is: which run
	// asked for it, its file and its offset there.
	run  int64
	file string
	next int64
}

// servedSpan is a span of a flat extent written to a client.
type servedSpan struct {
	run        int64
	file       string
	start, end int64
}

// rangeStart is the first byte a Range header asks for (0 without one).
func rangeStart(h string) int64 {
	first, _, _ := strings.Cut(strings.TrimPrefix(h, "bytes="), "-")
	n, _ := strconv.ParseInt(first, 10, 64)
	return n
}

// served records n bytes written.
func (w *countingWriter) served(n int) {
	if n <= 0 {
		return
	}
	w.e.served.Add(int64(n))
	w.e.mu.Lock()
	w.e.spans = append(w.e.spans, servedSpan{run: w.run, file: w.file, start: w.next, end: w.next + int64(n)})
	w.e.mu.Unlock()
	w.next += int64(n)
}

// servedSpans is every span served so far.
func (e *simEnv) servedSpans() []servedSpan {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.spans)
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.e.mu.Lock()
	cut, delay, revokeAt := w.e.faults.cutAfter, w.e.faults.delay, w.e.faults.revokeAt
	w.e.mu.Unlock()
	if revokeAt > 0 && w.e.served.Load()+int64(len(p)) > revokeAt {
		w.e.mu.Lock()
		w.e.faults.revokeAt = 0
		w.e.revoked[w.cookie] = true
		w.e.mu.Unlock()
		w.e.endSession(w.cookie)
		return 0, errors.New("test proxy: session ended")
	}
	if delay > 0 {
		time.Sleep(delay)
	}
	if cut > 0 {
		left := cut - w.e.served.Load()
		if left < int64(len(p)) {
			n, _ := w.ResponseWriter.Write(p[:max(left, 0)])
			w.served(n)
			if f, ok := w.ResponseWriter.(http.Flusher); ok {
				f.Flush()
			}
			w.e.mu.Lock()
			w.e.faults.cutAfter = 0
			w.e.mu.Unlock()
			return n, fmt.Errorf("test proxy: cut after %d bytes", cut)
		}
	}
	n, err := w.ResponseWriter.Write(p)
	w.served(n)
	return n, err
}

func (w *countingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// testDisk adds a disk holding data to the VM and lays it out as ESXi
// does: a text descriptor name.vmdk and its flat extent name-flat.vmdk,
// both uploaded through the datastore HTTP interface.
func (e *simEnv) testDisk(t testing.TB, name string, data []byte) wire.DiskSpec {
	t.Helper()
	d := e.addDisk(t, name, int64(len(data)))
	e.upload(t, fmt.Sprintf("DC0_H0_VM0/%s-flat.vmdk", name), data)
	return d
}

// addDisk adds a disk of capacity bytes to the VM with its descriptor;
// the caller puts its flat extent in place.
func (e *simEnv) addDisk(t testing.TB, name string, capacity int64) wire.DiskSpec {
	t.Helper()
	ctx := context.Background()
	devices, err := e.vm.Device(ctx)
	require.NoError(t, err)
	ctrl, err := devices.FindDiskController("")
	require.NoError(t, err)
	fileName := fmt.Sprintf("[LocalDS_0] DC0_H0_VM0/%s.vmdk", name)
	disk := devices.CreateDisk(ctrl, e.ds.Reference(), fileName)
	disk.CapacityInKB = capacity / 1024
	require.NoError(t, e.vm.AddDevice(ctx, disk))
	devices, err = e.vm.Device(ctx)
	require.NoError(t, err)
	var key int32
	for _, d := range devices.SelectByBackingInfo(&types.VirtualDiskFlatVer2BackingInfo{VirtualDeviceFileBackingInfo: types.VirtualDeviceFileBackingInfo{FileName: fileName}}) {
		key = d.GetVirtualDevice().Key
	}
	require.NotZero(t, key, "new disk not found")
	e.upload(t, fmt.Sprintf("DC0_H0_VM0/%s.vmdk", name), []byte(vcsimlocal.FlatDescriptor(name, capacity)))
	return wire.DiskSpec{Key: key, FileName: fileName, CapacityBytes: capacity}
}

// thinDisk adds a thin disk of size bytes, about percent of it written
// (vcsimlocal.ThinRuns), its flat extent a sparse file written straight
// into the datastore's directory, the datastore reporting its allocation;
// turns change tracking on; and gives the disk a fresh disk.img
// destination. It returns the disk's bytes and the bytes written.
func (e *simEnv) thinDisk(t testing.TB, name string, size int, seed uint64, percent int) ([]byte, int64, wire.DiskSpec) {
	t.Helper()
	d := e.addDisk(t, name, int64(size))
	var ds mo.Datastore
	require.NoError(t, e.ds.Properties(context.Background(), e.ds.Reference(), []string{"summary.url"}, &ds))
	extent := filepath.Join(ds.Summary.Url, "DC0_H0_VM0", name+"-flat.vmdk")
	_, written, err := vcsimlocal.WriteThinExtent(extent, int64(size), seed, percent)
	require.NoError(t, err)
	data, err := os.ReadFile(extent)
	require.NoError(t, err)
	require.NoError(t, e.cbt.RefreshUsage(e.vm.Reference()))
	require.NoError(t, e.cbt.Enable(e.vm.Reference(), true))
	d.Destination = filepath.Join(t.TempDir(), "disk.img")
	return data, written, d
}

// stagedDisk adds a disk holding diskData(size, seed) and gives it a fresh
// disk.img destination.
func (e *simEnv) stagedDisk(t testing.TB, name string, size int, seed uint64) ([]byte, wire.DiskSpec) {
	t.Helper()
	data := diskData(size, seed)
	d := e.testDisk(t, name, data)
	d.Destination = filepath.Join(t.TempDir(), "disk.img")
	return data, d
}

func (e *simEnv) upload(t testing.TB, path string, data []byte) {
	t.Helper()
	p := soap.DefaultUpload
	p.ContentLength = int64(len(data))
	require.NoError(t, e.ds.Upload(context.Background(), bytes.NewReader(data), path, &p))
}

// diskData is size bytes of random data with zero runs: whole zero
// chunks, zero blocks inside data, and a zero tail.
func diskData(size int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, size)
	for i := 0; i+8 <= size; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	zero := func(from, to int) {
		clear(b[max(from, 0):min(to, size)])
	}
	zero(2*mib, 5*mib)                 // whole chunks
	zero(6*mib+128<<10, 6*mib+512<<10) // blocks inside a chunk
	zero(size-3*mib, size)             // the tail
	zero(7*mib+100, 7*mib+200)         // a short run: stays data
	return b
}

// jobSpec is a spec for the sim's VM with the given disks.
func (e *simEnv) jobSpec(disks ...wire.DiskSpec) *wire.JobSpec {
	return &wire.JobSpec{
		Version:  wire.SpecVersion,
		Endpoint: wire.EndpointSpec{URL: e.ep.URL, Datacenter: "DC0"},
		VMMoRef:  e.vm.Reference().Value,
		Disks:    disks,
	}
}

// plan resolves a spec through the planner.
func (e *simEnv) plan(t testing.TB, spec *wire.JobSpec) []transfer.DiskPlan {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := &transfer.Planner{Client: e.client, DatacenterPath: "DC0"}
	plans, err := p.Plan(ctx, spec)
	require.NoError(t, err)
	return plans
}
