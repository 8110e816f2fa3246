package cdi

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"platform.example/vm-migration/test/framework"
	"platform.example/vm-migration/test/framework/localpath"
)

// StorageInstall is the real storage and the real CDI, built and with
// their images already on the cluster's node.
type StorageInstall struct {
	// CDI is hack/build-cdi-images.sh's build (with hack/build-cdi.sh's
	// CRDs).
	CDI *Build
	// LocalPath is hack/build-local-path.sh's build.
	LocalPath *localpath.Build
	// Volumes is the folder on the node for local-path's volumes.
	Volumes string
	// Timeout bounds CDI's install (zero: Install's default).
	Timeout time.Duration
	// Logf, when set, is told each step and how long it took.
	Logf func(format string, args ...any)
}

// InstallWithStorage installs local-path-provisioner, then CDI, then says
// in local-path's StorageProfile what its claims are (ReadWriteOnce,
// Filesystem), as a cluster's admin does for a provisioner CDI does not
// know: without it CDI renders no target claim of the class. It returns
// the line that names them: "cdi: <version> controller, apiserver,
// uploadproxy on node <node>; storage: local-path-provisioner <version>",
// the node being the one CDI's controller runs on.
func InstallWithStorage(ctx context.Context, cfg *rest.Config, in StorageInstall) (string, error) {
	if err := localpath.Install(ctx, cfg, localpath.Options{Build: in.LocalPath, Root: in.Volumes, Logf: in.Logf}); err != nil {
		return "", fmt.Errorf("installing local-path-provisioner: %w", err)
	}
	b := in.CDI
	if err := Install(ctx, cfg, Options{Images: b.Images, CRDDir: b.CRDDir, ResourcesDir: b.ResourcesDir, Logf: in.Logf, Timeout: in.Timeout}); err != nil {
		return "", fmt.Errorf("installing CDI: %w", err)
	}
	if err := SetClaimProperties(ctx, cfg, localpath.StorageClass, "ReadWriteOnce", "Filesystem"); err != nil {
		return "", err
	}
	node, err := controllerNode(ctx, cfg)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("cdi: %s controller, apiserver, uploadproxy on node %s; storage: local-path-provisioner %s",
		framework.Tag(b.Images.Controller), node, in.LocalPath.Version), nil
}

// InstallWithStorageOnNode imports the images of the builds in CDI's
// imagesDir (with cdiDir's CRDs) and local-path's dir into env's node, and
// installs both (InstallWithStorage) with local-path's volumes under env's
// folder.
func InstallWithStorageOnNode(ctx context.Context, env *framework.Environment, imagesDir, cdiDir, localPathDir string, timeout time.Duration, logf func(string, ...any)) (string, error) {
	lp, err := localpath.LoadBuild(localPathDir)
	if err != nil {
		return "", err
	}
	if err := localpath.ImportImages(ctx, env, lp); err != nil {
		return "", err
	}
	b, err := LoadBuild(imagesDir, crdDir(cdiDir))
	if err != nil {
		return "", err
	}
	if err := importImages(ctx, env, b, logf); err != nil {
		return "", err
	}
	return InstallWithStorage(ctx, env.Config(), StorageInstall{CDI: b, LocalPath: lp, Volumes: localpath.NodeVolumes(env), Timeout: timeout, Logf: logf})
}

// controllerNode is the node cdi-deployment's pod runs on.
func controllerNode(ctx context.Context, cfg *rest.Config) (string, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	pods, err := kube.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{LabelSelector: "cdi.kubevirt.io=" + ControllerName})
	if err != nil {
		return "", fmt.Errorf("listing CDI's controller pods: %w", err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" {
			return p.Spec.NodeName, nil
		}
	}
	return "", fmt.Errorf("no pod of %s/%s is on a node", Namespace, ControllerName)
}
