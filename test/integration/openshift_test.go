//go:build integration

package integration

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"platform.example/vm-migration/test/framework"
)

// TestOpenShiftComponent renders manifests/ with the OpenShift component,
// as a user's overlay does: the controller's pod fixes no uid or gid (the
// SCC assigns them), and its flags leave the ids of the pods it runs to
// the platform.
func TestOpenShiftComponent(t *testing.T) {
	env := framework.Env(t)
	dir := t.TempDir()
	rel := func(p string) string {
		r, err := filepath.Rel(dir, framework.RepoPath(p))
		require.NoError(t, err)
		return r
	}
	k := "resources: [" + rel("manifests") + "]\ncomponents: [" + rel("manifests/components/openshift") + "]\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o600))
	out, err := exec.CommandContext(testContext(t), env.Binary("kubectl"), "kustomize", dir).Output()
	require.NoError(t, err, "kubectl kustomize of an overlay with the OpenShift component")
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	var dep *appsv1.Deployment
	for {
		var d appsv1.Deployment
		if err := dec.Decode(&d); err != nil {
			break
		}
		if d.Kind == "Deployment" {
			dep = &d
		}
	}
	require.NotNil(t, dep, "no Deployment rendered")
	sc := dep.Spec.Template.Spec.SecurityContext
	assert.Nil(t, sc.RunAsUser, "restricted-v2 refuses a fixed uid outside the namespace's range")
	assert.Nil(t, sc.RunAsGroup)
	assert.Equal(t, true, *sc.RunAsNonRoot)
	args := dep.Spec.Template.Spec.Containers[0].Args
	for _, flag := range []string{"--pod-run-as-user=none", "--pod-run-as-group=none", "--pod-fs-group=none"} {
		assert.Contains(t, args, flag)
	}
}
