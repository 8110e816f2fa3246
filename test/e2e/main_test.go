//go:build e2e

// Package e2e runs whole migrations end to end on a real control plane
// with a real node (test/framework: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, and a kubelet, kube-proxy and
// containerd running pods as containers), vcsim with VMs whose disks hold
// real bytes (test/vcsimlocal), and the product as it ships: the
// controller's image built as make image builds it, its Deployment applied
// from manifests/ with kubectl apply -k (an overlay that changes only image
// references and adds faster polling), the transfer and conversion Jobs as
// real pods in namespaces that enforce PodSecurity restricted, their
// volumes real mounts of local PersistentVolumes. The conversion image is
// the simulated virt-v2v of test/images (the sample disks hold random
// bytes), except in the real-guest tests. With $KUBEVIRT_DIR (make
// test-e2e sets it) KubeVirt's own virt-api and virt-controller are
// installed on the node (kubevirt_test.go) and the KubeVirt stand-in plays
// virt-handler only; with $CDI_IMAGES_DIR and $LOCAL_PATH_DIR (make
// test-e2e sets them too) CDI's own controller, apiserver and uploadproxy
// and Rancher's local-path-provisioner are (cdi_test.go), and every disk
// is cloned by CDI's own pods into a local-path volume; without them, CDI
// and the volume provisioner are the stand-ins of test/standins (and,
// without $KUBEVIRT_DIR, KubeVirt too). The crash and leader
// election tests run the controller's command as processes of their own,
// to kill them at chosen instants, with the Deployment scaled to zero.
package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"platform.example/vm-migration/test/framework"
)

// transferBinary and controllerBinary are the commands built for the suite.
var transferBinary, controllerBinary string

func TestMain(m *testing.M) {
	start := time.Now()
	var err error
	if transferBinary, err = build("vm-transfer"); err == nil {
		controllerBinary, err = build("migration-controller")
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "e2e: vm-transfer and migration-controller built in %s\n", time.Since(start).Round(time.Millisecond))
	crds, err := suiteCRDs()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		os.Exit(2)
	}
	opts := []framework.Option{framework.WithCRDs(crds...), framework.WithNode()}
	if realKubeVirtNode() {
		// virt-handler's DaemonSet is privileged; its launcher pods
		// join Multus networks.
		opts = append(opts, framework.WithPrivilegedPods(), framework.WithNetworkAttachments())
	}
	framework.Run(m, opts...)
}

// build builds cmd/<name> into _output/e2e (git-ignored), so that a
// second run reuses Go's build cache.
func build(name string) (string, error) {
	root, err := framework.RepoRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(root, "_output", "e2e", name)
	cmd := exec.Command("go", "build", "-o", out, "./cmd/"+name)
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building %s: %w", name, err)
	}
	return out, nil
}
