package vcsimlocal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	require.NoError(t, os.WriteFile(image, data, 0o444), "writing the image")
	sum := sha256.Sum256(data)
	_, err := ImageDisk(image + ".missing")
	assert.Error(t, err, "a missing image must be refused")
	disk, err := ImageDisk(image)
	require.NoError(t, err, "ImageDisk")
	s, err := Start(ctx, Options{})
	require.NoError(t, err, "starting the simulator")
	defer s.Close()
	vm, err := s.AddVM(ctx, VMSpec{Name: "guest", Sockets: 1, CoresPerSocket: 1, MemoryMiB: 1024, Firmware: "bios", Disks: []DiskSpec{disk}})
	require.NoError(t, err, "adding the VM")
	require.Len(t, vm.Disks, 1, "the VM's one disk")
	root, err := FileRoot(disk.Image)
	require.NoError(t, err)
	assert.Equal(t, root, vm.Disks[0].SHA256, "the disk's checksum is the root of the image's block tree")
	assert.NotEqual(t, hex.EncodeToString(sum[:]), root, "not the whole image's SHA-256")
	assert.Equal(t, 4*MiB, vm.Disks[0].SizeBytes, "the disk's size is the image's")

	ds, err := find.NewFinder(s.client.Client, false).Datastore(ctx, "/"+Datacenter+"/datastore/"+Datastore)
	require.NoError(t, err, "finding the datastore")
	var props mo.Datastore
	require.NoError(t, ds.Properties(ctx, ds.Reference(), []string{"summary.url"}, &props), "reading the datastore's URL")
	// os.Stat follows a symbolic link: a hard link and a symbolic link
	// to the image are both the same file as the image, a copy is not.
	extent, err := os.Stat(filepath.Join(props.Summary.Url, "guest", "guest-flat.vmdk"))
	require.NoError(t, err, "the flat extent")
	orig, err := os.Stat(image)
	require.NoError(t, err, "the image")
	assert.True(t, os.SameFile(extent, orig), "the flat extent is a copy of the image, not the image")
	desc, err := os.ReadFile(filepath.Join(props.Summary.Url, "guest", "guest.vmdk"))
	if assert.NoError(t, err, "reading the descriptor") {
		assert.Contains(t, string(desc), `RW 8192 VMFS "guest-flat.vmdk"`, "the descriptor names the flat extent, 8192 sectors")
	}

	sess, err := vsphere.Connect(ctx, vsphere.Endpoint{URL: s.URL, Datacenter: Datacenter},
		vsphere.Credentials{Username: s.Username, Password: s.Password, Thumbprint: s.Thumbprint})
	require.NoError(t, err, "logging in as the controller does")
	defer func() { _ = sess.Logout(context.Background()) }()
	dst := filepath.Join(t.TempDir(), "disk.img")
	spec := wire.JobSpec{Version: wire.SpecVersion, Endpoint: wire.EndpointSpec{URL: s.URL, Datacenter: Datacenter}, VMMoRef: vm.MoRef,
		Disks: []wire.DiskSpec{{Key: vm.Disks[0].Key, FileName: vm.Disks[0].FileName, CapacityBytes: 4 * MiB, Destination: dst}}}
	plans, err := (&transfer.Planner{Client: sess.Client(), DatacenterPath: Datacenter}).Plan(ctx, &spec)
	require.NoError(t, err, "planning the transfer")
	res := transfer.Run(ctx, plans, transfer.Options{})
	assert.True(t, res.Succeeded, "the transfer failed: %s", res.Error)
	if assert.Len(t, res.Disks, 1, "the transfer's result of the one disk") {
		assert.Equal(t, vm.Disks[0].SHA256, res.Disks[0].SHA256, "the transfer read the image's bytes")
	}
	got, err := os.ReadFile(image)
	require.NoError(t, err, "reading the image back")
	assert.Equal(t, sum, sha256.Sum256(got), "serving the image changed it")
}
