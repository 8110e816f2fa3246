package main

import (
	"archive/tar"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testDpkgStatus = `Package: dpkg
Status: install ok installed
Priority: required
Architecture: amd64
Version: 1.21.22

Package: virt-v2v
Status: install ok installed
Architecture: amd64
Version: 2.2.0-1
Description: virtual-to-virtual machine converter
 with a continuation line: Package: not-a-package

Package: libguestfs0
Status: install ok installed
Architecture: amd64
Source: libguestfs
Version: 1:1.48.6-2

Package: removed-one
Status: deinstall ok config-files
Architecture: amd64
Version: 1.0
`

// testRootfs writes a root file system tar holding what the conversion
// Job needs, with passwd as /etc/passwd, leaving out the files in omit.
func testRootfs(t *testing.T, passwd string, omit ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "rootfs.tar")
	f, err := os.Create(p)
	require.NoError(t, err)
	defer f.Close()
	tw := tar.NewWriter(f)
	add := func(h *tar.Header, data string) {
		h.Size, h.Mode, h.ModTime = int64(len(data)), 0o755, time.Unix(1700000000, 0)
		require.NoError(t, tw.WriteHeader(h))
		_, err := tw.Write([]byte(data))
		require.NoError(t, err)
	}
	add(&tar.Header{Name: "bin", Typeflag: tar.TypeSymlink, Linkname: "usr/bin"}, "")
	files := map[string]string{"etc/passwd": passwd, dpkgStatus: testDpkgStatus}
	for _, req := range conversionRequired {
		if _, ok := files[req]; !ok {
			files[strings.Replace(req, "bin/sh", "usr/bin/sh", 1)] = "#!/bin/sh\n"
		}
	}
	for name, data := range files {
		if !slices.Contains(omit, name) {
			add(&tar.Header{Name: name, Typeflag: tar.TypeReg}, data)
		}
	}
	require.NoError(t, tw.Close())
	return p
}

const testPasswd = "root:x:0:0:root:/root:/bin/sh\nv2v:x:107:107:virt-v2v conversion:/var/tmp:/usr/sbin/nologin\n"

// TestConversionImage packages a root file system as the conversion
// image and inspects what a runtime would see: the user the Job runs as,
// the environment that names the fixed appliance, the self-check as the
// default command, the root file system and SBOM layers, the SBOM's
// Debian packages; and the build is reproducible.
func TestConversionImage(t *testing.T) {
	out := t.TempDir()
	opts := Options{Rootfs: testRootfs(t, testPasswd), OutDir: out, Reference: "registry.example/vm-migration-conversion:v1.2.3",
		Version: "v1.2.3", Created: time.Unix(1700000000, 0).UTC()}
	res, err := BuildConversion(opts)
	require.NoError(t, err, "building the conversion image")
	img, err := tarball.ImageFromPath(res.TarballPath, nil)
	require.NoError(t, err, "reading the tarball ctr and docker load import")
	cfg, err := img.ConfigFile()
	require.NoError(t, err, "reading the image config")
	c := cfg.Config
	assert.Equal(t, "107:107", c.User, "user, want the conversion Job's numeric 107:107")
	assert.Equal(t, []string{conversionSelfCheck}, c.Cmd, "default command, want the self-check")
	assert.Contains(t, c.Env, "LIBGUESTFS_PATH="+conversionAppliance, "the environment names the fixed appliance")
	assert.Contains(t, c.Env, "HOME=/var/tmp", "HOME, want the Job's writable /var/tmp")
	assert.Equal(t, "amd64", cfg.Architecture, "architecture, from dpkg's")
	assert.Equal(t, "vm-migration-conversion", c.Labels["org.opencontainers.image.title"], "title label")
	files := imageFiles(t, img)
	for _, f := range []string{"/usr/bin/virt-v2v-in-place", conversionAppliance + "/root", conversionSelfCheck, conversionSBOM} {
		assert.NotNil(t, files[f], "%s is missing", f)
	}
	layers, err := img.Layers()
	require.NoError(t, err)
	assert.Len(t, layers, 2, "layers: the root file system, then the SBOM")

	var doc spdxDocument
	sbom, err := os.ReadFile(res.SBOMPath)
	require.NoError(t, err, "reading the SBOM")
	require.NoError(t, json.Unmarshal(sbom, &doc), "the SBOM is not JSON")
	purls := map[string]string{}
	for _, p := range doc.Packages {
		for _, r := range p.ExternalRefs {
			purls[p.Name] = r.ReferenceLocator
		}
	}
	assert.Equal(t, map[string]string{
		"dpkg":        "pkg:deb/debian/dpkg@1.21.22?arch=amd64",
		"virt-v2v":    "pkg:deb/debian/virt-v2v@2.2.0-1?arch=amd64",
		"libguestfs0": "pkg:deb/debian/libguestfs0@1:1.48.6-2?arch=amd64",
	}, purls, "the SBOM's packages: the installed ones of the dpkg status, no other")

	again, err := BuildConversion(opts)
	require.NoError(t, err, "building the conversion image again")
	assert.Equal(t, res.Digest, again.Digest, "the digest of a second build: the packaging is not reproducible")
}

// TestConversionImageRefusesAnIncompleteRootfs: a root file system that
// lacks what the Job needs is refused, naming what it lacks.
func TestConversionImageRefusesAnIncompleteRootfs(t *testing.T) {
	tests := map[string]struct {
		rootfs string
		want   string
	}{
		"no appliance": {testRootfs(t, testPasswd, conversionAppliance[1:]+"/kernel"), "it has no " + conversionAppliance + "/kernel"},
		"no user 107":  {testRootfs(t, "root:x:0:0:root:/root:/bin/sh\n"), "no user 107 with group 107 and home /var/tmp"},
		"no status":    {testRootfs(t, testPasswd, dpkgStatus), "it has no /var/lib/dpkg/status"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := BuildConversion(Options{Rootfs: tc.rootfs, OutDir: t.TempDir(), Reference: "x/y:z"})
			assert.ErrorContains(t, err, tc.want)
		})
	}
}
