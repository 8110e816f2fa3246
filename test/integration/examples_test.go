//go:build integration

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFindExamples checks the example finder on a made-up repository, so
// TestDocumentedExamplesAccepted cannot pass by finding nothing.
func TestFindExamples(t *testing.T) {
	root := t.TempDir()
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(root, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	vmm := "apiVersion: migration.platform.example/v1alpha1\nkind: VirtualMachineMigration\nmetadata:\n  name: %s\nspec: {}\n"
	write("README.md", "# Title\n\n```yaml\n"+fmt.Sprintf(vmm, "readme-1")+"```\n\n```bash\nkubectl get vmm\n```\n\n```yaml\napiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\n---\n"+fmt.Sprintf(vmm, "readme-2")+"```\n")
	write("manifests/examples/web.yaml", fmt.Sprintf(vmm, "manifest-1")+"---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n")
	write("manifests/crd/crd.yaml", "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: virtualmachinemigrations.migration.platform.example\n")
	write("docs/guide/usage.md", "```yml\n"+fmt.Sprintf(vmm, "docs-1")+"```\n")

	got, err := findExamples(root)
	require.NoError(t, err, "finding examples")
	var names []string
	for _, e := range got {
		names = append(names, e.obj.GetName()+" @ "+e.where)
	}
	want := []string{
		"manifest-1 @ manifests/examples/web.yaml#1 manifest-1",
		"docs-1 @ docs/guide/usage.md yaml block 1#1 docs-1",
		"readme-1 @ README.md yaml block 1#1 readme-1",
		"readme-2 @ README.md yaml block 2#1 readme-2",
	}
	assert.Equal(t, want, names, "the examples found, in order")
}
