package vcsimlocal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/vim25/mo"

	"platform.example/vm-migration/pkg/transfer"
	"platform.example/vm-migration/pkg/transfer/wire"
	"platform.example/vm-migration/pkg/vsphere"
)

// TestImageDisk serves an image file as a VM's disk: the datastore holds a
// descriptor and, as the flat extent, the image itself (not a copy), and
// the real transfer reads the image's bytes back.
func TestImageDisk(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	image := filepath.Join(t.TempDir(), "guest.img")
	data := DiskBytes(4*MiB, 3)
	if err := os.WriteFile(image, data, 0o444); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if _, err := ImageDisk(image + ".missing"); err == nil {
		t.Error("a missing image was accepted")
	}
	disk, err := ImageDisk(image)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Start(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	vm, err := s.AddVM(ctx, VMSpec{Name: "guest", Sockets: 1, CoresPerSocket: 1, MemoryMiB: 1024, Firmware: "bios", Disks: []DiskSpec{disk}})
	if err != nil {
		t.Fatal(err)
	}
	if vm.Disks[0].SHA256 != hex.EncodeToString(sum[:]) || vm.Disks[0].SizeBytes != 4*MiB {
		t.Errorf("disk %+v, want the image's size and checksum", vm.Disks[0])
	}

	ds, err := find.NewFinder(s.client.Client, false).Datastore(ctx, "/"+Datacenter+"/datastore/"+Datastore)
	if err != nil {
		t.Fatal(err)
	}
	var props mo.Datastore
	if err := ds.Properties(ctx, ds.Reference(), []string{"summary.url"}, &props); err != nil {
		t.Fatal(err)
	}
	extent, err := os.Stat(filepath.Join(props.Summary.Url, "guest", "guest-flat.vmdk"))
	if err != nil {
		t.Fatal(err)
	}
	orig, _ := os.Stat(image)
	if !os.SameFile(extent, orig) && extent.Mode()&os.ModeSymlink == 0 {
		t.Error("the flat extent is a copy of the image, not the image")
	}
	desc, err := os.ReadFile(filepath.Join(props.Summary.Url, "guest", "guest.vmdk"))
	if err != nil || !strings.Contains(string(desc), `RW 8192 VMFS "guest-flat.vmdk"`) {
		t.Errorf("descriptor %q, %v", desc, err)
	}

	sess, err := vsphere.Connect(ctx, vsphere.Endpoint{URL: s.URL, Datacenter: Datacenter},
		vsphere.Credentials{Username: s.Username, Password: s.Password, Thumbprint: s.Thumbprint})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sess.Logout(context.Background()) }()
	dst := filepath.Join(t.TempDir(), "disk.img")
	spec := wire.JobSpec{Version: wire.SpecVersion, Endpoint: wire.EndpointSpec{URL: s.URL, Datacenter: Datacenter}, VMMoRef: vm.MoRef,
		Disks: []wire.DiskSpec{{Key: vm.Disks[0].Key, FileName: vm.Disks[0].FileName, CapacityBytes: 4 * MiB, Destination: dst}}}
	plans, err := (&transfer.Planner{Client: sess.Client(), DatacenterPath: Datacenter}).Plan(ctx, &spec)
	if err != nil {
		t.Fatal(err)
	}
	if res := transfer.Run(ctx, plans, transfer.Options{}); !res.Succeeded || res.Disks[0].SHA256 != vm.Disks[0].SHA256 {
		t.Errorf("transfer %+v, want the image's checksum", res)
	}
	if got, _ := os.ReadFile(image); sha256.Sum256(got) != sum {
		t.Error("serving the image changed it")
	}
}
