//go:build integration

package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"platform.example/vm-migration/test/framework"
)

// nodeProcessNames are the node's programs, as the kernel names them
// (comm is cut to 15 bytes).
var nodeProcessNames = []string{"kubelet", "containerd", "containerd-shim", "kube-proxy", "kube-scheduler", "sandbox"}

// procInfo identifies a process across pid reuse: its pid, start time and
// name.
type procInfo struct {
	pid, ppid int
	start     string
	comm      string
}

func readProc(pid int) (procInfo, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procInfo{}, false
	}
	s := string(b)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return procInfo{}, false
	}
	rest := strings.Fields(s[closing+1:])
	// rest[0] is the state (field 3), rest[19] the start time (field 22).
	if len(rest) < 20 || rest[0] == "Z" {
		return procInfo{}, false
	}
	var ppid int
	_, _ = fmt.Sscan(rest[1], &ppid)
	return procInfo{pid: pid, ppid: ppid, start: rest[19], comm: s[open+1 : closing]}, true
}

// allProcesses lists the machine's live processes.
func allProcesses() []procInfo {
	entries, _ := os.ReadDir("/proc")
	var ps []procInfo
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		if p, ok := readProc(pid); ok {
			ps = append(ps, p)
		}
	}
	return ps
}

// inNamespaces lists the processes in any of the namespaces (links such as
// net:[4026532...]).
func inNamespaces(links map[string]string) []procInfo {
	var found []procInfo
	for _, p := range allProcesses() {
		for kind, link := range links {
			if l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", p.pid, kind)); err == nil && l == link {
				found = append(found, p)
				break
			}
		}
	}
	return found
}

// descendants lists the live descendants of pid (the pods' processes live
// in namespaces of their own, under the node's).
func descendants(pid int) []procInfo {
	all := allProcesses()
	children := map[int][]procInfo{}
	for _, p := range all {
		children[p.ppid] = append(children[p.ppid], p)
	}
	var out []procInfo
	queue := []int{pid}
	for len(queue) > 0 {
		next := queue[0]
		queue = queue[1:]
		for _, c := range children[next] {
			out = append(out, c)
			queue = append(queue, c.pid)
		}
	}
	return out
}

// TestStoppedNodeLeavesNothing starts a second stack with a node beside
// the suite's (so names must not clash), runs a pod on it, stops it, and
// looks for anything left (CoreDNS's pod too, with cluster DNS): its
// processes (by pid and start time, by name and by namespace), its
// network, mount and PID namespaces, its veth, its mounts in this
// process's and the machine's mount table, its cgroup folders, its
// folder.
func TestStoppedNodeLeavesNothing(t *testing.T) {
	framework.Env(t)
	start := time.Now()
	env, err := framework.Start(framework.WithNode())
	require.NoError(t, err, "starting a second stack with a node")
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			env.Stop()
		}
	})
	t.Logf("second stack up (control plane and node Ready) in %s; %s", time.Since(start).Round(time.Millisecond), env.NodeLine())
	require.NotEqual(t, framework.Env(t).NodeInterface(), env.NodeInterface(), "the two stacks' veth names")
	require.NotEqual(t, framework.Env(t).HostAddress(), env.HostAddress(), "the two stacks' host addresses")

	runWaiter(t, env)
	pids := env.NodePIDs()
	holder := pids["node-namespaces"]
	links := map[string]string{}
	for _, kind := range []string{"net", "mnt", "pid"} {
		l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", holder, kind))
		require.NoError(t, err, "the node's %s namespace", kind)
		links[kind] = l
	}
	before := append(inNamespaces(links), descendants(holder)...)
	var names []string
	for _, p := range before {
		names = append(names, p.comm)
	}
	t.Logf("processes in the node's namespaces and under its PID 1 before Stop: %s", strings.Join(names, ", "))
	assert.Contains(t, names, "containerd-shim", "a shim runs the pod")
	if env.ClusterDNS() != "" {
		assert.Contains(t, names, "coredns", "CoreDNS runs on the node (cluster DNS), and must go with it")
	}
	for name, pid := range pids {
		p, ok := readProc(pid)
		require.True(t, ok, "%s (pid %d) is not running before Stop", name, pid)
		before = append(before, p)
	}
	dir, cgroupRoot, iface := env.Dir(), env.NodeCgroupRoot(), env.NodeInterface()

	stopStart := time.Now()
	env.Stop()
	stopped = true
	t.Logf("stopped in %s", time.Since(stopStart).Round(time.Millisecond))

	for _, p := range before {
		now, alive := readProc(p.pid)
		assert.False(t, alive && now.start == p.start, "%s (pid %d) is still running", p.comm, p.pid)
	}
	assert.Empty(t, inNamespaces(links), "processes left in the node's namespaces %v", links)
	assert.Empty(t, descendants(holder), "processes left under the node's PID 1")
	for _, p := range allProcesses() {
		for _, n := range nodeProcessNames {
			if p.comm == n {
				cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.pid))
				assert.NotContains(t, string(cmdline), dir, "%s (pid %d) names the stopped stack's folder", p.comm, p.pid)
			}
		}
	}
	for _, table := range []string{"/proc/self/mountinfo", "/proc/1/mountinfo"} {
		b, err := os.ReadFile(table)
		require.NoError(t, err, "reading %s", table)
		assert.NotContains(t, string(b), dir, "mounts of the stopped stack in %s", table)
		assert.NotContains(t, string(b), strings.TrimSuffix(strings.TrimPrefix(links["net"], "net:["), "]"), "the node's network namespace still mounted (%s)", table)
	}
	left, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", cgroupRoot))
	assert.Empty(t, left, "cgroup folders left")
	_, err = net.InterfaceByName(iface)
	assert.Error(t, err, "the veth %s is still there", iface)
	_, err = os.Stat(dir)
	assert.True(t, errors.Is(err, os.ErrNotExist), "the stack's folder %s: %v", dir, err)
}

// runWaiter runs a sandbox-image pod on env's node in the default
// namespace until it is Running.
func runWaiter(t *testing.T, env *framework.Environment) {
	t.Helper()
	cs := env.Kubernetes(t)
	ctx := context.Background()
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	require.NoError(t, err, "the default ServiceAccount")
	_, err = cs.CoreV1().Pods("default").Create(ctx, neverPullPod("default", "waiter", framework.SandboxImage), metav1.CreateOptions{})
	require.NoError(t, err, "creating the waiter pod")
	start := time.Now()
	waitPod(t, cs, "default", "waiter", time.Minute, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	t.Logf("waiter pod created to Running in %s", time.Since(start).Round(time.Millisecond))
}
