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
	"platform.example/vm-migration/pkg/steps/pipeline"

	"platform.example/vm-migration/test/framework"
	"platform.example/vm-migration/test/framework/cdi"
	"platform.example/vm-migration/test/framework/localpath"
	"platform.example/vm-migration/test/standins"
)

// realCDI says whether the suite runs CDI's own controller, apiserver and
// uploadproxy, with real storage: make test-e2e sets $CDI_IMAGES_DIR
// (hack/build-cdi-images.sh's folder) and $LOCAL_PATH_DIR
// (hack/build-local-path.sh's). Every import is then CDI's own adoption of
// the local-path claim the transfer wrote into, and the CDI stand-in serves nothing
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

// assertRealAdoptions checks, beside the real CDI, the one-pass data
// path: CDI ran no pod in the namespace for the migration's imports (no
// importer, clone source or upload server: nothing copied), and each
// DataVolume adopted the claim the transfer wrote into, the claim CDI
// made the DataVolume's controller, the migration still an owner until
// it is deleted.
func (s *stack) assertRealAdoptions(t *testing.T, m *v1alpha1.VirtualMachineMigration, pods []string) {
	t.Helper()
	t.Logf("CDI's pods:\n  %s", strings.Join(pods, "\n  "))
	for _, part := range []string{"cdi-importer", "cdi-clone-source", "cdi-upload-server", "size-detection"} {
		ran := slices.ContainsFunc(pods, func(p string) bool { return strings.Contains(p, part) })
		assert.False(t, ran, "CDI ran a %s pod for an import that adopts its claim: %v", part, pods)
	}
	for _, d := range m.Status.Disks {
		assert.Equal(t, d.DataVolume, d.StagingClaim, "disk %s: written in place, into its DataVolume's claim", d.Name)
		dv, err := s.cdi.CdiV1beta1().DataVolumes(s.ns).Get(s.ctx, d.DataVolume, metav1.GetOptions{})
		if !assert.NoError(t, err, "reading DataVolume %s", d.DataVolume) {
			continue
		}
		assert.Equal(t, "true", dv.Annotations[pipeline.AnnotationAllowClaimAdoption], "DataVolume %s: adopts its claim", d.DataVolume)
		pvc, err := s.kube.CoreV1().PersistentVolumeClaims(s.ns).Get(s.ctx, d.DataVolume, metav1.GetOptions{})
		if !assert.NoError(t, err, "reading claim %s", d.DataVolume) {
			continue
		}
		owner := metav1.GetControllerOf(pvc)
		if assert.NotNil(t, owner, "claim %s: CDI made the DataVolume its controller: %v", pvc.Name, pvc.OwnerReferences) {
			assert.Equal(t, dv.UID, owner.UID, "claim %s: controller", pvc.Name)
		}
		t.Logf("DataVolume %s adopted claim %s (uid %s, owners %d)", dv.Name, pvc.Name, pvc.UID, len(pvc.OwnerReferences))
	}
}
