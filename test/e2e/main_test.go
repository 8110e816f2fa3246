//go:build e2e

// Package e2e runs whole migrations end to end: a real etcd,
// kube-apiserver and kube-controller-manager (test/framework), vcsim with VMs
// whose disks hold real bytes (test/vcsimlocal), the migration controller
// in-process through manager.Run as its own ServiceAccount under
// manifests/rbac.yaml, the real vm-transfer command, and the simulated
// cluster actors of test/standins (kubelet, storage, CDI, KubeVirt).
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
	framework.Run(m,
		framework.WithCRDs(framework.RepoPath("manifests/crd"), framework.RepoPath("test/crds")),
		framework.WithControllerManager(),
	)
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
