//go:build integration

package kubevirt

import (
	"fmt"
	"os"
	"testing"

	"platform.example/vm-migration/test/framework"
)

// EnvKubeVirtDir names the folder hack/build-kubevirt.sh prints: the
// binaries, crds/ and install/.
const EnvKubeVirtDir = "KUBEVIRT_DIR"

func TestMain(m *testing.M) {
	if os.Getenv(EnvKubeVirtDir) == "" {
		// No control plane is started for tests that all skip.
		fmt.Fprintf(os.Stderr, "kubevirt: $%s is not set: the real KubeVirt tests skip (make test-kubevirt runs them)\n", EnvKubeVirtDir)
		os.Exit(m.Run())
	}
	// The project's CRDs and the DataVolume CRD (CDI's stand-in here) for
	// the controller's dry run; KubeVirt's own come with Install.
	framework.Run(m, framework.WithNode(), framework.WithCRDs(
		framework.RepoPath("manifests/crd"),
		framework.RepoPath("test/crds/cdi.kubevirt.io_datavolumes.yaml"),
	))
}

// kubevirtDir returns $KUBEVIRT_DIR, or skips t when it is unset.
func kubevirtDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(EnvKubeVirtDir)
	if dir == "" {
		t.Skipf("$%s is not set; run make test-kubevirt", EnvKubeVirtDir)
	}
	return dir
}
