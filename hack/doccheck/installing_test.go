package doccheck

import (
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// overlayHeading is the first line of installing.md's overlay.
const overlayHeading = "# my-install/kustomization.yaml"

// yamlBlock is the YAML code block of a Markdown file that starts with
// first.
func yamlBlock(t *testing.T, path, first string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(data), "```yaml\n"+first+"\n")
	require.True(t, ok, "%s has no yaml block starting with %q", path, first)
	block, _, ok := strings.Cut(rest, "\n```")
	require.True(t, ok, "the block %q of %s does not end", first, path)
	return first + "\n" + block + "\n"
}

// TestInstallingOverlayRenders renders the overlay installing.md shows,
// as kubectl apply -k does, beside a clone named as it says: the
// Deployment runs the overlay's images and has one --conversion-image, the
// overlay's (issue 34: the overlay added a second and left the base's).
func TestInstallingOverlayRenders(t *testing.T) {
	root := repoRoot(t)
	overlay := yamlBlock(t, filepath.Join(root, "docs", "operators", "installing.md"), overlayHeading)
	dir := t.TempDir()
	abs, err := filepath.Abs(root)
	require.NoError(t, err)
	require.NoError(t, os.Symlink(abs, filepath.Join(dir, "vm-migration-controller")))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "my-install"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "my-install", "kustomization.yaml"), []byte(overlay), 0o600))

	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(dir, "my-install"))
	require.NoError(t, err, "kustomize build of installing.md's overlay:\n%s", overlay)
	var deployment struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Image string   `json:"image"`
						Args  []string `json:"args"`
					} `json:"containers"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	found := false
	for _, r := range resources.Resources() {
		if r.GetKind() != "Deployment" || r.GetName() != "migration-controller" {
			continue
		}
		data, err := r.AsYAML()
		require.NoError(t, err)
		require.NoError(t, yaml.Unmarshal(data, &deployment))
		found = true
	}
	require.True(t, found, "the overlay renders no Deployment migration-controller")
	require.Len(t, deployment.Spec.Template.Spec.Containers, 1)
	c := deployment.Spec.Template.Spec.Containers[0]
	assert.Equal(t, "registry.example.com/vmm/vm-migration-controller:v0.1.0", c.Image)
	var conversion, allowed []string
	for _, a := range c.Args {
		if strings.HasPrefix(a, "--conversion-image=") {
			conversion = append(conversion, a)
		}
		if v, ok := strings.CutPrefix(a, "--allowed-conversion-images="); ok {
			allowed = append(allowed, v)
		}
	}
	assert.Equal(t, []string{"--conversion-image=registry.example.com/vmm/vm-migration-conversion:v0.1.0"}, conversion, "the Deployment's --conversion-image arguments")
	// The allow-list beside it (issue 50): one argument, whose pattern
	// lets a migration name another tag of the image, and no other image,
	// as preflight matches them (path.Match).
	require.Len(t, allowed, 1, "the Deployment's --allowed-conversion-images arguments")
	for image, want := range map[string]bool{
		"registry.example.com/vmm/vm-migration-conversion:v0.2.0-rc.1": true,
		"registry.example.com/vmm/virt-v2v:2.13":                       false,
		"registry.example.com/other/vm-migration-conversion:v0.1.0":    false,
	} {
		ok, err := path.Match(allowed[0], image)
		require.NoError(t, err, allowed[0])
		assert.Equal(t, want, ok, "%s allows %s", allowed[0], image)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "operators", "installing.md"))
	require.NoError(t, err)
	assert.Contains(t, string(doc), "spec.conversion.image:\nregistry.example.com/vmm/vm-migration-conversion:v0.2.0-rc.1", "the image installing.md says a migration may name")
}

// TestExplainNamesAllowedConversionImages: kubectl explain
// vmm.spec.conversion.image says which images the controller lets a
// migration name (issue 34: it did not mention --allowed-conversion-images).
func TestExplainNamesAllowedConversionImages(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "manifests", "crd", "migration.platform.example_virtualmachinemigrations.yaml"))
	require.NoError(t, err)
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema schema `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	require.NoError(t, yaml.Unmarshal(data, &crd))
	require.NotEmpty(t, crd.Spec.Versions)
	image := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["conversion"].Properties["image"]
	assert.Contains(t, image.Description, "--allowed-conversion-images")
	assert.Contains(t, image.Description, "--conversion-image")
}

// schema is the part of an OpenAPI schema the test reads.
type schema struct {
	Description string            `json:"description"`
	Properties  map[string]schema `json:"properties"`
}
