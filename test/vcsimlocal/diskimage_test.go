package vcsimlocal

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWriteDiskImageIsDiskBytes: the image written a MiB at a time (for
// a disk too large to hold in memory: vcsim-local --disk-gib) holds the
// very bytes of DiskBytes, whatever the size.
func TestWriteDiskImageIsDiskBytes(t *testing.T) {
	for _, size := range []int64{0, 100, 512<<10 - 3, 2 * MiB, 3*MiB + 5, 5 * MiB} {
		file := filepath.Join(t.TempDir(), "disk.img")
		require.NoError(t, WriteDiskImage(file, size, 42))
		got, err := os.ReadFile(file)
		require.NoError(t, err)
		assert.Equal(t, int(size), len(got), "size %d", size)
		assert.True(t, bytes.Equal(DiskBytes(size, 42), got), "size %d: the image's bytes differ from DiskBytes", size)
	}
}
