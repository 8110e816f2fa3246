package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// overlaidDirs are the machine's folders the node's mount namespace sees
// through an overlay whose upper layer is the node's own: kubelet,
// containerd and the CNI plugins create what they hard-code under them
// (/var/lib/kubelet, /var/lib/cni, /run/containerd, /run/netns...) without
// touching the machine's folders.
var overlaidDirs = []string{"/var/lib", "/run"}

// boundDirs are bind-mounted from the node's folder over the paths the
// node's programs hard-code, so that their data lives in the environment's
// folder, where tests and a kept TESTENV_KEEP folder can read it.
var boundDirs = map[string]string{
	"/var/lib/kubelet": "kubelet",
	"/var/lib/cni":     "cni",
	"/run/containerd":  "containerd-run",
	"/var/log":         "log",
}

// kubeletSysctls are the machine-wide settings the kubelet changes when they
// differ (setupKernelTunables), with the values it wants. Inside the node's
// mount namespace, files holding these values are bound over /proc/sys, so
// the kubelet finds them set and the machine's own stay as they are.
var kubeletSysctls = map[string]string{
	"vm/overcommit_memory":      "1",
	"vm/panic_on_oom":           "0",
	"kernel/panic":              "10",
	"kernel/panic_on_oops":      "1",
	"kernel/keys/root_maxkeys":  "1000000",
	"kernel/keys/root_maxbytes": "25000000",
}

// setupMounts builds the node's private mount namespace (made by the
// holder, with its own /proc): the overlays (shared ones for a node that
// runs virt-handler), the bound folders and the sysctl files. Everything
// is undone by the kernel when the namespace's last process ends.
func setupMounts(holder int, nodeDir string, shared bool) error {
	var script strings.Builder
	script.WriteString("set -e\n")
	for _, d := range overlaidDirs {
		name := strings.ReplaceAll(strings.Trim(d, "/"), "/", "-")
		upper, work := filepath.Join(nodeDir, "overlay", name, "upper"), filepath.Join(nodeDir, "overlay", name, "work")
		for _, dir := range []string{upper, work} {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("creating %s: %w", dir, err)
			}
		}
		fmt.Fprintf(&script, "mount -t overlay overlay -o lowerdir=%s,upperdir=%s,workdir=%s %s\n", d, upper, work, d)
		if shared {
			// Shared, as on a node booted by systemd: virt-handler
			// mounts /var/run/kubevirt and /var/lib/kubelet with
			// Bidirectional propagation, which containerd refuses
			// under a private mount. Their peers stay inside the
			// node's namespace.
			fmt.Fprintf(&script, "mount --make-rshared %s\n", d)
		}
	}
	for target, name := range boundDirs {
		src := filepath.Join(nodeDir, name)
		if err := os.MkdirAll(src, 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", src, err)
		}
		fmt.Fprintf(&script, "mkdir -p %s\nmount --bind %s %s\n", target, src, target)
		if target == kubeletRootDir {
			// Shared, as on a node booted by systemd: containerd refuses a
			// volume mount with HostToContainer propagation (KubeVirt's
			// launcher pods have them) under a private mount. Its peers
			// stay inside the node's namespace.
			fmt.Fprintf(&script, "mount --make-rshared %s\n", target)
		}
	}
	sysctlDir := filepath.Join(nodeDir, "sysctl")
	if err := os.MkdirAll(sysctlDir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", sysctlDir, err)
	}
	for key, value := range kubeletSysctls {
		file := filepath.Join(sysctlDir, strings.ReplaceAll(key, "/", "."))
		if err := os.WriteFile(file, []byte(value+"\n"), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", file, err)
		}
		fmt.Fprintf(&script, "mount --bind %s /proc/sys/%s\n", file, key)
	}
	if err := runCommand(inNode(holder, false, "sh", "-c", script.String())...); err != nil {
		return fmt.Errorf("setting up the node's mounts: %w", err)
	}
	return nil
}
