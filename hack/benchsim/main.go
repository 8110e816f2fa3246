// Command benchsim serves one large disk from an in-process vcsim on
// 127.0.0.1 for hack/bench-transfer.sh: it adds a disk to a powered-off VM,
// lays it out as ESXi does (text descriptor + flat extent, written straight
// into the simulator's datastore directory), writes a transfer job spec and
// a credentials directory, prints shell assignments describing all that,
// and serves until it receives SIGTERM or SIGINT. The simulator's
// directories, the disk included, are removed on exit.
//
// With --conn-rate-mib, every connection reading a flat extent is paced to
// that many MiB/s, like the per-stream ceiling of an ESXi host's datastore
// HTTP (NFC) service: more streams then mean more throughput.
//
// With --thin-percent, the disk is thin: data in scattered runs over about
// that share of it (vcsimlocal.ThinRuns), holes elsewhere; the VM has
// changed block tracking on and the simulator answers
// QueryChangedDiskAreas (vcsimlocal.ServeChangeTracking). A second job
// spec (SPEC_FULL) asks for a full copy of the same disk, and
// SOURCE_SHA256 is the disk's checksum.
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	"platform.example/vm-migration/pkg/transfer/wire"
	"platform.example/vm-migration/pkg/vsphere"
	"platform.example/vm-migration/test/vcsimlocal"
)

const (
	user     = "bench@vsphere.local"
	password = "bench-password"
)

func main() {
	sizeMiB := flag.Int64("size-mib", 2048, "disk size in MiB")
	zeroMiB := flag.Int64("zero-mib", 64, "MiB of zeros in the middle of the disk (the rest is random)")
	workDir := flag.String("work-dir", "", "directory for the job spec, credentials and destination (required)")
	connRate := flag.Float64("conn-rate-mib", 0, "cap each connection's flat-extent reads at this many MiB/s (0: no cap)")
	thin := flag.Int("thin-percent", 0, "make the disk thin with about this share written, change tracking on (0: a full disk)")
	flag.Parse()
	if *workDir == "" || *thin < 0 || *thin > 100 {
		fmt.Fprintln(os.Stderr, "benchsim: --work-dir is required, --thin-percent is 0 to 100")
		os.Exit(2)
	}
	if err := run(*sizeMiB<<20, *zeroMiB<<20, *workDir, *connRate*(1<<20), *thin); err != nil {
		fmt.Fprintf(os.Stderr, "benchsim: %v\n", err)
		os.Exit(1)
	}
}

func run(size, zeros int64, workDir string, connRate float64, thin int) error {
	m := simulator.VPX()
	if err := m.Create(); err != nil {
		return err
	}
	defer m.Remove()
	cbt := vcsimlocal.ServeChangeTracking(m)
	m.Service.TLS = new(tls.Config)
	m.Service.Listen = &url.URL{Host: "127.0.0.1:0", User: url.UserPassword(user, password)}
	s := m.Service.NewServer()
	defer s.Close()
	if connRate > 0 {
		// No request has reached the server yet: its handler can be wrapped.
		s.Config.Handler = paceConnections(s.Config.Handler, connRate)
	}

	ctx := context.Background()
	thumb := soap.ThumbprintSHA256(s.Certificate())
	ep := vsphere.Endpoint{URL: "https://" + s.URL.Host + "/sdk", Datacenter: "DC0"}
	sess, err := vsphere.Connect(ctx, ep, vsphere.Credentials{Username: user, Password: password, Thumbprint: thumb})
	if err != nil {
		return err
	}
	c := sess.Client()
	f := find.NewFinder(c, true)
	dc, err := f.Datacenter(ctx, "DC0")
	if err != nil {
		return err
	}
	f.SetDatacenter(dc)
	vm, err := f.VirtualMachine(ctx, "DC0_H0_VM0")
	if err != nil {
		return err
	}
	ds, err := f.Datastore(ctx, "LocalDS_0")
	if err != nil {
		return err
	}
	task, err := vm.PowerOff(ctx)
	if err != nil {
		return err
	}
	if err := task.Wait(ctx); err != nil {
		return err
	}
	devices, err := vm.Device(ctx)
	if err != nil {
		return err
	}
	ctrl, err := devices.FindDiskController("")
	if err != nil {
		return err
	}
	fileName := "[LocalDS_0] DC0_H0_VM0/bench.vmdk"
	disk := devices.CreateDisk(ctrl, ds.Reference(), fileName)
	disk.CapacityInKB = size / 1024
	if err := vm.AddDevice(ctx, disk); err != nil {
		return err
	}
	devices, err = vm.Device(ctx)
	if err != nil {
		return err
	}
	var key int32
	for _, d := range devices.SelectByBackingInfo(&types.VirtualDiskFlatVer2BackingInfo{VirtualDeviceFileBackingInfo: types.VirtualDeviceFileBackingInfo{FileName: fileName}}) {
		key = d.GetVirtualDevice().Key
	}

	var dsMo mo.Datastore
	if err := ds.Properties(ctx, ds.Reference(), []string{"summary"}, &dsMo); err != nil {
		return err
	}
	dir := filepath.Join(dsMo.Summary.Url, "DC0_H0_VM0")
	desc := fmt.Sprintf("# Disk DescriptorFile\nversion=1\nencoding=\"UTF-8\"\nCID=fffffffe\nparentCID=ffffffff\ncreateType=\"vmfs\"\n\nRW %d VMFS \"bench-flat.vmdk\"\n\nddb.adapterType = \"lsilogic\"\n", size/wire.SectorSize)
	if err := os.WriteFile(filepath.Join(dir, "bench.vmdk"), []byte(desc), 0o644); err != nil {
		return err
	}
	sourceSum, err := fillDisk(filepath.Join(dir, "bench-flat.vmdk"), size, zeros, thin)
	if err != nil {
		return err
	}
	if err := cbt.RefreshUsage(vm.Reference()); err != nil {
		return err
	}
	if err := cbt.Enable(vm.Reference(), thin > 0); err != nil {
		return err
	}

	credDir := filepath.Join(workDir, "credentials")
	if err := os.MkdirAll(credDir, 0o700); err != nil {
		return err
	}
	for k, v := range map[string]string{"username": user, "password": password, "thumbprint": thumb} {
		if err := os.WriteFile(filepath.Join(credDir, k), []byte(v), 0o600); err != nil {
			return err
		}
	}
	dest := filepath.Join(workDir, "staging")
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return err
	}
	spec := wire.JobSpec{
		Version:  wire.SpecVersion,
		Endpoint: wire.EndpointSpec{URL: ep.URL, Datacenter: "DC0"},
		VMMoRef:  vm.Reference().Value,
		Disks:    []wire.DiskSpec{{Key: key, FileName: fileName, CapacityBytes: size, Destination: filepath.Join(dest, "disk.img")}},
	}
	specPath, fullPath := filepath.Join(workDir, "job.json"), filepath.Join(workDir, "job-full.json")
	if err := writeSpec(specPath, spec); err != nil {
		return err
	}
	spec.FullCopy = true
	if err := writeSpec(fullPath, spec); err != nil {
		return err
	}
	flatURL := object.NewDatastoreURL(*c.URL(), "DC0", "LocalDS_0", "DC0_H0_VM0/bench-flat.vmdk")
	cookie := c.SessionCookie()
	if cookie == nil {
		return fmt.Errorf("no session cookie")
	}
	fmt.Printf("SPEC=%q\nSPEC_FULL=%q\nCREDS=%q\nIMAGE=%q\nFLAT_URL=%q\nCOOKIE=%q\nSIZE=%d\nSOURCE_SHA256=%s\nREADY=1\n",
		specPath, fullPath, credDir, spec.Disks[0].Destination, flatURL.String(), soap.SessionCookieName+"="+cookie.Value, size, sourceSum)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	<-sig
	return nil
}

// writeSpec writes a job spec as JSON.
func writeSpec(path string, spec wire.JobSpec) error {
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// fillDisk writes the flat extent, thin or full, and returns its SHA-256
// (a full disk's is left to sha256sum of the copy: "").
func fillDisk(path string, size, zeros int64, thin int) (string, error) {
	if thin == 0 {
		return "", writeFlat(path, size, zeros)
	}
	sum, _, err := vcsimlocal.WriteThinExtent(path, size, 1, thin)
	return sum, err
}

// writeFlat writes size bytes of random data with a run of zeros in the middle.
func writeFlat(path string, size, zeros int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 4<<20)
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 1<<20)
	zeroFrom, zeroTo := (size-zeros)/2, (size+zeros)/2
	for off := int64(0); off < size; off += int64(len(buf)) {
		if off >= zeroFrom && off < zeroTo {
			clear(buf)
		} else {
			for i := 0; i < len(buf); i += 8 {
				v := r.Uint64()
				for j := range 8 {
					buf[i+j] = byte(v >> (8 * j))
				}
			}
		}
		if _, err := w.Write(buf[:min(int64(len(buf)), size-off)]); err != nil {
			_ = f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// paceConnections caps the rate at which each connection receives the
// body of a flat extent, in bytes per second.
func paceConnections(next http.Handler, rate float64) http.Handler {
	var mu sync.Mutex
	pacers := map[string]*pacer{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "-flat.vmdk") {
			mu.Lock()
			p := pacers[r.RemoteAddr]
			if p == nil {
				p = &pacer{rate: rate}
				pacers[r.RemoteAddr] = p
			}
			mu.Unlock()
			w = &pacedWriter{ResponseWriter: w, p: p}
		}
		next.ServeHTTP(w, r)
	})
}

// pacer is one connection's token bucket: it refills at rate bytes per
// second up to pacerBurst seconds' worth, and a write waits until the
// bucket holds its bytes. A sleep that runs long is made up by the refill,
// so the average stays at rate on a busy machine too.
type pacer struct {
	mu     sync.Mutex
	rate   float64
	tokens float64
	last   time.Time
}

// pacerBurst is how many seconds of rate a connection may send at once
// after a pause: enough to make up a server goroutine woken tens of
// milliseconds late on a loaded machine (the average stays at rate).
const pacerBurst = 0.05

// wait blocks until n more bytes fit the connection's rate.
func (p *pacer) wait(n int) {
	p.mu.Lock()
	now := time.Now()
	if p.last.IsZero() {
		p.last, p.tokens = now, p.rate*pacerBurst
	}
	p.tokens = min(p.tokens+now.Sub(p.last).Seconds()*p.rate, p.rate*pacerBurst)
	p.last = now
	p.tokens -= float64(n)
	d := time.Duration(-p.tokens / p.rate * float64(time.Second))
	p.mu.Unlock()
	if d > 0 {
		time.Sleep(d)
	}
}

// pacedWriter paces the body written through it.
type pacedWriter struct {
	http.ResponseWriter
	p *pacer
}

// Write waits for the connection's pace, then writes.
func (w *pacedWriter) Write(b []byte) (int, error) {
	w.p.wait(len(b))
	return w.ResponseWriter.Write(b)
}
