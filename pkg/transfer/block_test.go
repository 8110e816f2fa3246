package transfer_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"platform.example/vm-migration/pkg/blocktree"
	"platform.example/vm-migration/pkg/transfer"
)

// loopDevice attaches a file of size bytes full of 0xEE to a loop device,
// or skips the test where that is not allowed.
func loopDevice(t *testing.T, size int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("loop devices need root")
	}
	backing := filepath.Join(t.TempDir(), "backing")
	require.NoError(t, os.WriteFile(backing, bytes.Repeat([]byte{0xEE}, size), 0o600))
	out, err := exec.Command("losetup", "--find", "--show", backing).CombinedOutput()
	if err != nil {
		t.Skipf("no loop device: %v: %s", err, out)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() { _ = exec.Command("losetup", "--detach", dev).Run() })
	return dev
}

func TestBlockDevice(t *testing.T) {
	dev := loopDevice(t, 16*mib)
	e := newSim(t)

	big := e.testDisk(t, "big", diskData(20*mib, 14))
	big.Destination = dev
	_, _, stderr := newCLI(t, e, e.jobSpec(big), testPassword, e.creds.Thumbprint).run(t)
	require.Contains(t, stderr, "smaller than the disk's")

	data := diskData(12*mib, 15)
	d := e.testDisk(t, "fits", data)
	d.Destination = dev
	// A device has no tree file unless the spec names one.
	d.TreeFile = filepath.Join(t.TempDir(), "fits.tree")
	res := transfer.Run(context.Background(), e.plan(t, e.jobSpec(d)), testOptions(t))
	require.True(t, res.Succeeded, res.Error)
	require.Equal(t, treeRoot(data), res.Disks[0].SHA256)
	tf, err := os.Open(d.TreeFile)
	require.NoError(t, err)
	defer tf.Close()
	tree, err := blocktree.ReadTree(tf)
	require.NoError(t, err)
	require.Equal(t, treeRoot(data), tree.Root(), "the tree file of the disk's capacity, not of the device")
	entries, err := os.ReadDir(filepath.Dir(d.TreeFile))
	require.NoError(t, err)
	require.Len(t, entries, 1, "only the tree file, no partial left: %v", entries)

	f, err := os.Open(dev)
	require.NoError(t, err)
	defer f.Close()
	got := make([]byte, 16*mib)
	_, err = f.ReadAt(got, 0)
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got[:len(data)]), "the device does not hold the disk: zero runs must overwrite old content")
	require.Equal(t, bytes.Repeat([]byte{0xEE}, 4*mib), got[len(data):], "bytes past the disk were touched")
}

// TestBlockDeviceAllocatedOnly copies a thin disk's allocated areas onto
// a device that holds old bytes: the holes are zeroed, so the device
// holds the disk exactly, and nothing past it is touched.
func TestBlockDeviceAllocatedOnly(t *testing.T) {
	dev := loopDevice(t, 48*mib)
	e := newSim(t)
	data, _, d := e.thinDisk(t, "thin", thinSize, 74, 20)
	d.Destination = dev
	plans := e.plan(t, e.jobSpec(d))
	allocated := allocatedOf(t, plans[0])
	res := transfer.Run(context.Background(), plans, testOptions(t))
	e.waitRunServed(t)
	require.True(t, res.Succeeded, res.Error)
	require.Equal(t, treeRoot(data), res.Disks[0].SHA256)
	require.Equal(t, allocated, e.served.Load(), "only the allocated areas are read")

	f, err := os.Open(dev)
	require.NoError(t, err)
	defer f.Close()
	got := make([]byte, 48*mib)
	_, err = f.ReadAt(got, 0)
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got[:len(data)]), "the device does not hold the disk: its holes must overwrite old content")
	require.Equal(t, bytes.Repeat([]byte{0xEE}, len(got)-len(data)), got[len(data):], "bytes past the disk were touched")
}
