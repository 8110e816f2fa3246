//go:build integration

package integration

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"platform.example/vm-migration/test/framework"
)

// TestManifestsImageReference renders manifests/ and checks that the image
// set through kustomize's images: reaches both the controller container and
// its --transfer-image flag (the transfer Jobs run vm-transfer from the
// controller's own image).
func TestManifestsImageReference(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed")
	}
	rendered, err := exec.CommandContext(testContext(t), kubectl, "kustomize", framework.RepoPath("manifests")).Output()
	require.NoError(t, err, "kubectl kustomize manifests/")
	var dep *appsv1.Deployment
	for _, doc := range strings.Split(string(rendered), "\n---\n") {
		if strings.Contains(doc, "kind: Deployment\n") {
			dep = &appsv1.Deployment{}
			require.NoError(t, yaml.Unmarshal([]byte(doc), dep), "decoding the Deployment")
		}
	}
	require.NotNil(t, dep, "no Deployment in the rendered manifests")
	require.Len(t, dep.Spec.Template.Spec.Containers, 1, "the Deployment's containers")
	c := dep.Spec.Template.Spec.Containers[0]
	assert.Equal(t, "platform.example/vm-migration-controller:dev", c.Image, "controller image, want the one kustomization.yaml's images: sets")
	transfer := ""
	for _, arg := range c.Args {
		if v, ok := strings.CutPrefix(arg, "--transfer-image="); ok {
			transfer = v
		}
	}
	assert.Equal(t, c.Image, transfer, "--transfer-image, want the controller's image (the replacement in kustomization.yaml targets args by position)")
	const notNonRoot = "the pod does not run as 65532, the image's user"
	if sc := dep.Spec.Template.Spec.SecurityContext; assert.NotNil(t, sc, notNonRoot) && assert.NotNil(t, sc.RunAsUser, notNonRoot) {
		assert.Equal(t, int64(65532), *sc.RunAsUser, notNonRoot)
	}
}
