package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestInstallCopiesItself: vm-transfer install DIR leaves an executable
// copy of the running binary at DIR/vm-transfer, byte for byte.
func TestInstallCopiesItself(t *testing.T) {
	dir := t.TempDir()
	var stderr bytes.Buffer
	require.Equal(t, 0, install([]string{dir}, &stderr), stderr.String())
	self, err := os.Executable()
	require.NoError(t, err)
	want, err := os.ReadFile(self)
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(dir, "vm-transfer"))
	require.NoError(t, err)
	assert.True(t, bytes.Equal(want, got), "a copy of the running binary")
	info, err := os.Stat(filepath.Join(dir, "vm-transfer"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), info.Mode().Perm())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary left")

	stderr.Reset()
	assert.Equal(t, 2, install(nil, &stderr))
	assert.Contains(t, stderr.String(), "give the folder")
	assert.Equal(t, 1, install([]string{filepath.Join(dir, "missing")}, &stderr))
}
