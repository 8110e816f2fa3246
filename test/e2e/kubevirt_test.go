//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"platform.example/vm-migration/test/framework"
	"platform.example/vm-migration/test/framework/cdi"
	"platform.example/vm-migration/test/framework/kubevirt"
	"platform.example/vm-migration/test/images"
)

// realKubeVirt says whether the suite runs KubeVirt's own control plane
// (make test-e2e sets $KUBEVIRT_DIR to hack/build-kubevirt.sh's folder):
// virt-api's webhooks admit every VM and instance, virt-controller creates
// the instances and renders their virt-launcher pods, and the KubeVirt
// stand-in plays virt-handler only (standins.Config.RealKubeVirt).
func realKubeVirt() bool { return os.Getenv(kubevirt.EnvDir) != "" }

// realKubeVirtNode says whether KubeVirt's node side runs as well
// ($KUBEVIRT_NODE_DIR, hack/build-kubevirt-node.sh's folder, with
// $KUBEVIRT_DIR): virt-handler's DaemonSet hands each instance to the
// real virt-launcher, and there is no KubeVirt stand-in.
func realKubeVirtNode() bool { return realKubeVirt() && os.Getenv(kubevirt.EnvNodeDir) != "" }

// backendNetwork is the Multus network the suite's migrations map a
// source network to; virt-controller reads its definition before it
// renders a launcher pod.
const backendNetwork = "default/backend"

// suiteCRDs are the folders of the CRDs the control plane starts with:
// the project's, and the stand-ins' copies of KubeVirt's and CDI's; with
// the real KubeVirt, all of CDI's from its build ($CDI_DIR: virt-
// controller handles no VM until CDI's CDI, CDIConfig, StorageProfile and
// DataSource CRDs exist) and KubeVirt's own, which its install applies.
func suiteCRDs() ([]string, error) {
	own := framework.RepoPath("manifests/crd")
	if !realKubeVirt() {
		return []string{own, framework.RepoPath("test/crds")}, nil
	}
	dir := os.Getenv(cdi.EnvCDIDir)
	if dir == "" {
		return nil, fmt.Errorf("$%s is set but $%s is not: make test-e2e sets both (hack/build-kubevirt.sh, hack/build-cdi.sh)", kubevirt.EnvDir, cdi.EnvCDIDir)
	}
	return []string{own, filepath.Join(dir, "crds")}, nil
}

// installKubeVirt imports KubeVirt's images and the launcher image of
// test/images under the name KubeVirt's install gives virt-launcher
// (localhost/kubevirt/virt-launcher:<version>), installs virt-api and
// virt-controller (kubevirt.Install), and defines the Multus network the
// migrations use, as a cluster with Multus has it.
func installKubeVirt(ctx context.Context, env *framework.Environment) (string, error) {
	start := time.Now()
	b, err := kubevirt.LoadBuild(os.Getenv(kubevirt.EnvDir))
	if err != nil {
		return "", err
	}
	tarballs, what := b.Tarballs, "virt-api and virt-controller"
	var node *kubevirt.NodeBuild
	if realKubeVirtNode() {
		if node, err = kubevirt.LoadNodeBuild(os.Getenv(kubevirt.EnvNodeDir)); err != nil {
			return "", err
		}
		tarballs = append(tarballs, node.Tarballs...)
		what += ", virt-handler, launcher " + node.Images["virt-launcher"]
	} else {
		l, err := images.Launcher(ctx, kubevirtLauncherImage(b.Version))
		if err != nil {
			return "", err
		}
		tarballs = append(tarballs, l.Tarball)
		what += ", launcher " + l.Reference + " (the stand-in plays virt-handler)"
	}
	for _, tb := range tarballs {
		if err := env.ImportImage(ctx, tb); err != nil {
			return "", fmt.Errorf("importing %s: %w", tb, err)
		}
	}
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "e2e: "+format+"\n", args...) }
	if err := kubevirt.Install(ctx, env.Config(), kubevirt.Options{Build: b, Node: node, Logf: logf, Timeout: 6 * time.Minute}); err != nil {
		return "", err
	}
	if err := kubevirt.DefineNetwork(ctx, env.Config(), backendNetwork); err != nil {
		return "", err
	}
	return fmt.Sprintf("KubeVirt %s %s, in %s", b.Version, what, time.Since(start).Round(time.Millisecond)), nil
}

// kubevirtLauncherImage is the virt-launcher image KubeVirt's install
// names (imageRegistry localhost/kubevirt, imageTag the version).
func kubevirtLauncherImage(version string) string {
	return "localhost/kubevirt/virt-launcher:" + version
}
