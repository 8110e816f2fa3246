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
