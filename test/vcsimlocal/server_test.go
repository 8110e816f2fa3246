package vcsimlocal

import (
	"bytes"
	"context"
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	require.NoError(t, err, "starting the simulator")
	defer s.Close()
	vm, err := s.AddVM(ctx, SampleVM("web-01", 7))
	require.NoError(t, err, "adding the sample VM")
	st, err := s.PowerState(ctx, "web-01")
	require.NoError(t, err, "reading the power state")
	require.Equal(t, "poweredOn", st, "the sample VM starts powered on")

	ep := vsphere.Endpoint{URL: s.URL, Datacenter: Datacenter}
	creds := vsphere.Credentials{Username: s.Username, Password: s.Password, Thumbprint: s.Thumbprint}
	sess, err := vsphere.Connect(ctx, ep, creds)
	require.NoError(t, err, "logging in as the controller does")
	defer func() { _ = sess.Logout(context.Background()) }()
	obj, err := vsphere.FindVM(ctx, sess, v1alpha1.VMSelector{Name: "web-01"})
	require.NoError(t, err, "finding the VM")
	inv, err := vsphere.Inventory(ctx, sess, obj)
	require.NoError(t, err, "reading the inventory")
	assert.Equal(t, v1alpha1.FirmwareEFI, inv.Firmware, "the sample VM's firmware")
	assert.True(t, inv.SecureBoot, "the sample VM has secure boot")
	assert.Equal(t, int64(2048), inv.MemoryMiB, "the sample VM's memory")
	assert.Equal(t, int32(2), inv.CPU.Sockets, "the sample VM's sockets")
	assert.Equal(t, int32(2), inv.CPU.CoresPerSocket, "the sample VM's cores per socket")
	require.Len(t, inv.Disks, 3, "the sample VM's disks")
	require.Len(t, inv.NICs, 2, "the sample VM's NICs")
	for i, n := range inv.NICs {
		assert.Equal(t, vm.MACs[i], n.MAC, "NIC %d's MAC", i)
		assert.Equal(t, vm.Spec.NICs[i].Network, n.Network, "NIC %d's network", i)
	}

	dir := t.TempDir()
	spec := wire.JobSpec{Version: wire.SpecVersion, Endpoint: wire.EndpointSpec{URL: s.URL, Datacenter: Datacenter}, VMMoRef: vm.MoRef}
	for i, d := range vm.Disks {
		assert.Equal(t, d.Key, inv.Disks[i].Key, "disk %d's key", i)
		assert.Equal(t, d.SizeBytes, inv.Disks[i].CapacityBytes, "disk %d's capacity", i)
		assert.Equal(t, d.FileName, inv.Disks[i].FileName, "disk %d's file", i)
		spec.Disks = append(spec.Disks, wire.DiskSpec{Key: d.Key, FileName: d.FileName, CapacityBytes: d.SizeBytes,
			Destination: filepath.Join(dir, d.SHA256[:8]+".img")})
	}
	// The transfer reads the disks of a powered-off VM.
	require.NoError(t, vsphere.PowerOff(ctx, obj), "powering the VM off")
	plans, err := (&transfer.Planner{Client: sess.Client(), DatacenterPath: "DC0"}).Plan(ctx, &spec)
	require.NoError(t, err, "planning the transfer")
	res := transfer.Run(ctx, plans, transfer.Options{})
	require.True(t, res.Succeeded, "the transfer failed: %s", res.Error)
	require.Len(t, res.Disks, len(vm.Disks), "a transfer result per disk")
	for i, d := range vm.Disks {
		b, err := os.ReadFile(spec.Disks[i].Destination)
		require.NoError(t, err, "reading disk %d's copy", i)
		root, err := FileRoot(spec.Disks[i].Destination)
		require.NoError(t, err)
		assert.Equal(t, d.SHA256, root, "disk %d: the copy's checksum", i)
		assert.Equal(t, d.SHA256, res.Disks[i].SHA256, "disk %d: the checksum the transfer reports", i)
		assert.True(t, bytes.Equal(b, DiskBytes(d.SizeBytes, vm.Spec.Disks[i].Seed)), "disk %d: the copy's bytes differ from the disk's", i)
	}
}

// TestFolderNeedsSessionAndFaults checks the session check and the fault injection.
func TestFolderNeedsSessionAndFaults(t *testing.T) {
	ctx := context.Background()
	s, err := Start(ctx, Options{})
	require.NoError(t, err, "starting the simulator")
	defer s.Close()
	require.False(t, s.refuse("/folder/a/a-flat.vmdk", "c1"), "no fault configured, yet refused")
	s.FailExtentReads("a", 1)
	assert.True(t, s.refuse("/folder/a/a-flat.vmdk", "c1"), "the first session's read of a's first disk is not refused")
	assert.True(t, s.refuse("/folder/a/a_1-flat.vmdk", "c1"), "the first session's read of a's second disk is not refused")
	assert.False(t, s.refuse("/folder/a/a-flat.vmdk", "c2"), "a second session is refused")
	assert.False(t, s.refuse("/folder/b/b-flat.vmdk", "c1"), "another VM is refused")
	assert.Equal(t, 2, s.RefusedReads("a"), "reads of a refused")
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: insecureTLS()}}
	resp, err := client.Get(s.URL[:len(s.URL)-len("/sdk")] + "/folder/x?dsName=LocalDS_0")
	require.NoError(t, err, "reading /folder without a session")
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a read without a session is unauthorized")
	_, err = Start(ctx, Options{Address: "0.0.0.0:0"})
	assert.Error(t, err, "a non-loopback address must be refused")
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
	require.NoError(t, err, "starting the simulator")
	defer s.Close()
	vm, err := s.AddVM(ctx, SampleVM("web-01", 3))
	require.NoError(t, err, "adding the sample VM")
	sess := connect(ctx, t, s, Datacenter)
	defer func() { _ = sess.Logout(context.Background()) }()
	obj, err := vsphere.FindVM(ctx, sess, v1alpha1.VMSelector{Name: "web-01"})
	require.NoError(t, err, "finding the VM")
	require.NoError(t, vsphere.PowerOff(ctx, obj), "powering the VM off")

	// A cookie is accepted while its session lives, and not after.
	cookie := ""
	for _, c := range sess.Client().Client.Jar.Cookies(sess.Client().URL()) {
		if c.Name == soap.SessionCookieName {
			cookie = c.Value
		}
	}
	folder := s.URL[:len(s.URL)-len("/sdk")] + "/folder/web-01/web-01.vmdk?dcPath=DC0&dsName=" + Datastore
	get := func() int {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, folder, nil)
		require.NoError(t, err, "making the /folder request")
		req.AddCookie(&http.Cookie{Name: soap.SessionCookieName, Value: cookie})
		resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: insecureTLS()}}).Do(req)
		require.NoError(t, err, "reading through /folder")
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusOK, get(), "a live session's cookie is accepted")

	dir := t.TempDir()
	spec := wire.JobSpec{Version: wire.SpecVersion, Endpoint: wire.EndpointSpec{URL: s.URL, Datacenter: Datacenter}, VMMoRef: vm.MoRef}
	for _, d := range vm.Disks {
		spec.Disks = append(spec.Disks, wire.DiskSpec{Key: d.Key, FileName: d.FileName, CapacityBytes: d.SizeBytes,
			Destination: filepath.Join(dir, d.SHA256[:8]+".img")})
	}
	plans, err := (&transfer.Planner{Client: sess.Client(), DatacenterPath: Datacenter}).Plan(ctx, &spec)
	require.NoError(t, err, "planning the transfer")
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
	n, err := s.EndSessions(ctx)
	require.NoError(t, err, "ending the sessions")
	require.NotZero(t, n, "no session was ended")
	release()
	res := <-done
	require.True(t, res.Succeeded, "the transfer did not survive the end of its session: %s", res.Error)
	require.Len(t, res.Disks, len(vm.Disks), "a transfer result per disk")
	for i, d := range vm.Disks {
		assert.Equal(t, d.SHA256, res.Disks[i].SHA256, "disk %d: the checksum the transfer reports", i)
	}
	assert.NotZero(t, s.SessionRefusals(), "no read was refused for want of a live session: the transfer never had to log in again")
	assert.Equal(t, http.StatusUnauthorized, get(), "an ended session's cookie is refused")
}

// TestInventoryAsRealOnes builds what real inventories have: disks of any
// sector-multiple size, several datastores, a VM in a sub-folder of a
// second datacenter; the controller's inventory code reads it back and the
// transfer copies every disk byte for byte.
func TestInventoryAsRealOnes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Start(ctx, Options{Datacenters: 2, Datastores: 2})
	require.NoError(t, err, "starting the simulator")
	defer s.Close()
	_, err = s.AddVM(ctx, VMSpec{Name: "bad", Disks: []DiskSpec{{SizeBytes: 1000}}})
	assert.Error(t, err, "a disk of 1000 bytes (not a multiple of 512) must be refused")
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
	require.NoError(t, err, "adding the VM")
	assert.Equal(t, "/DC1/vm/prod/db/db-07", vm.InventoryPath, "the VM's inventory path: its datacenter and folder")
	sess := connect(ctx, t, s, "DC1")
	defer func() { _ = sess.Logout(context.Background()) }()
	obj, err := vsphere.FindVM(ctx, sess, v1alpha1.VMSelector{InventoryPath: vm.InventoryPath})
	require.NoError(t, err, "finding the VM by its inventory path")
	inv, err := vsphere.Inventory(ctx, sess, obj)
	require.NoError(t, err, "reading the inventory")
	require.Len(t, inv.Disks, len(spec.Disks), "the disks read back")
	dir := t.TempDir()
	job := wire.JobSpec{Version: wire.SpecVersion, Endpoint: wire.EndpointSpec{URL: s.URL, Datacenter: "DC1"}, VMMoRef: vm.MoRef}
	for i, d := range vm.Disks {
		got := inv.Disks[i]
		assert.Equal(t, spec.Disks[i].SizeBytes, got.CapacityBytes, "disk %d read back: its capacity", i)
		assert.Equal(t, d.FileName, got.FileName, "disk %d read back: its file", i)
		assert.Equal(t, d.Datastore, got.Datastore, "disk %d read back: its datastore", i)
		job.Disks = append(job.Disks, wire.DiskSpec{Key: d.Key, FileName: d.FileName, CapacityBytes: d.SizeBytes,
			Destination: filepath.Join(dir, d.SHA256[:8]+".img")})
	}
	plans, err := (&transfer.Planner{Client: sess.Client(), DatacenterPath: "DC1"}).Plan(ctx, &job)
	require.NoError(t, err, "planning the transfer")
	res := transfer.Run(ctx, plans, transfer.Options{})
	require.True(t, res.Succeeded, "the transfer failed: %s", res.Error)
	for i, d := range vm.Disks {
		b, err := os.ReadFile(job.Disks[i].Destination)
		require.NoError(t, err, "reading disk %d's copy", i)
		assert.True(t, bytes.Equal(b, DiskBytes(d.SizeBytes, spec.Disks[i].Seed)), "disk %d (%d bytes): the copy's bytes differ from the disk's", i, d.SizeBytes)
	}
	st, err := s.PowerState(ctx, "db-07")
	if assert.NoError(t, err, "reading the power state in DC1") {
		assert.Equal(t, "poweredOff", st, "the power state of db-07 in DC1")
	}
}

// TestDiskBytesAnySize checks that the content generator serves small and
// odd sizes without panicking, deterministically.
func TestDiskBytesAnySize(t *testing.T) {
	for _, size := range []int64{0, 512, 1536, MiB / 2, MiB + 512, 2*MiB + 1024, 3*MiB + 512} {
		a, b := DiskBytes(size, 5), DiskBytes(size, 5)
		assert.Equal(t, size, int64(len(a)), "size %d: the bytes generated", size)
		assert.True(t, bytes.Equal(a, b), "size %d: the content is not deterministic", size)
	}
	big := DiskBytes(4*MiB, 5)
	assert.Equal(t, int(MiB), bytes.Count(big[MiB:2*MiB], []byte{0}), "a 4 MiB disk lacks its zero MiB")
	assert.False(t, bytes.Equal(big[:MiB], make([]byte, MiB)), "a 4 MiB disk lacks its data")
}

// connect logs in as the controller does.
func connect(ctx context.Context, t *testing.T, s *Server, datacenter string) *vsphere.Session {
	t.Helper()
	sess, err := vsphere.Connect(ctx, vsphere.Endpoint{URL: s.URL, Datacenter: datacenter},
		vsphere.Credentials{Username: s.Username, Password: s.Password, Thumbprint: s.Thumbprint})
	require.NoError(t, err, "logging in as the controller does")
	return sess
}
