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
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
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
	if err != nil {
		t.Fatal(err)
	}
	img := imageFromLayout(t, res.LayoutPath)
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	checkConfig(t, cfg)
	files := imageFiles(t, img)
	checkFiles(t, files)

	fromTar, err := tarball.ImageFromPath(res.TarballPath, nil)
	if err != nil {
		t.Fatalf("reading the tarball: %v", err)
	}
	// The tarball holds the same config (hence the same layers by diff ID).
	tarConfig, err := fromTar.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	if layoutConfig, _ := img.ConfigName(); tarConfig != layoutConfig {
		t.Errorf("tarball image config %s, layout image config %s", tarConfig, layoutConfig)
	}
	again, err := Build(opts)
	if err != nil {
		t.Fatal(err)
	}
	if again.Digest != res.Digest {
		t.Errorf("building twice gave %s then %s: the build is not reproducible", res.Digest, again.Digest)
	}
}

func imageFromLayout(t *testing.T, path string) v1.Image {
	t.Helper()
	idx, err := layout.ImageIndexFromPath(path)
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(manifest.Manifests) != 1 || manifest.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "registry.example/vm-migration-controller:v1.2.3" {
		t.Fatalf("layout index %+v, want one image named by its reference", manifest.Manifests)
	}
	img, err := idx.Image(manifest.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func checkConfig(t *testing.T, cfg *v1.ConfigFile) {
	t.Helper()
	c := cfg.Config
	if c.User != "65532:65532" {
		t.Errorf("user %q, want the numeric non-root 65532:65532", c.User)
	}
	if len(c.Entrypoint) != 1 || c.Entrypoint[0] != "/usr/local/bin/migration-controller" || len(c.Cmd) != 0 {
		t.Errorf("entrypoint %q cmd %q, want the controller alone (no shell)", c.Entrypoint, c.Cmd)
	}
	if cfg.OS != "linux" || cfg.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s", cfg.OS, cfg.Architecture)
	}
	want := map[string]string{
		"org.opencontainers.image.title":    "vm-migration-controller",
		"org.opencontainers.image.version":  "v1.2.3",
		"org.opencontainers.image.revision": "abc123",
		"org.opencontainers.image.created":  "2023-11-14T22:13:20Z",
		LabelCommands:                       "/usr/local/bin/migration-controller," + pipeline.DefaultTransferCommand,
		LabelSBOM:                           imageSBOM,
	}
	for k, v := range want {
		if c.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, c.Labels[k], v)
		}
	}
}

// imageFiles reads every regular file and directory of the image.
func imageFiles(t *testing.T, img v1.Image) map[string]*tar.Header {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]*tar.Header{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
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
	for _, exe := range []string{"/usr/local/bin/migration-controller", pipeline.DefaultTransferCommand} {
		if h := files[exe]; h == nil || h.Mode&0o111 == 0 || h.Typeflag != tar.TypeReg {
			t.Errorf("%s is missing or not executable", exe)
		}
	}
	for _, f := range []string{"/etc/passwd", "/etc/group", imageCAFile, imageSBOM} {
		if files[f] == nil {
			t.Errorf("%s is missing", f)
		}
	}
	for _, shell := range []string{"/bin/sh", "/bin/bash", "/usr/bin/sh"} {
		if files[shell] != nil {
			t.Errorf("the image carries a shell at %s", shell)
		}
	}
	if h := files["/tmp"]; h == nil || h.Mode&0o1777 != 0o1777 {
		t.Error("/tmp is missing or not world-writable with the sticky bit")
	}
	if h := files[imageHome]; h == nil || h.Uid != nonRootID {
		t.Errorf("%s is missing or not owned by %d", imageHome, nonRootID)
	}
}

// checkSBOM reads the SPDX document and looks for the commands and a few
// modules they link.
func checkSBOM(t *testing.T, r io.Reader) {
	t.Helper()
	var doc spdxDocument
	if err := json.NewDecoder(r).Decode(&doc); err != nil {
		t.Fatalf("the SBOM is not JSON: %v", err)
	}
	names := map[string]bool{}
	for _, p := range doc.Packages {
		names[p.Name] = true
	}
	for _, want := range []string{"migration-controller", "vm-transfer", "stdlib", "k8s.io/client-go", "github.com/vmware/govmomi", "ca-certificates"} {
		if !names[want] {
			t.Errorf("the SBOM lists no package %s", want)
		}
	}
	if doc.SPDXVersion != "SPDX-2.3" || len(doc.Relationships) == 0 {
		t.Errorf("SBOM version %q with %d relationships", doc.SPDXVersion, len(doc.Relationships))
	}
}

func TestBuildRejectsDynamicBinaries(t *testing.T) {
	dir := t.TempDir()
	// /bin/true is a dynamically linked Debian executable.
	for _, bin := range binaries {
		data, err := os.ReadFile("/bin/true")
		if err != nil {
			t.Skip("no /bin/true to stand for a dynamic binary")
		}
		if err := os.WriteFile(filepath.Join(dir, bin), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	_, err := Build(Options{BinDir: dir, OutDir: t.TempDir(), Reference: "x/y:z", CACertificates: "/etc/ssl/certs/ca-certificates.crt"})
	if err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Errorf("error %v, want one saying to build with CGO_ENABLED=0", err)
	}
}
