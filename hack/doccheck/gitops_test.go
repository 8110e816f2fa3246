package doccheck

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// argoCDHealthKey is the argocd-cm key Argo CD reads the health check of
// migration.platform.example/VirtualMachineMigration from.
const argoCDHealthKey = "resource.customizations.health.migration.platform.example_VirtualMachineMigration"

// argoCDInstall stands in for Argo CD's install.yaml: its argocd-cm,
// with a setting of its own the component must keep.
const argoCDInstall = `apiVersion: v1
kind: ConfigMap
metadata:
  name: argocd-cm
  labels:
    app.kubernetes.io/name: argocd-cm
    app.kubernetes.io/part-of: argocd
data:
  timeout.reconciliation: 180s
`

// TestArgoCDComponentRenders renders the overlay gitops.md shows, beside
// a clone named as it says and a stand-in for Argo CD's install.yaml:
// argocd-cm keeps its own settings and holds manifests/argocd/health.lua,
// the file TestArgoCDHealthCheck runs, under the key Argo CD reads.
func TestArgoCDComponentRenders(t *testing.T) {
	root := repoRoot(t)
	overlay := yamlBlock(t, filepath.Join(root, "docs", "operators", "gitops.md"), "# my-argocd/kustomization.yaml")
	dir := t.TempDir()
	abs, err := filepath.Abs(root)
	require.NoError(t, err)
	require.NoError(t, os.Symlink(abs, filepath.Join(dir, "vm-migration-controller")))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "my-argocd"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "my-argocd", "kustomization.yaml"), []byte(overlay), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "my-argocd", "install.yaml"), []byte(argoCDInstall), 0o600))

	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(dir, "my-argocd"))
	require.NoError(t, err, "kustomize build of gitops.md's overlay:\n%s", overlay)
	var cm struct {
		Metadata struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
		Data map[string]string `json:"data"`
	}
	require.Len(t, resources.Resources(), 1, "the overlay renders argocd-cm alone")
	data, err := resources.Resources()[0].AsYAML()
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(data, &cm))
	assert.Equal(t, "argocd-cm", cm.Metadata.Name, "the ConfigMap's name: Argo CD reads argocd-cm, no other")
	assert.Equal(t, "argocd", cm.Metadata.Namespace)
	assert.Equal(t, "180s", cm.Data["timeout.reconciliation"], "argocd-cm's own settings are kept")
	script, err := os.ReadFile(filepath.Join(root, "manifests", "argocd", "health.lua"))
	require.NoError(t, err)
	assert.Equal(t, string(script), cm.Data[argoCDHealthKey], "argocd-cm's %s, want manifests/argocd/health.lua", argoCDHealthKey)
}
