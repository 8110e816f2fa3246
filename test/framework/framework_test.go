package framework

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests need no control-plane binaries: they run with go test ./...

func TestStopKillsTheWholeProcessGroup(t *testing.T) {
	s := newSpawner()
	defer s.close()
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "grandchild.pid")
	// The shell starts a grandchild that ignores SIGTERM, then waits.
	script := "trap '' TERM; sh -c 'trap \"\" TERM; sleep 300' & echo $! > " + pidFile + "; wait"
	p, err := startProcess(s, "sh", "/bin/sh", []string{"-c", script}, dir)
	require.NoError(t, err, "starting sh")
	var grandchild int
	deadline := time.Now().Add(5 * time.Second)
	for grandchild == 0 && time.Now().Before(deadline) {
		if b, err := os.ReadFile(pidFile); err == nil {
			grandchild, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.NotZero(t, grandchild, "the grandchild did not start")
	pgid, err := syscall.Getpgid(grandchild)
	require.NoError(t, err, "the grandchild's process group")
	require.Equal(t, p.pid(), pgid, "the grandchild's process group, want the child's")

	start := time.Now()
	p.stop(500 * time.Millisecond)
	t.Logf("stopped in %s", time.Since(start).Round(time.Millisecond))
	exited, _ := p.exited()
	assert.True(t, exited, "the process is still running after stop")
	// The grandchild is not our child: it is gone once signalled, or a
	// zombie until init reaps it.
	assert.Eventually(t, func() bool {
		return errors.Is(syscall.Kill(grandchild, 0), syscall.ESRCH) || isZombie(grandchild)
	}, 5*time.Second, 50*time.Millisecond, "grandchild %d survived the stop", grandchild)
}

func isZombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// pid (comm) state ...
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

func TestExitedReportsAnEarlyExit(t *testing.T) {
	s := newSpawner()
	defer s.close()
	p, err := startProcess(s, "false", "/bin/sh", []string{"-c", "echo boom >&2; exit 3"}, t.TempDir())
	require.NoError(t, err, "starting sh")
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		require.FailNow(t, "did not exit within 5s")
	}
	ok, why := p.exited()
	assert.True(t, ok, "exited() = %v, %v, want it exited", ok, why)
	assert.ErrorContains(t, why, "exit status 3", "exited() = %v, %v, want why it exited", ok, why)
	assert.Equal(t, "boom", p.tail(5), "log tail")
	p.stop(time.Second) // stopping an exited process is harmless
}

func TestNamespaceName(t *testing.T) {
	valid := regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	for _, name := range []string{
		"TestStatus",
		"TestCreateRejectsInvalidSpecs/Multus_mapping_without_network_name",
		"Test__Weird--Name//x",
		strings.Repeat("TestVeryLong", 20),
		"/",
	} {
		got := namespaceName(name)
		assert.LessOrEqual(t, len(got), 63, "namespaceName(%q) = %q: not a DNS-1123 label", name, got)
		assert.Regexp(t, valid, got, "namespaceName(%q): not a DNS-1123 label", name)
	}
	assert.NotEqual(t, namespaceName("TestX"), namespaceName("TestX"), "two namespaces for the same test got the same name")
}

func TestDecodeObjects(t *testing.T) {
	in := `# comment only
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: a
---
---
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [a.yaml]
---
{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "b"}}
---
just: data
`
	objs, err := DecodeObjects([]byte(in))
	require.NoError(t, err)
	var got []string
	for _, o := range objs {
		got = append(got, o.GetKind()+"/"+o.GetName())
	}
	assert.Equal(t, []string{"ConfigMap/a", "Secret/b"}, got, "decoded objects, want ConfigMap/a and Secret/b only")
	_, err = DecodeObjects([]byte("apiVersion: v1\nkind: [unclosed\n"))
	assert.Error(t, err, "malformed YAML decoded without error")
}

func TestRepoRootAndBinaries(t *testing.T) {
	root, err := RepoRoot()
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(root, "test", "framework", "doc.go"))
	assert.NoError(t, err, "RepoRoot() = %s, which does not hold test/framework", root)
	err = checkBinaries(t.TempDir(), true)
	assert.ErrorContains(t, err, "etcd, kube-apiserver, kube-controller-manager", "checkBinaries on an empty directory names every missing binary")
}

func TestRemoveStaleTempDirs(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	stale := filepath.Join(tmp, tempDirPrefix+"stale")
	live := filepath.Join(tmp, tempDirPrefix+"live")
	for dir, pid := range map[string]int{stale: 1 << 22, live: os.Getpid()} {
		require.NoError(t, os.MkdirAll(dir, 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "owner.pid"), []byte(strconv.Itoa(pid)), 0o600))
	}
	removeStaleTempDirs()
	_, err := os.Stat(stale)
	assert.ErrorIs(t, err, fs.ErrNotExist, "the directory of a dead owner survived")
	_, err = os.Stat(live)
	assert.NoError(t, err, "the directory of a live owner was removed")
}
