//go:build integration

package integration

import (
	"os/exec"
	"strings"
	"testing"

	"platform.example/vm-migration/test/framework"
)

// TestManifestsRenderAndApply renders manifests/ with kustomize and applies
// it with kubectl against the real server: first as a client-side dry run,
// then for real (server-side apply), so that every object (namespace, CRD,
// RBAC, Deployment) passes the API server's validation.
func TestManifestsRenderAndApply(t *testing.T) {
	env := framework.Env(t)
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed")
	}
	rendered, err := exec.CommandContext(testContext(t), kubectl, "kustomize", framework.RepoPath("manifests")).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize manifests/: %v", err)
	}
	for _, kind := range []string{"Namespace", "CustomResourceDefinition", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Deployment"} {
		if !strings.Contains(string(rendered), "kind: "+kind+"\n") {
			t.Errorf("rendered manifests lack a %s", kind)
		}
	}
	for _, mode := range [][]string{{"--dry-run=client"}, {"--server-side", "--force-conflicts"}} {
		args := append([]string{"--kubeconfig", env.KubeconfigPath(), "apply", "-f", "-"}, mode...)
		cmd := exec.CommandContext(testContext(t), kubectl, args...)
		cmd.Stdin = strings.NewReader(string(rendered))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl apply %v: %v\n%s", mode, err, out)
		}
		if !strings.Contains(string(out), "deployment.apps/migration-controller") {
			t.Errorf("kubectl apply %v did not mention the Deployment:\n%s", mode, out)
		}
	}
}
