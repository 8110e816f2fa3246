//go:build integration

package kubevirt

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"platform.example/vm-migration/test/framework"
	"platform.example/vm-migration/test/framework/kubevirt"
)

// EnvCDIDir names the folder hack/build-cdi.sh prints, whose crds/ are
// CDI's CRDs.
const EnvCDIDir = "CDI_DIR"

func TestMain(m *testing.M) {
	if os.Getenv(kubevirt.EnvDir) == "" {
		// No control plane is started for tests that all skip.
		fmt.Fprintf(os.Stderr, "kubevirt: $%s is not set: the real KubeVirt tests skip (make test-kubevirt runs them)\n", kubevirt.EnvDir)
		os.Exit(m.Run())
	}
	// The project's CRDs and CDI's, from its build: virt-controller, seeing
	// the DataVolume CRD, waits for CDI's other informers (CDI, CDIConfig,
	// StorageProfile, DataSource) and handles no VM until they sync.
	cdi := os.Getenv(EnvCDIDir)
	if cdi == "" {
		fmt.Fprintf(os.Stderr, "kubevirt: $%s is not set: make test-kubevirt sets it to hack/build-cdi.sh's folder\n", EnvCDIDir)
		os.Exit(2)
	}
	opts := []framework.Option{framework.WithNode(), framework.WithCRDs(
		framework.RepoPath("manifests/crd"),
		filepath.Join(cdi, "crds"),
	)}
	if os.Getenv(kubevirt.EnvNodeDir) != "" {
		// virt-handler's DaemonSet is privileged; its launcher pods
		// join Multus networks.
		opts = append(opts, framework.WithPrivilegedPods(), framework.WithNetworkAttachments())
	}
	framework.Run(m, opts...)
}

// kubevirtDir returns $KUBEVIRT_DIR, or skips t when it is unset.
func kubevirtDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(kubevirt.EnvDir)
	if dir == "" {
		t.Skipf("$%s is not set; run make test-kubevirt", kubevirt.EnvDir)
	}
	return dir
}
