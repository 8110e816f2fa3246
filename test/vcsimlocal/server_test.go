package vcsimlocal

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/soap"
	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/transfer"
	"platform.example/vm-migration/pkg/transfer/wire"
	"platform.example/vm-migration/pkg/vsphere"
)

// TestSampleVM checks that the sample VM reads back as created (through
// the controller's own inventory code) and that the real transfer copies
// its disks byte for byte.
func TestSampleVM(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Start(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	vm, err := s.AddVM(ctx, SampleVM("web-01", 7))
	if err != nil {
		t.Fatal(err)
	}
	if st, err := s.PowerState(ctx, "web-01"); err != nil || st != "poweredOn" {
		t.Fatalf("power state %q, %v", st, err)
	}

	ep := vsphere.Endpoint{URL: s.URL, Datacenter: Datacenter}
	creds := vsphere.Credentials{Username: s.Username, Password: s.Password, Thumbprint: s.Thumbprint}
	sess, err := vsphere.Connect(ctx, ep, creds)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sess.Logout(context.Background()) }()
	obj, err := vsphere.FindVM(ctx, sess, v1alpha1.VMSelector{Name: "web-01"})
	if err != nil {
		t.Fatal(err)
	}
	inv, err := vsphere.Inventory(ctx, sess, obj)
	if err != nil {
		t.Fatal(err)
	}
	if inv.Firmware != v1alpha1.FirmwareEFI || !inv.SecureBoot || inv.MemoryMiB != 2048 || inv.CPU.Sockets != 2 || inv.CPU.CoresPerSocket != 2 {
		t.Errorf("inventory %+v", inv)
	}
	if len(inv.Disks) != 3 || len(inv.NICs) != 2 {
		t.Fatalf("%d disks, %d NICs", len(inv.Disks), len(inv.NICs))
	}
	for i, n := range inv.NICs {
		if n.MAC != vm.MACs[i] || n.Network != vm.Spec.NICs[i].Network {
			t.Errorf("NIC %d: %+v, want %s on %s", i, n, vm.MACs[i], vm.Spec.NICs[i].Network)
		}
	}

	dir := t.TempDir()
	spec := wire.JobSpec{Version: wire.SpecVersion, Endpoint: wire.EndpointSpec{URL: s.URL, Datacenter: Datacenter}, VMMoRef: vm.MoRef}
	for i, d := range vm.Disks {
		if inv.Disks[i].Key != d.Key || inv.Disks[i].CapacityBytes != d.SizeBytes || inv.Disks[i].FileName != d.FileName {
			t.Errorf("disk %d: %+v, want %+v", i, inv.Disks[i], d)
		}
		spec.Disks = append(spec.Disks, wire.DiskSpec{Key: d.Key, FileName: d.FileName, CapacityBytes: d.SizeBytes,
			Destination: filepath.Join(dir, d.SHA256[:8]+".img")})
	}
	// The transfer reads the disks of a powered-off VM.
	if err := vsphere.PowerOff(ctx, obj); err != nil {
		t.Fatal(err)
	}
	plans, err := (&transfer.Planner{Client: sess.Client(), DatacenterPath: "DC0"}).Plan(ctx, &spec)
	if err != nil {
		t.Fatal(err)
	}
	res := transfer.Run(ctx, plans, transfer.Options{})
	if !res.Succeeded {
		t.Fatalf("transfer failed: %s", res.Error)
	}
	for i, d := range vm.Disks {
		b, err := os.ReadFile(spec.Disks[i].Destination)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		if hex.EncodeToString(sum[:]) != d.SHA256 || res.Disks[i].SHA256 != d.SHA256 {
			t.Errorf("disk %d: checksum differs", i)
		}
		if !bytes.Equal(b, DiskBytes(d.SizeBytes, vm.Spec.Disks[i].Seed)) {
			t.Errorf("disk %d: bytes differ", i)
		}
	}
}

// TestFolderNeedsSessionAndFaults checks the session check and the fault injection.
func TestFolderNeedsSessionAndFaults(t *testing.T) {
	ctx := context.Background()
	s, err := Start(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.refuse("/folder/a/a-flat.vmdk", "c1") {
		t.Fatal("no fault configured, yet refused")
	}
	s.FailExtentReads("a", 1)
	if !s.refuse("/folder/a/a-flat.vmdk", "c1") || !s.refuse("/folder/a/a_1-flat.vmdk", "c1") {
		t.Error("the first session is not refused")
	}
	if s.refuse("/folder/a/a-flat.vmdk", "c2") || s.refuse("/folder/b/b-flat.vmdk", "c1") {
		t.Error("a second session or another VM is refused")
	}
	if s.RefusedReads("a") != 2 {
		t.Errorf("refused %d, want 2", s.RefusedReads("a"))
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: insecureTLS()}}
	resp, err := client.Get(s.URL[:len(s.URL)-len("/sdk")] + "/folder/x?dsName=LocalDS_0")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("status %d without a session, want 401", resp.StatusCode)
	}
	if _, err := Start(ctx, Options{Address: "0.0.0.0:0"}); err == nil {
		t.Error("a non-loopback address was accepted")
	}
}

func insecureTLS() *tls.Config { return &tls.Config{InsecureSkipVerify: true} } //nolint:gosec // test of a local server

// TestDatastoreNeedsALiveSession shows the /folder interface honouring
// the session manager: a cookie works while its session lives, and a
// transfer whose session is ended while it runs logs in again and
// finishes.
func TestDatastoreNeedsALiveSession(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Start(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	vm, err := s.AddVM(ctx, SampleVM("web-01", 3))
	if err != nil {
		t.Fatal(err)
	}
	sess := connect(ctx, t, s, Datacenter)
	defer func() { _ = sess.Logout(context.Background()) }()
	obj, err := vsphere.FindVM(ctx, sess, v1alpha1.VMSelector{Name: "web-01"})
	if err != nil {
		t.Fatal(err)
	}
	if err := vsphere.PowerOff(ctx, obj); err != nil {
		t.Fatal(err)
	}

	// A cookie is accepted while its session lives, and not after.
	cookie := ""
	for _, c := range sess.Client().Client.Jar.Cookies(sess.Client().URL()) {
		if c.Name == soap.SessionCookieName {
			cookie = c.Value
		}
	}
	folder := s.URL[:len(s.URL)-len("/sdk")] + "/folder/web-01/web-01.vmdk?dcPath=DC0&dsName=" + Datastore
	get := func() int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, folder, nil)
		req.AddCookie(&http.Cookie{Name: soap.SessionCookieName, Value: cookie})
		resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: insecureTLS()}}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get(); code != http.StatusOK {
		t.Fatalf("a live session's cookie: %d", code)
	}

	dir := t.TempDir()
	spec := wire.JobSpec{Version: wire.SpecVersion, Endpoint: wire.EndpointSpec{URL: s.URL, Datacenter: Datacenter}, VMMoRef: vm.MoRef}
	for _, d := range vm.Disks {
		spec.Disks = append(spec.Disks, wire.DiskSpec{Key: d.Key, FileName: d.FileName, CapacityBytes: d.SizeBytes,
			Destination: filepath.Join(dir, d.SHA256[:8]+".img")})
	}
	plans, err := (&transfer.Planner{Client: sess.Client(), DatacenterPath: Datacenter}).Plan(ctx, &spec)
	if err != nil {
		t.Fatal(err)
	}
	// The first disk's read waits in the server while every session ends:
	// the reads after it find the session gone.
	release := s.HoldExtentReads("web-01")
	done := make(chan *wire.Result, 1)
	go func() {
		done <- transfer.Run(ctx, plans, transfer.Options{Parallel: 1, RetryDelay: 10 * time.Millisecond,
			RefreshSession: func(ctx context.Context) error { return transfer.Touch(ctx, sess.Client()) }, Logf: t.Logf})
	}()
	for s.heldReads() == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	if n, err := s.EndSessions(ctx); err != nil || n == 0 {
		t.Fatalf("ended %d sessions: %v", n, err)
	}
	release()
	res := <-done
	if !res.Succeeded {
		t.Fatalf("the transfer did not survive the end of its session: %s", res.Error)
	}
	for i, d := range vm.Disks {
		if res.Disks[i].SHA256 != d.SHA256 {
			t.Errorf("disk %d: checksum differs", i)
		}
	}
	if s.SessionRefusals() == 0 {
		t.Error("no read was refused for want of a live session: the transfer never had to log in again")
	}
	if code := get(); code != http.StatusUnauthorized {
		t.Errorf("an ended session's cookie: %d, want 401", code)
	}
}

// TestInventoryAsRealOnes builds what real inventories have: disks of any
// sector-multiple size, several datastores, a VM in a sub-folder of a
// second datacenter; the controller's inventory code reads it back and the
// transfer copies every disk byte for byte.
func TestInventoryAsRealOnes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Start(ctx, Options{Datacenters: 2, Datastores: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.AddVM(ctx, VMSpec{Name: "bad", Disks: []DiskSpec{{SizeBytes: 1000}}}); err == nil {
		t.Error("a disk of 1000 bytes (not a multiple of 512) was accepted")
	}
	spec := VMSpec{
		Name: "db-07", Datacenter: "DC1", Folder: "prod/db", Datastore: "LocalDS_1",
		Sockets: 1, CoresPerSocket: 2, MemoryMiB: 1024, Firmware: "bios",
		Disks: []DiskSpec{
			{SizeBytes: 512, Seed: 1},
			{SizeBytes: 3*MiB + 512, Seed: 2, Datastore: "LocalDS_0"},
			{SizeBytes: 1536, Seed: 3},
		},
		NICs: []NICSpec{{Network: NetworkVM, MAC: macFor(9, 1)}},
	}
	vm, err := s.AddVM(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if vm.InventoryPath != "/DC1/vm/prod/db/db-07" {
		t.Errorf("inventory path %s", vm.InventoryPath)
	}
	sess := connect(ctx, t, s, "DC1")
	defer func() { _ = sess.Logout(context.Background()) }()
	obj, err := vsphere.FindVM(ctx, sess, v1alpha1.VMSelector{InventoryPath: vm.InventoryPath})
	if err != nil {
		t.Fatal(err)
	}
	inv, err := vsphere.Inventory(ctx, sess, obj)
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Disks) != len(spec.Disks) {
		t.Fatalf("%d disks read back", len(inv.Disks))
	}
	dir := t.TempDir()
	job := wire.JobSpec{Version: wire.SpecVersion, Endpoint: wire.EndpointSpec{URL: s.URL, Datacenter: "DC1"}, VMMoRef: vm.MoRef}
	for i, d := range vm.Disks {
		got := inv.Disks[i]
		if got.CapacityBytes != spec.Disks[i].SizeBytes || got.FileName != d.FileName || got.Datastore != d.Datastore {
			t.Errorf("disk %d read back as %d bytes in %s on %s; created %d bytes in %s on %s",
				i, got.CapacityBytes, got.FileName, got.Datastore, spec.Disks[i].SizeBytes, d.FileName, d.Datastore)
		}
		job.Disks = append(job.Disks, wire.DiskSpec{Key: d.Key, FileName: d.FileName, CapacityBytes: d.SizeBytes,
			Destination: filepath.Join(dir, d.SHA256[:8]+".img")})
	}
	plans, err := (&transfer.Planner{Client: sess.Client(), DatacenterPath: "DC1"}).Plan(ctx, &job)
	if err != nil {
		t.Fatal(err)
	}
	if res := transfer.Run(ctx, plans, transfer.Options{}); !res.Succeeded {
		t.Fatalf("transfer failed: %s", res.Error)
	}
	for i, d := range vm.Disks {
		b, err := os.ReadFile(job.Disks[i].Destination)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, DiskBytes(d.SizeBytes, spec.Disks[i].Seed)) {
			t.Errorf("disk %d (%d bytes): bytes differ", i, d.SizeBytes)
		}
	}
	if st, err := s.PowerState(ctx, "db-07"); err != nil || st != "poweredOff" {
		t.Errorf("power state in DC1: %q, %v", st, err)
	}
}

// TestDiskBytesAnySize checks that the content generator serves small and
// odd sizes without panicking, deterministically.
func TestDiskBytesAnySize(t *testing.T) {
	for _, size := range []int64{0, 512, 1536, MiB / 2, MiB + 512, 2*MiB + 1024, 3*MiB + 512} {
		a, b := DiskBytes(size, 5), DiskBytes(size, 5)
		if int64(len(a)) != size || !bytes.Equal(a, b) {
			t.Errorf("size %d: %d bytes, deterministic %v", size, len(a), bytes.Equal(a, b))
		}
	}
	if big := DiskBytes(4*MiB, 5); bytes.Count(big[MiB:2*MiB], []byte{0}) != int(MiB) || bytes.Equal(big[:MiB], make([]byte, MiB)) {
		t.Error("a 4 MiB disk lacks its zero MiB or its data")
	}
}

// connect logs in as the controller does.
func connect(ctx context.Context, t *testing.T, s *Server, datacenter string) *vsphere.Session {
	t.Helper()
	sess, err := vsphere.Connect(ctx, vsphere.Endpoint{URL: s.URL, Datacenter: datacenter},
		vsphere.Credentials{Username: s.Username, Password: s.Password, Thumbprint: s.Thumbprint})
	if err != nil {
		t.Fatal(err)
	}
	return sess
}
