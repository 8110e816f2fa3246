//go:build integration

package integration

import (
	"os/exec"
	"strings"
	"testing"

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
	if err != nil {
		t.Fatalf("kubectl kustomize manifests/: %v", err)
	}
	var dep *appsv1.Deployment
	for _, doc := range strings.Split(string(rendered), "\n---\n") {
		if strings.Contains(doc, "kind: Deployment\n") {
			dep = &appsv1.Deployment{}
			if err := yaml.Unmarshal([]byte(doc), dep); err != nil {
				t.Fatal(err)
			}
		}
	}
	if dep == nil || len(dep.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("no Deployment with one container in the rendered manifests")
	}
	c := dep.Spec.Template.Spec.Containers[0]
	if c.Image != "platform.example/vm-migration-controller:dev" {
		t.Errorf("controller image %q, want the one kustomization.yaml's images: sets", c.Image)
	}
	transfer := ""
	for _, arg := range c.Args {
		if v, ok := strings.CutPrefix(arg, "--transfer-image="); ok {
			transfer = v
		}
	}
	if transfer != c.Image {
		t.Errorf("--transfer-image=%q, want the controller's image %q (the replacement in kustomization.yaml targets args by position)", transfer, c.Image)
	}
	if sc := dep.Spec.Template.Spec.SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 65532 {
		t.Errorf("the pod does not run as 65532, the image's user")
	}
}
