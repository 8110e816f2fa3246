package framework

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// These tests need neither root nor binaries.

func testNode(t *testing.T) *node {
	t.Helper()
	return &node{
		name:          NodeName,
		dir:           "/tmp/vmm-testenv-1/node",
		cgroupRoot:    "vmm-node-1-1",
		network:       slotNetwork("1", 7),
		ca:            &certAuthority{certPath: "/tmp/vmm-testenv-1/node/ca.crt"},
		apiClientCert: "/c.crt", apiClientKey: "/c.key",
		frontProxyCA:   &certAuthority{certPath: "/tmp/vmm-testenv-1/node/front-proxy-ca.crt"},
		frontProxyCert: "/fp.crt", frontProxyKey: "/fp.key",
		containerd: &containerd{socket: "/tmp/vmm-testenv-1/node/containerd/containerd.sock"},
	}
}

func TestAPIServerArgsForANode(t *testing.T) {
	n := testNode(t)
	args := n.apiServerArgs([]string{
		"--etcd-servers=http://127.0.0.1:1",
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--authorization-mode=RBAC",
		"--disable-admission-plugins=ServiceAccount",
		"--endpoint-reconciler-type=none",
		"--allow-privileged=true",
	})
	flags := map[string]string{}
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		_, dup := flags[k]
		assert.False(t, dup, "flag %s given twice in %v", k, args)
		flags[k] = v
	}
	assert.Equal(t, "198.18.7.1", flags["--bind-address"], "bind address, want the machine's end of the veth")
	assert.Equal(t, "198.18.7.1", flags["--advertise-address"], "advertise address (the kubernetes Service's endpoint)")
	assert.Equal(t, "Node,RBAC", flags["--authorization-mode"], "authorization")
	assert.Equal(t, "lease", flags["--endpoint-reconciler-type"], "endpoint reconciler")
	assert.Equal(t, "false", flags["--allow-privileged"], "privileged containers")
	n.privileged = true
	assert.Contains(t, n.apiServerArgs([]string{"--allow-privileged=false"}), "--allow-privileged=true", "WithPrivilegedPods")
	assert.NotContains(t, flags, "--disable-admission-plugins", "ServiceAccount admission must be on")
	assert.Equal(t, "NodeRestriction", flags["--enable-admission-plugins"], "admission")
	assert.Equal(t, n.ca.certPath, flags["--client-ca-file"], "client CA")
	assert.Equal(t, n.ca.certPath, flags["--kubelet-certificate-authority"], "kubelet serving CA")
	assert.Equal(t, "/c.crt", flags["--kubelet-client-certificate"], "kubelet client certificate")
	assert.Equal(t, "http://127.0.0.1:1", flags["--etcd-servers"], "other flags are kept")
	assert.Equal(t, "true", flags["--enable-aggregator-routing"], "webhooks and aggregated APIs reached through endpoints")
	assert.Equal(t, n.frontProxyCA.certPath, flags["--requestheader-client-ca-file"], "front-proxy CA")
	assert.Equal(t, frontProxyClient, flags["--requestheader-allowed-names"], "front-proxy client name")
	assert.Equal(t, "/fp.crt", flags["--proxy-client-cert-file"], "front-proxy client certificate")
	assert.Equal(t, "/fp.key", flags["--proxy-client-key-file"], "front-proxy client key")
}

func TestNetworkSlotsAvoidTheMachinesRoutes(t *testing.T) {
	parse := func(s string) *net.IPNet {
		_, p, err := net.ParseCIDR(s)
		require.NoError(t, err, s)
		return p
	}
	used := []*net.IPNet{parse("192.0.2.0/24"), parse("198.18.5.0/30"), parse("198.19.9.128/25"), parse("127.0.0.0/8")}
	assert.True(t, overlapsAny(used, slotNetwork("x", 5)), "slot 5: its link is routed already")
	assert.True(t, overlapsAny(used, slotNetwork("x", 9)), "slot 9: part of its pod subnet is routed already")
	assert.False(t, overlapsAny(used, slotNetwork("x", 6)), "slot 6 is free")
	assert.True(t, overlapsAny([]*net.IPNet{parse("198.0.0.0/8")}, slotNetwork("x", 200)), "a wider route covers every slot")
	n := slotNetwork("0123456789", 6)
	assert.Equal(t, "198.18.6.1", n.hostIP.String(), "host address")
	assert.Equal(t, "198.18.6.2", n.nodeIP.String(), "node address")
	assert.Equal(t, "198.19.6.0/24", n.podCIDR.String(), "pod subnet")
	assert.Equal(t, "198.19.6.1", n.gatewayIP().String(), "pods' gateway")
	assert.LessOrEqual(t, len(n.hostIface), 15, "interface name %q, at most 15 bytes", n.hostIface)
}

func TestKubeletConfigKeepsTheMachineAlone(t *testing.T) {
	n := testNode(t)
	b, err := kubeletConfig(n, "/ca.crt", "/k.crt", "/k.key")
	require.NoError(t, err, "rendering")
	var cfg map[string]any
	require.NoError(t, yaml.Unmarshal(b, &cfg), "the configuration:\n%s", b)
	assert.Equal(t, "/vmm-node-1-1", cfg["cgroupRoot"], "cgroup root, want the node's own")
	assert.Equal(t, false, cfg["failCgroupV1"], "failCgroupV1")
	assert.Equal(t, "cgroupfs", cfg["cgroupDriver"], "cgroup driver")
	assert.Equal(t, "", cfg["resolvConf"], "resolvConf, want none (no DNS outside the machine)")
	assert.NotContains(t, cfg, "clusterDNS", "clusterDNS without cluster DNS (COREDNS_DIR unset)")
	assert.Equal(t, "unix://"+n.containerd.socket, cfg["containerRuntimeEndpoint"], "runtime endpoint")
	assert.Equal(t, "/tmp/vmm-testenv-1/node/volume-plugins", cfg["volumePluginDir"], "flexvolume folder, want one of the node's (the default is created on the machine)")
	assert.EqualValues(t, 100, cfg["imageGCHighThresholdPercent"], "image GC, want off")
	assert.Equal(t, map[string]any{"maxContainerRestartPeriod": "5s"}, cfg["crashLoopBackOff"], "crash-loop back-off")

	p, err := kubeProxyConfig(n, "/kubeconfig")
	require.NoError(t, err, "rendering kube-proxy's configuration")
	var proxy map[string]any
	require.NoError(t, yaml.Unmarshal(p, &proxy), "kube-proxy's configuration:\n%s", p)
	assert.Equal(t, map[string]any{"maxPerCore": float64(0), "min": float64(0), "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
		proxy["conntrack"], "conntrack settings, want none changed (they are the machine's)")
}

// TestStaleCgroupRootsAreRemoved: the cgroup root of a node whose owner
// process is gone (a killed test binary) is removed with its sub-folders,
// and one whose owner lives is kept. It needs root and writes only
// folders of its own names in the cgroup hierarchies.
func TestStaleCgroupRootsAreRemoved(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("creating cgroup folders needs root")
	}
	mounts, err := cgroupMounts()
	require.NoError(t, err, "listing cgroup hierarchies")
	if len(mounts) == 0 {
		t.Skip("no cgroup hierarchy mounted")
	}
	gone := exec.Command("true")
	require.NoError(t, gone.Run(), "running a process that ends")
	stale := fmt.Sprintf("%s%d-staletest", cgroupRootPrefix, gone.Process.Pid)
	live := cgroupRootName("livetest")
	for _, name := range []string{stale, live} {
		require.NoError(t, createCgroupRoot(name), "creating %s", name)
		require.NoError(t, os.MkdirAll(filepath.Join(mounts[0], name, "kubepods", "besteffort"), 0o755), "a sub-folder of %s", name)
	}
	defer func() { _ = removeCgroupRoot(live) }()
	defer func() { _ = removeCgroupRoot(stale) }()

	removeStaleCgroupRoots()
	for _, m := range mounts {
		_, err := os.Stat(filepath.Join(m, stale))
		assert.True(t, errors.Is(err, os.ErrNotExist), "%s in %s: %v, want removed", stale, m, err)
		_, err = os.Stat(filepath.Join(m, live))
		assert.NoError(t, err, "%s in %s, want kept (its owner runs)", live, m)
	}
}
