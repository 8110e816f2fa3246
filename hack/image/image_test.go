package main

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"platform.example/vm-migration/pkg/steps/pipeline"
)

// buildBinaries builds the image's commands as make image does: static,
// trimmed, for linux on this machine's architecture.
func buildBinaries(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	start := time.Now()
	args := []string{"build", "-trimpath", "-ldflags", "-s -w", "-o", dir + "/"}
	for _, bin := range binaries {
		args = append(args, "platform.example/vm-migration/cmd/"+bin)
	}
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build:\n%s", out)
	t.Logf("binaries built in %s", time.Since(start).Round(time.Millisecond))
	return dir
}

// TestImage builds the image and inspects what a runtime would see: the
// config (user, entrypoint, labels), the files (both commands where the
// Jobs expect them, passwd, CA certificates, the SBOM), and the tarball.
func TestImage(t *testing.T) {
	out := t.TempDir()
	opts := Options{BinDir: buildBinaries(t), OutDir: out, Reference: "registry.example/vm-migration-controller:v1.2.3",
		Version: "v1.2.3", Revision: "abc123", CACertificates: "/etc/ssl/certs/ca-certificates.crt", Created: time.Unix(1700000000, 0).UTC()}
	res, err := Build(opts)
	require.NoError(t, err, "building the image")
	img := imageFromLayout(t, res.LayoutPath)
	cfg, err := img.ConfigFile()
	require.NoError(t, err, "reading the image config")
	checkConfig(t, cfg)
	files := imageFiles(t, img)
	checkFiles(t, files)

	fromTar, err := tarball.ImageFromPath(res.TarballPath, nil)
	require.NoError(t, err, "reading the tarball")
	// The tarball holds the same config (hence the same layers by diff ID).
	tarConfig, err := fromTar.ConfigName()
	require.NoError(t, err, "the tarball image's config name")
	layoutConfig, _ := img.ConfigName()
	assert.Equal(t, layoutConfig, tarConfig, "tarball image config, want the layout image's")
	again, err := Build(opts)
	require.NoError(t, err, "building the image again")
	assert.Equal(t, res.Digest, again.Digest, "the digest of a second build: the build is not reproducible")
}

func imageFromLayout(t *testing.T, path string) v1.Image {
	t.Helper()
	idx, err := layout.ImageIndexFromPath(path)
	require.NoError(t, err, "reading the layout index")
	manifest, err := idx.IndexManifest()
	require.NoError(t, err, "reading the layout's index manifest")
	require.Len(t, manifest.Manifests, 1, "layout index, want one image named by its reference")
	require.Equal(t, "registry.example/vm-migration-controller:v1.2.3", manifest.Manifests[0].Annotations["org.opencontainers.image.ref.name"],
		"the name of the layout's image (%+v), want its reference", manifest.Manifests[0])
	img, err := idx.Image(manifest.Manifests[0].Digest)
	require.NoError(t, err, "reading the layout's image")
	return img
}

func checkConfig(t *testing.T, cfg *v1.ConfigFile) {
	t.Helper()
	c := cfg.Config
	assert.Equal(t, "65532:65532", c.User, "user, want the numeric non-root 65532:65532")
	assert.Equal(t, []string{"/usr/local/bin/migration-controller"}, c.Entrypoint, "entrypoint, want the controller alone (no shell)")
	assert.Empty(t, c.Cmd, "cmd, want the controller alone (no shell)")
	assert.Equal(t, "linux", cfg.OS, "platform %s/%s: OS", cfg.OS, cfg.Architecture)
	assert.Equal(t, runtime.GOARCH, cfg.Architecture, "platform %s/%s: architecture", cfg.OS, cfg.Architecture)
	want := map[string]string{
		"org.opencontainers.image.title":    "vm-migration-controller",
		"org.opencontainers.image.version":  "v1.2.3",
		"org.opencontainers.image.revision": "abc123",
		"org.opencontainers.image.created":  "2023-11-14T22:13:20Z",
		LabelCommands:                       "/usr/local/bin/migration-controller," + pipeline.DefaultTransferCommand,
		LabelSBOM:                           imageSBOM,
	}
	for k, v := range want {
		assert.Equal(t, v, c.Labels[k], "label %s", k)
	}
}

// imageFiles reads every regular file and directory of the image.
func imageFiles(t *testing.T, img v1.Image) map[string]*tar.Header {
	t.Helper()
	layers, err := img.Layers()
	require.NoError(t, err, "the image's layers")
	files := map[string]*tar.Header{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		require.NoError(t, err, "uncompressing a layer")
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err, "reading a layer's tar")
			if h.Name == strings.TrimPrefix(imageSBOM, "/") {
				checkSBOM(t, tr)
			}
			files["/"+strings.TrimSuffix(h.Name, "/")] = h
		}
		rc.Close()
	}
	return files
}

func checkFiles(t *testing.T, files map[string]*tar.Header) {
	t.Helper()
	// Looked up with NotNil rather than Contains: a failing Contains would
	// print the map's header pointers.
	for _, exe := range []string{"/usr/local/bin/migration-controller", pipeline.DefaultTransferCommand} {
		if h := files[exe]; assert.NotNil(t, h, "%s is missing", exe) {
			assert.Equal(t, byte(tar.TypeReg), h.Typeflag, "%s: the tar type, want a regular file", exe)
			assert.NotZero(t, h.Mode&0o111, "%s is not executable (mode %o)", exe, h.Mode)
		}
	}
	for _, f := range []string{"/etc/passwd", "/etc/group", imageCAFile, imageSBOM} {
		assert.NotNil(t, files[f], "%s is missing", f)
	}
	for _, shell := range []string{"/bin/sh", "/bin/bash", "/usr/bin/sh"} {
		assert.Nil(t, files[shell], "the image carries a shell at %s", shell)
	}
	if h := files["/tmp"]; assert.NotNil(t, h, "/tmp is missing") {
		assert.Equal(t, int64(0o1777), h.Mode&0o1777, "/tmp (mode %o) is not world-writable with the sticky bit", h.Mode)
	}
	if h := files[imageHome]; assert.NotNil(t, h, "%s is missing", imageHome) {
		assert.Equal(t, nonRootID, h.Uid, "the owner of %s", imageHome)
	}
}

// checkSBOM reads the SPDX document and looks for the commands and a few
// modules they link.
func checkSBOM(t *testing.T, r io.Reader) {
	t.Helper()
	var doc spdxDocument
	require.NoError(t, json.NewDecoder(r).Decode(&doc), "the SBOM is not JSON")
	names := map[string]bool{}
	for _, p := range doc.Packages {
		names[p.Name] = true
	}
	for _, want := range []string{"migration-controller", "vm-transfer", "stdlib", "k8s.io/client-go", "github.com/vmware/govmomi", "ca-certificates"} {
		assert.Contains(t, names, want, "the SBOM lists no package %s", want)
	}
	assert.Equal(t, "SPDX-2.3", doc.SPDXVersion, "SBOM version")
	assert.NotEmpty(t, doc.Relationships, "SBOM relationships")
}

func TestBuildRejectsDynamicBinaries(t *testing.T) {
	dir := t.TempDir()
	// /bin/true is a dynamically linked Debian executable.
	for _, bin := range binaries {
		data, err := os.ReadFile("/bin/true")
		if err != nil {
			t.Skip("no /bin/true to stand for a dynamic binary")
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, bin), data, 0o755))
	}
	_, err := Build(Options{BinDir: dir, OutDir: t.TempDir(), Reference: "x/y:z", CACertificates: "/etc/ssl/certs/ca-certificates.crt"})
	assert.ErrorContains(t, err, "CGO_ENABLED=0", "want an error saying to build with CGO_ENABLED=0")
}
