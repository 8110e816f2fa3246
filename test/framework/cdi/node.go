package cdi

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"platform.example/vm-migration/test/framework"
)

// crdDir is the CRDs' folder of hack/build-cdi.sh's folder cdiDir; empty
// when cdiDir is (LoadBuild then takes the CRDs from the images' folder).
func crdDir(cdiDir string) string {
	if cdiDir == "" {
		return ""
	}
	return filepath.Join(cdiDir, "crds")
}

// importImages imports the build's image tarballs into env's node.
func importImages(ctx context.Context, env *framework.Environment, b *Build, logf func(string, ...any)) error {
	start := time.Now()
	for _, tb := range b.Tarballs {
		t0 := time.Now()
		if err := env.ImportImage(ctx, tb); err != nil {
			return fmt.Errorf("importing %s: %w", tb, err)
		}
		if fi, err := os.Stat(tb); err == nil && logf != nil {
			logf("imported %s (%d MiB) in %s", filepath.Base(tb), fi.Size()>>20, time.Since(t0).Round(time.Millisecond))
		}
	}
	if logf != nil {
		logf("CDI's %d images imported in %s", len(b.Tarballs), time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// storageProfileGVR is CDI's StorageProfile, one per StorageClass.
var storageProfileGVR = schema.GroupVersionResource{Group: "cdi.kubevirt.io", Version: "v1beta1", Resource: "storageprofiles"}

// InstallOnNode imports the images of hack/build-cdi-images.sh's folder
// imagesDir into env's node and installs CDI (Install) with the CRDs of
// hack/build-cdi.sh's folder cdiDir (when not empty); it returns the build.
func InstallOnNode(ctx context.Context, env *framework.Environment, imagesDir, cdiDir string, timeout time.Duration, logf func(string, ...any)) (*Build, error) {
	b, err := LoadBuild(imagesDir, crdDir(cdiDir))
	if err != nil {
		return nil, err
	}
	if err := importImages(ctx, env, b, logf); err != nil {
		return nil, err
	}
	err = Install(ctx, env.Config(), Options{Images: b.Images, CRDDir: b.CRDDir, ResourcesDir: b.ResourcesDir, Logf: logf, Timeout: timeout})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// SetClaimProperties says, in the StorageProfile of class, the access mode
// and volume mode of its claims, as a cluster's admin does for a
// provisioner CDI does not know (CDI then renders target claims of the
// class without them being named). It waits for CDI to have made the
// profile.
func SetClaimProperties(ctx context.Context, cfg *rest.Config, class, accessMode, volumeMode string) error {
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("storage profile %s: %w", class, err)
	}
	patch := fmt.Appendf(nil, `{"spec":{"claimPropertySets":[{"accessModes":[%q],"volumeMode":%q}]}}`, accessMode, volumeMode)
	var last error
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, last = dc.Resource(storageProfileGVR).Patch(ctx, class, types.MergePatchType, patch, metav1.PatchOptions{})
		return last == nil, nil
	})
	if err != nil {
		if apierrors.IsNotFound(last) {
			return fmt.Errorf("storage profile %s: CDI made none within a minute", class)
		}
		return fmt.Errorf("storage profile %s: setting its claim properties: %v: %w", class, last, err)
	}
	return nil
}
