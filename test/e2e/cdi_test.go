//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"

	"platform.example/vm-migration/test/framework"
	"platform.example/vm-migration/test/framework/cdi"
	"platform.example/vm-migration/test/framework/localpath"
	"platform.example/vm-migration/test/standins"
)

// realCDI says whether the suite runs CDI's own controller, apiserver and
// uploadproxy, with real storage: make test-e2e sets $CDI_IMAGES_DIR
// (hack/build-cdi-images.sh's folder) and $LOCAL_PATH_DIR
// (hack/build-local-path.sh's). Every import is then a clone by CDI's own
// pods into a local-path volume, and the CDI stand-in serves nothing
// (standins.Config.RealCDI); without them, the stand-ins play CDI and the
// provisioner.
func realCDI() bool {
	return os.Getenv(cdi.EnvImagesDir) != "" && os.Getenv(localpath.EnvDir) != ""
}

// suiteStorageClass is the class of the migrations' staging and target
// claims: local-path beside the real CDI, else the storage stand-in's.
func suiteStorageClass() string {
	if realCDI() {
		return localpath.StorageClass
	}
	return standins.DefaultStorageClass
}

// installCDI imports CDI's images and local-path-provisioner's into the
// node and installs both (cdi.InstallWithStorageOnNode: local-path's
// StorageProfile says ReadWriteOnce, Filesystem, as a cluster's admin sets
// it, else the controller's preflight refuses the class with
// StorageProfileIncomplete); it returns the line naming them.
func installCDI(ctx context.Context, env *framework.Environment) (string, error) {
	start := time.Now()
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "e2e: "+format+"\n", args...) }
	line, err := cdi.InstallWithStorageOnNode(ctx, env, os.Getenv(cdi.EnvImagesDir), os.Getenv(cdi.EnvCDIDir), os.Getenv(localpath.EnvDir), 4*time.Minute, logf)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s; in %s", line, time.Since(start).Round(time.Millisecond)), nil
}

// watchCDIPods records the pods CDI starts in the test's namespace from
// now on (cdi.WatchPods) until the test ends.
func (s *stack) watchCDIPods(t *testing.T) func() []string {
	t.Helper()
	list, stop, err := cdi.WatchPods(s.ctx, s.kube, s.ns)
	require.NoError(t, err)
	t.Cleanup(stop)
	return list
}

// assertRealClones checks, beside the real CDI, that CDI's own pods served
// the imports on the node (a host-assisted clone: its clone source and
// upload server pods) and that each DataVolume records the strategy CDI
// chose for the class.
func (s *stack) assertRealClones(t *testing.T, m *v1alpha1.VirtualMachineMigration, pods []string) {
	t.Helper()
	t.Logf("CDI's pods:\n  %s", strings.Join(pods, "\n  "))
	for _, part := range []string{"cdi-clone-source", "cdi-upload-server"} {
		found := slices.ContainsFunc(pods, func(p string) bool {
			return strings.Contains(p, "("+part+") on node "+s.env.NodeName()+": ") && !strings.HasSuffix(p, ": Failed")
		})
		assert.True(t, found, "no %s pod of CDI ran on node %s without failing: %v", part, s.env.NodeName(), pods)
	}
	for _, d := range m.Status.Disks {
		dv, err := s.cdi.CdiV1beta1().DataVolumes(s.ns).Get(s.ctx, d.DataVolume, metav1.GetOptions{})
		if assert.NoError(t, err, "reading DataVolume %s", d.DataVolume) {
			strategy := dv.Annotations["cdi.kubevirt.io/cloneType"]
			t.Logf("DataVolume %s: cloned by CDI, strategy %q", d.DataVolume, strategy)
			assert.Equal(t, "copy", strategy, "DataVolume %s: the strategy CDI chose for local-path (no CSI clones nor snapshots)", d.DataVolume)
		}
	}
}
