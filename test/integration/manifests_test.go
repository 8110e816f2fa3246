//go:build integration

package integration

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"platform.example/vm-migration/test/framework"
)

// TestManifestsRenderAndApply renders manifests/ with kustomize and applies
// it with kubectl against the real server: first as a client-side dry run,
// then for real (server-side apply), so that every object (namespace, CRD,
// RBAC, Deployment, the FlowSchema and priority level) passes the API
// server's validation.
func TestManifestsRenderAndApply(t *testing.T) {
	env := framework.Env(t)
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed")
	}
	rendered, err := exec.CommandContext(testContext(t), kubectl, "kustomize", framework.RepoPath("manifests")).Output()
	require.NoError(t, err, "kubectl kustomize manifests/")
	// assert.True, not Contains: a failing Contains would print the whole
	// render, CRD included.
	for _, kind := range []string{"Namespace", "CustomResourceDefinition", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Deployment", "PriorityLevelConfiguration", "FlowSchema"} {
		assert.True(t, strings.Contains(string(rendered), "kind: "+kind+"\n"), "rendered manifests lack a %s", kind)
	}
	for _, mode := range [][]string{{"--dry-run=client"}, {"--server-side", "--force-conflicts"}} {
		args := append([]string{"--kubeconfig", env.KubeconfigPath(), "apply", "-f", "-"}, mode...)
		cmd := exec.CommandContext(testContext(t), kubectl, args...)
		cmd.Stdin = strings.NewReader(string(rendered))
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "kubectl apply %v:\n%s", mode, out)
		assert.Contains(t, string(out), "deployment.apps/migration-controller", "kubectl apply %v did not mention the Deployment", mode)
	}
}
