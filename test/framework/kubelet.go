package framework

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"sigs.k8s.io/yaml"
)

// Paths inside the node's mount namespace (bound to the node's folder).
const (
	kubeletRootDir = "/var/lib/kubelet"
	podLogsDir     = "/var/log/pods"
)

// kubeletConfig is the kubelet's configuration file: cgroup v1 with the
// cgroupfs driver under a cgroupRoot of the node's own; no swap check, no
// OOM score of its own (CAP_SYS_RESOURCE is outside the bounding set);
// webhook authentication and authorization, client certificates of the
// node's CA (the API server's logs and exec requests); no resolv.conf of
// the machine's for pods (nothing outside the machine is reachable), and,
// with cluster DNS, CoreDNS's Service as the pods' nameserver; no image garbage collection
// or eviction thresholds that a busy disk would trip; short sync and
// crash-loop periods, so tests see changes fast.
func kubeletConfig(n *node, caFile, certFile, keyFile string) ([]byte, error) {
	cfg := map[string]any{
		"apiVersion":                    "kubelet.config.k8s.io/v1beta1",
		"kind":                          "KubeletConfiguration",
		"failCgroupV1":                  false,
		"cgroupDriver":                  "cgroupfs",
		"cgroupsPerQOS":                 true,
		"cgroupRoot":                    "/" + n.cgroupRoot,
		"failSwapOn":                    false,
		"oomScoreAdj":                   0,
		"containerRuntimeEndpoint":      "unix://" + n.containerd.socket,
		"podLogsDir":                    podLogsDir,
		"volumePluginDir":               filepath.Join(n.dir, "volume-plugins"),
		"address":                       n.network.nodeIP.String(),
		"port":                          kubeletPort,
		"readOnlyPort":                  0,
		"healthzBindAddress":            "127.0.0.1",
		"healthzPort":                   kubeletHealthzPort,
		"tlsCertFile":                   certFile,
		"tlsPrivateKeyFile":             keyFile,
		"rotateCertificates":            false,
		"serverTLSBootstrap":            false,
		"authentication":                map[string]any{"anonymous": map[string]any{"enabled": false}, "webhook": map[string]any{"enabled": true}, "x509": map[string]any{"clientCAFile": caFile}},
		"authorization":                 map[string]any{"mode": "Webhook"},
		"clusterDomain":                 ClusterDomain,
		"resolvConf":                    "",
		"imageGCHighThresholdPercent":   100,
		"imageGCLowThresholdPercent":    99,
		"evictionHard":                  map[string]string{"memory.available": "100Mi", "nodefs.available": "1%", "nodefs.inodesFree": "1%", "imagefs.available": "1%", "imagefs.inodesFree": "1%"},
		"syncFrequency":                 "10s",
		"nodeStatusUpdateFrequency":     "5s",
		"serializeImagePulls":           false,
		"kubeAPIQPS":                    50,
		"kubeAPIBurst":                  100,
		"shutdownGracePeriod":           "0s",
		"crashLoopBackOff":              map[string]any{"maxContainerRestartPeriod": "5s"},
		"protectKernelDefaults":         false,
		"localStorageCapacityIsolation": true,
	}
	if n.dns != nil {
		cfg["clusterDNS"] = []string{n.dns.ip}
	}
	return yaml.Marshal(cfg)
}

// Ports of the kubelet inside the node's network namespace (each node has
// its own, so stacks do not compete for them).
const (
	kubeletPort        = 10250
	kubeletHealthzPort = 10248
)

// startKubelet issues the kubelet's client and serving certificates and
// starts it in the node.
func (e *Environment) startKubelet(ctx context.Context, n *node) error {
	dir := filepath.Join(n.dir, "kubelet-config")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	clientCert, clientKey, err := n.ca.issue(filepath.Join(dir, "client"), certRequest{
		commonName: "system:node:" + n.name, organizations: []string{"system:nodes"},
	})
	if err != nil {
		return err
	}
	servingCert, servingKey, err := n.ca.issue(filepath.Join(dir, "serving"), certRequest{
		commonName: n.name, ips: []net.IP{n.network.nodeIP}, dnsNames: []string{n.name}, server: true,
	})
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := writeCertKubeconfig(kubeconfig, e.config.Host, e.config.CAData, clientCert, clientKey); err != nil {
		return err
	}
	cfg, err := kubeletConfig(n, n.ca.certPath, servingCert, servingKey)
	if err != nil {
		return fmt.Errorf("rendering the kubelet configuration: %w", err)
	}
	configPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(configPath, cfg, 0o644); err != nil {
		return fmt.Errorf("writing the kubelet configuration: %w", err)
	}
	args := []string{
		"--config=" + configPath,
		"--kubeconfig=" + kubeconfig,
		"--root-dir=" + kubeletRootDir,
		"--cert-dir=" + filepath.Join(dir, "pki"),
		"--hostname-override=" + n.name,
		"--node-ip=" + n.network.nodeIP.String(),
		"--node-labels=" + nodeRoleLabel + "=",
		"--v=1",
	}
	p, err := e.startInNode(n, BinaryKubelet, filepath.Join(e.binDir, BinaryKubelet), args, nil)
	if err != nil {
		return err
	}
	n.kubelet = p
	return nil
}

// nodeRoleLabel marks the node for tests that look for it.
const nodeRoleLabel = "node-role.platform.example/test-node"

// kubeProxyConfig is kube-proxy's configuration: iptables mode in the
// node's namespace, masquerading all service traffic (pods reach the API
// server on the machine's side of the veth), and no change to conntrack
// settings, which are the machine's.
func kubeProxyConfig(n *node, kubeconfig string) ([]byte, error) {
	cfg := map[string]any{
		"apiVersion":         "kubeproxy.config.k8s.io/v1alpha1",
		"kind":               "KubeProxyConfiguration",
		"mode":               "iptables",
		"clientConnection":   map[string]any{"kubeconfig": kubeconfig, "qps": 50, "burst": 100},
		"hostnameOverride":   n.name,
		"bindAddress":        n.network.nodeIP.String(),
		"clusterCIDR":        n.network.podCIDR.String(),
		"healthzBindAddress": "127.0.0.1:10256",
		"metricsBindAddress": "127.0.0.1:10249",
		"iptables":           map[string]any{"masqueradeAll": true, "syncPeriod": "10s", "minSyncPeriod": "0s"},
		"conntrack":          map[string]any{"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
	}
	return yaml.Marshal(cfg)
}

// startKubeProxy starts kube-proxy in the node as system:kube-proxy.
func (e *Environment) startKubeProxy(n *node) error {
	dir := filepath.Join(n.dir, "kube-proxy")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	cert, key, err := n.ca.issue(filepath.Join(dir, "client"), certRequest{commonName: "system:kube-proxy"})
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := writeCertKubeconfig(kubeconfig, e.config.Host, e.config.CAData, cert, key); err != nil {
		return err
	}
	cfg, err := kubeProxyConfig(n, kubeconfig)
	if err != nil {
		return fmt.Errorf("rendering the kube-proxy configuration: %w", err)
	}
	configPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(configPath, cfg, 0o644); err != nil {
		return fmt.Errorf("writing the kube-proxy configuration: %w", err)
	}
	p, err := e.startInNode(n, BinaryKubeProxy, filepath.Join(e.binDir, BinaryKubeProxy), []string{"--config=" + configPath, "--v=1"}, nil)
	if err != nil {
		return err
	}
	n.kubeProxy = p
	return nil
}

// startScheduler starts kube-scheduler on the machine's side with the
// admin kubeconfig and waits until it is healthy.
func (e *Environment) startScheduler(ctx context.Context, n *node) error {
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	args := []string{
		"--kubeconfig=" + e.kubeconfigPath,
		"--authentication-kubeconfig=" + e.kubeconfigPath,
		"--authorization-kubeconfig=" + e.kubeconfigPath,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(ports[0]),
		"--cert-dir=" + filepath.Join(n.dir, "scheduler-certs"),
	}
	p, err := startProcess(e.spawner, BinaryScheduler, filepath.Join(e.binDir, BinaryScheduler), args, e.dir)
	if err != nil {
		return err
	}
	n.scheduler = p
	return waitHealthz(ctx, p, "kube-scheduler /healthz", "https://127.0.0.1:"+strconv.Itoa(ports[0])+"/healthz")
}
