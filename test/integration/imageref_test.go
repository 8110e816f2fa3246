//go:build integration

package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"platform.example/vm-migration/test/framework"
)

// TestManifestsImageReference renders an overlay of manifests/ the way a
// user sets the controller's image (an images: entry of their own) and
// checks that the image reaches the controller container, that nothing pins
// the transfer image to another one (no --transfer-image: the controller
// reads its own Pod's image, named by the downward API's POD_NAME and
// POD_NAMESPACE), and that the pod runs as the image's user.
func TestManifestsImageReference(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed")
	}
	overlay := t.TempDir()
	rel, err := filepath.Rel(overlay, framework.RepoPath("manifests"))
	require.NoError(t, err, "relative path to manifests/")
	kustomization := "resources:\n  - " + rel + "\nimages:\n  - name: platform.example/vm-migration-controller\n    newName: registry.example.com/team/vmm\n    newTag: v9.8.7\n"
	require.NoError(t, os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kustomization), 0o600), "writing the overlay")
	// kustomize refuses a resource outside the overlay's folder unless told.
	rendered, err := exec.CommandContext(testContext(t), kubectl, "kustomize", "--load-restrictor=LoadRestrictionsNone", overlay).Output()
	require.NoError(t, err, "kubectl kustomize of an overlay of manifests/")
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
	assert.Equal(t, "registry.example.com/team/vmm:v9.8.7", c.Image, "controller image, want the one the overlay's images: sets")
	for _, arg := range c.Args {
		assert.NotContains(t, arg, "--transfer-image", "the Deployment pins the transfer image; it must follow the controller's own")
	}
	fieldOf := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			fieldOf[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	assert.Equal(t, map[string]string{"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"}, fieldOf,
		"the downward API variables the controller reads its own Pod by")
	const notNonRoot = "the pod does not run as 65532, the image's user"
	if sc := dep.Spec.Template.Spec.SecurityContext; assert.NotNil(t, sc, notNonRoot) && assert.NotNil(t, sc.RunAsUser, notNonRoot) {
		assert.Equal(t, int64(65532), *sc.RunAsUser, notNonRoot)
	}
}
