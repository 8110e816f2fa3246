package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCDIFilesAddsParentsSorted: every file, link and folder of CDI's
// layer, with each parent folder once, in path order.
func TestCDIFilesAddsParentsSorted(t *testing.T) {
	src := filepath.Join(t.TempDir(), "script.sh")
	require.NoError(t, os.WriteFile(src, []byte("#!/bin/sh\n"), 0o644))
	files, arch, err := cdiFiles(spec{
		files: list{"/usr/bin/cloner_startup.sh=" + src},
		links: list{"/usr/bin/cat=busybox"},
		dirs:  list{"/tmp=1777", "/home/cdi-cloner"},
	})
	require.NoError(t, err)
	assert.Equal(t, "amd64", arch, "no static executable: the default architecture")
	var paths []string
	for _, f := range files {
		paths = append(paths, f.Path)
	}
	assert.Equal(t, []string{"home", "home/cdi-cloner", "tmp", "usr", "usr/bin", "usr/bin/cat", "usr/bin/cloner_startup.sh"}, paths)
	byPath := map[string]int64{}
	for _, f := range files {
		byPath[f.Path] = f.Mode
	}
	assert.Equal(t, int64(0o1777), byPath["tmp"], "/tmp's mode")
	assert.Equal(t, int64(0o755), byPath["usr/bin/cloner_startup.sh"], "files are executable")
	assert.Equal(t, "busybox", files[5].Link, "the link's target")

	_, _, err = cdiFiles(spec{files: list{"/usr/bin/x"}})
	assert.Error(t, err, "a -file without its source")
	_, _, err = cdiFiles(spec{dirs: list{"/tmp=rwx"}})
	assert.Error(t, err, "a mode that is not octal")
}
