package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"platform.example/vm-migration/test/framework"
)

func TestMemoryLimitFlag(t *testing.T) {
	deployment, err := deploymentMemoryLimit(framework.RepoPath(deploymentManifest))
	require.NoError(t, err)
	assert.Equal(t, int64(512<<20), deployment, "the Deployment's memory limit")
	for value, want := range map[string]int64{"deployment": deployment, "0": 0, "": 0, "1Gi": 1 << 30, "300M": 300e6} {
		got, err := memoryLimit(value)
		require.NoError(t, err, value)
		assert.Equal(t, want, got, value)
	}
	_, err = memoryLimit("lots")
	assert.ErrorContains(t, err, "want deployment, 0 or a quantity")
}

// TestMemoryCgroup: a process started through the cgroup runs in it from
// its first instruction, under its limit; the cgroup goes at the end. It
// needs a cgroup hierarchy the test may write (root, cgroup v1 here).
func TestMemoryCgroup(t *testing.T) {
	if _, _, err := ownMemoryCgroupDir(); err != nil || os.Geteuid() != 0 {
		t.Skipf("no writable memory cgroup here (uid %d): %v", os.Geteuid(), err)
	}
	cg, err := newMemoryCgroup(64 << 20)
	if err != nil && strings.Contains(err.Error(), "permission denied") {
		t.Skipf("the cgroup hierarchy is read-only here: %v", err)
	}
	require.NoError(t, err)
	defer func() { require.NoError(t, cg.remove()) }()
	out, err := cg.command("/bin/sh", "-c", "cat /proc/self/cgroup").Output()
	require.NoError(t, err)
	rel := filepath.Base(cg.dir)
	assert.Contains(t, string(out), rel, "the process's cgroups")
	limitFile := "memory.limit_in_bytes"
	if cg.v2 {
		limitFile = "memory.max"
	}
	data, err := os.ReadFile(filepath.Join(cg.dir, limitFile))
	require.NoError(t, err)
	assert.Equal(t, strconv.Itoa(64<<20), strings.TrimSpace(string(data)))
	assert.GreaterOrEqual(t, cg.stats().maxUsage, int64(0))
}
