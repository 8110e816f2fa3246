package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Binaries of the node, besides the control plane's, in the testbin folder.
const (
	BinaryKubelet       = "kubelet"
	BinaryKubeProxy     = "kube-proxy"
	BinaryScheduler     = "kube-scheduler"
	BinaryContainerd    = "containerd"
	BinaryContainerdRun = "containerd-shim-runc-v2"
	BinaryCtr           = "ctr"
)

// criNamespace is containerd's namespace for the kubelet's images and
// containers.
const criNamespace = "k8s.io"

// RuntimeClassKVM names the RuntimeClass (and containerd runtime handler)
// that offers /dev/kvm to pods, on machines that have it.
const RuntimeClassKVM = "kvm"

// runcBinary is Debian's runc (hack/install-node-deps.sh installs it).
const runcBinary = "/usr/sbin/runc"

// cniBinDir holds Debian's containernetworking-plugins.
const cniBinDir = "/usr/lib/cni"

// containerd is the node's container runtime: its folder, socket and the
// process running it.
type containerd struct {
	dir     string
	socket  string
	ctr     string
	process *process
}

// containerdConfig renders containerd's configuration (version 4): state,
// root and sockets in the node's folder; the CRI plugin with the sandbox
// image built here pinned, runc from Debian, the CNI plugins from Debian and
// a configuration folder of ours, no AppArmor, an OOM score adjustment
// that stays within the node's capabilities; and, when kvmSpec is set, a
// runtime handler "kvm" whose containers get /dev/kvm from a base spec.
// Plugins that would create folders on the machine (/opt/containerd, NRI's)
// are disabled.
func containerdConfig(dir, socket, sandboxImage, kvmSpec string, cniBinDirs []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `version = 4
root = %q
state = %q
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.nri.v1.nri", "io.containerd.image-verifier.v1.bindir", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[plugins.'io.containerd.server.v1.grpc']
  address = %q

[plugins.'io.containerd.server.v1.ttrpc']
  address = %q

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = %q

[plugins.'io.containerd.cri.v1.runtime']
  enable_selinux = false
  disable_apparmor = true
  restrict_oom_score_adj = true
  cdi_spec_dirs = []
  netns_mounts_under_state_dir = true
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [%s]
    conf_dir = %q
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = %q
        SystemdCgroup = false
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), socket, socket+".ttrpc", sandboxImage,
		tomlStrings(cniBinDirs), filepath.Join(dir, "cni"), runcBinary)
	if kvmSpec != "" {
		fmt.Fprintf(&b, `    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.%[1]s]
      runtime_type = "io.containerd.runc.v2"
      base_runtime_spec = %[2]q
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.%[1]s.options]
        BinaryName = %[3]q
        SystemdCgroup = false
`, RuntimeClassKVM, kvmSpec, runcBinary)
	}
	fmt.Fprintf(&b, `
[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
`)
	return b.String()
}

// attachmentsPackage is the stand-in for Multus (WithNetworkAttachments),
// built as a static binary; attachmentsImage is the reference its build
// is cached under (the image itself is never imported).
const (
	attachmentsPackage = "platform.example/vm-migration/test/framework/cmd/vmm-network-attachments"
	attachmentsImage   = "platform.example/vm-migration/test/vmm-network-attachments:local"
	// attachmentsPlugin is its CNI type: the name of its binary.
	attachmentsPlugin = "vmm-network-attachments"
)

// attachmentsPluginConfig is the chain's last plugin, the stand-in for
// Multus, with the cluster's kubeconfig, the folder of the plugins it
// delegates to and its state folder.
func attachmentsPluginConfig(kubeconfig, stateDir string) map[string]any {
	return map[string]any{"type": attachmentsPlugin, "kubeconfig": kubeconfig, "binDir": cniBinDir, "stateDir": stateDir}
}

// cniConfig is the pod network: a bridge in the node's namespace, the pods'
// gateway, with host-local addresses from the node's pod subnet and its
// state in the node's folder; then extra, the chain's other plugins.
func cniConfig(n *nodeNetwork, stateDir string, extra ...map[string]any) ([]byte, error) {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "vmm-pods",
		"plugins": []any{
			map[string]any{
				"type":        "bridge",
				"bridge":      "cni0",
				"isGateway":   true,
				"ipMasq":      false,
				"hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"dataDir": stateDir,
					"ranges":  [][]map[string]string{{{"subnet": n.podCIDR.String(), "gateway": n.gatewayIP().String()}}},
					"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
				},
			},
		},
	}
	for _, p := range extra {
		conf["plugins"] = append(conf["plugins"].([]any), p)
	}
	return json.MarshalIndent(conf, "", "  ")
}

// startContainerd writes containerd's and the pod network's configuration
// and starts containerd in the node, then waits until it answers.
func (e *Environment) startContainerd(ctx context.Context, n *node) error {
	dir := filepath.Join(n.dir, "containerd")
	for _, d := range []string{dir, filepath.Join(dir, "cni"), filepath.Join(dir, "ipam")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", d, err)
		}
	}
	c := &containerd{dir: dir, socket: filepath.Join(dir, "containerd.sock"), ctr: filepath.Join(e.binDir, BinaryCtr)}
	binDirs := []string{cniBinDir}
	var extra []map[string]any
	if n.attachments != "" {
		// The stand-in for Multus, under its CNI type's name.
		bin := filepath.Join(dir, "cni-bin")
		if err := os.MkdirAll(bin, 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", bin, err)
		}
		if err := os.Symlink(n.attachments, filepath.Join(bin, attachmentsPlugin)); err != nil && !os.IsExist(err) {
			return fmt.Errorf("installing the stand-in for Multus: %w", err)
		}
		binDirs = append(binDirs, bin)
		extra = append(extra, attachmentsPluginConfig(e.kubeconfigPath, filepath.Join(dir, "attachments")))
	}
	netConf, err := cniConfig(n.network, filepath.Join(dir, "ipam"), extra...)
	if err != nil {
		return fmt.Errorf("rendering the CNI configuration: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cni", "10-vmm-pods.conflist"), netConf, 0o644); err != nil {
		return fmt.Errorf("writing the CNI configuration: %w", err)
	}
	kvmSpec := ""
	if n.kvm {
		if kvmSpec, err = writeKVMSpec(ctx, c.ctr, dir); err != nil {
			return err
		}
	}
	configPath := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(configPath, []byte(containerdConfig(dir, c.socket, n.sandboxImage, kvmSpec, binDirs)), 0o644); err != nil {
		return fmt.Errorf("writing containerd's configuration: %w", err)
	}
	// containerd finds its shim on PATH.
	env := []string{"PATH=" + e.binDir + ":" + os.Getenv("PATH")}
	p, err := e.startInNode(n, BinaryContainerd, filepath.Join(e.binDir, BinaryContainerd), []string{"--config", configPath, "--log-level", "warn"}, env)
	if err != nil {
		return err
	}
	c.process = p
	n.containerd = c
	return waitFor(ctx, p, "containerd", func() (bool, error) {
		if _, err := os.Stat(c.socket); err != nil {
			return false, nil
		}
		_, err := c.run(ctx, "version")
		return err == nil, nil
	})
}

// run runs ctr against the node's containerd in the CRI namespace and
// returns its output.
func (c *containerd) run(ctx context.Context, args ...string) (string, error) {
	full := append([]string{"--address", c.socket, "--namespace", criNamespace}, args...)
	cmd := exec.CommandContext(ctx, c.ctr, full...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// version is containerd's version as its server reports it.
func (c *containerd) version(ctx context.Context) (string, error) {
	out, err := c.run(ctx, "version")
	if err != nil {
		return "", err
	}
	// Client: ... Server: Version: v2.4.2 ...
	server := out[strings.Index(out, "Server:")+1:]
	for _, line := range strings.Split(server, "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "Version:" {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("no server version in ctr version's output: %s", out)
}

// importImage imports an image tarball into the CRI namespace. The
// reference is the one recorded in the tarball.
func (c *containerd) importImage(ctx context.Context, tarball string) error {
	_, err := c.run(ctx, "images", "import", "--no-unpack=false", tarball)
	return err
}

// removeAll kills and deletes every task and container of the CRI
// namespace, so the shims exit before containerd stops.
func (c *containerd) removeAll(ctx context.Context) error {
	out, err := c.run(ctx, "containers", "list", "--quiet")
	if err != nil {
		return err
	}
	var errs []string
	for _, id := range strings.Fields(out) {
		_, _ = c.run(ctx, "tasks", "kill", "--signal", "SIGKILL", id)
		deadline := time.Now().Add(5 * time.Second)
		for {
			_, err := c.run(ctx, "tasks", "delete", "--force", id)
			if err == nil || strings.Contains(err.Error(), "not found") || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if _, err := c.run(ctx, "containers", "delete", id); err != nil && !strings.Contains(err.Error(), "not found") {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("removing containers: %s", strings.Join(errs, "; "))
	}
	return nil
}

// writeKVMSpec writes the base OCI runtime spec of the kvm runtime handler:
// containerd's default spec (ctr oci spec) plus the /dev/kvm device
// (c 10:232, mode 0666) and a device-cgroup rule allowing it. A base spec
// replaces containerd's default, so it starts from that.
func writeKVMSpec(ctx context.Context, ctr, dir string) (string, error) {
	out, err := exec.CommandContext(ctx, ctr, "oci", "spec").Output()
	if err != nil {
		return "", fmt.Errorf("ctr oci spec: %w", err)
	}
	var spec map[string]any
	if err := json.Unmarshal(out, &spec); err != nil {
		return "", fmt.Errorf("reading containerd's default spec: %w", err)
	}
	linux, _ := spec["linux"].(map[string]any)
	if linux == nil {
		return "", fmt.Errorf("containerd's default spec has no linux section")
	}
	devices, _ := linux["devices"].([]any)
	linux["devices"] = append(devices, map[string]any{
		"path": "/dev/kvm", "type": "c", "major": 10, "minor": 232, "fileMode": 0o666, "uid": 0, "gid": 0,
	})
	resources, _ := linux["resources"].(map[string]any)
	if resources == nil {
		resources = map[string]any{}
		linux["resources"] = resources
	}
	rules, _ := resources["devices"].([]any)
	resources["devices"] = append(rules, map[string]any{"allow": true, "type": "c", "major": 10, "minor": 232, "access": "rwm"})
	b, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return "", fmt.Errorf("encoding the kvm runtime spec: %w", err)
	}
	path := filepath.Join(dir, "kvm-spec.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return "", fmt.Errorf("writing the kvm runtime spec: %w", err)
	}
	return path, nil
}

// tomlStrings renders strings as the items of a TOML array.
func tomlStrings(items []string) string {
	quoted := make([]string, len(items))
	for i, s := range items {
		quoted[i] = strconv.Quote(s)
	}
	return strings.Join(quoted, ", ")
}
