package framework

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
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
	if err != nil {
		t.Fatal(err)
	}
	var grandchild int
	deadline := time.Now().Add(5 * time.Second)
	for grandchild == 0 && time.Now().Before(deadline) {
		if b, err := os.ReadFile(pidFile); err == nil {
			grandchild, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if grandchild == 0 {
		t.Fatal("the grandchild did not start")
	}
	if pgid, err := syscall.Getpgid(grandchild); err != nil || pgid != p.pid() {
		t.Fatalf("grandchild in process group %d (%v), want %d", pgid, err, p.pid())
	}

	start := time.Now()
	p.stop(500 * time.Millisecond)
	t.Logf("stopped in %s", time.Since(start).Round(time.Millisecond))
	if ok, _ := p.exited(); !ok {
		t.Error("the process is still running after stop")
	}
	// The grandchild is not our child: it is gone once signalled, or a
	// zombie until init reaps it.
	deadline = time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if err := syscall.Kill(grandchild, 0); errors.Is(err, syscall.ESRCH) || isZombie(grandchild) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("grandchild %d survived the stop", grandchild)
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
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		t.Fatal("did not exit")
	}
	ok, why := p.exited()
	if !ok || why == nil || !strings.Contains(why.Error(), "exit status 3") {
		t.Errorf("exited() = %v, %v", ok, why)
	}
	if got := p.tail(5); got != "boom" {
		t.Errorf("log tail %q, want boom", got)
	}
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
		if len(got) > 63 || !valid.MatchString(got) {
			t.Errorf("namespaceName(%q) = %q: not a DNS-1123 label", name, got)
		}
	}
	if namespaceName("TestX") == namespaceName("TestX") {
		t.Error("two namespaces for the same test got the same name")
	}
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
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, o.GetKind()+"/"+o.GetName())
	}
	if strings.Join(got, ",") != "ConfigMap/a,Secret/b" {
		t.Errorf("decoded %v, want ConfigMap/a and Secret/b", got)
	}
	if _, err := DecodeObjects([]byte("apiVersion: v1\nkind: [unclosed\n")); err == nil {
		t.Error("malformed YAML decoded without error")
	}
}

func TestRepoRootAndBinaries(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "test", "framework", "doc.go")); err != nil {
		t.Errorf("RepoRoot() = %s, which does not hold test/framework: %v", root, err)
	}
	err = checkBinaries(t.TempDir(), true)
	if err == nil || !strings.Contains(err.Error(), "etcd, kube-apiserver, kube-controller-manager") {
		t.Errorf("checkBinaries on an empty directory: %v", err)
	}
}

func TestRemoveStaleTempDirs(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	stale := filepath.Join(tmp, tempDirPrefix+"stale")
	live := filepath.Join(tmp, tempDirPrefix+"live")
	for dir, pid := range map[string]int{stale: 1 << 22, live: os.Getpid()} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "owner.pid"), []byte(strconv.Itoa(pid)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	removeStaleTempDirs()
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the directory of a dead owner survived: %v", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("the directory of a live owner was removed: %v", err)
	}
}
