package main

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	"platform.example/vm-migration/hack/image/ociimage"
)

// Where things live in the image.
const (
	imageBinDir  = "/usr/local/bin"
	imageCAFile  = "/etc/ssl/certs/ca-certificates.crt"
	imageSBOM    = "/usr/share/doc/vm-migration-controller/sbom.spdx.json"
	imageHome    = "/home/nonroot"
	nonRootID    = 65532
	nonRootUser  = "65532:65532"
	controllerEP = imageBinDir + "/migration-controller"
)

// binaries are the commands the image carries: the controller (the
// entrypoint) and the transfer command its transfer Jobs run.
var binaries = []string{"migration-controller", "vm-transfer"}

// Options say what to build and where to write it.
type Options struct {
	// BinDir holds the static binaries named in binaries (the controller
	// image).
	BinDir string
	// Rootfs is a root file system tar: with it, BuildConversion makes the
	// conversion image of it instead.
	Rootfs string
	// OutDir receives oci/ (an OCI image layout), the tarball and the SBOM.
	OutDir string
	// Reference is the image's repository:tag.
	Reference string
	// Version and Revision go into the OCI labels.
	Version, Revision string
	// CACertificates is the PEM bundle shipped as the system trust store.
	CACertificates string
	// Created is the time of every file and of the image.
	Created time.Time
}

// Result says what was written.
type Result struct {
	Digest                            string
	LayoutPath, TarballPath, SBOMPath string
}

// Build assembles the image and writes it as an OCI layout and a tarball.
func Build(o Options) (*Result, error) {
	tag, err := name.NewTag(o.Reference)
	if err != nil {
		return nil, fmt.Errorf("image reference %q: %w", o.Reference, err)
	}
	bins, arch, err := readBinaries(o.BinDir)
	if err != nil {
		return nil, err
	}
	sbom, err := renderSBOM(o, bins)
	if err != nil {
		return nil, err
	}
	base, err := baseFiles(o.CACertificates)
	if err != nil {
		return nil, err
	}
	img, err := assemble(o, arch, base, appFiles(bins, sbom))
	if err != nil {
		return nil, err
	}
	return write(o.OutDir, "vm-migration-controller.tar", tag, img, sbom)
}

// readBinaries reads the binaries and checks they are static Linux
// executables of one architecture (there is no libc in the image).
func readBinaries(dir string) (map[string][]byte, string, error) {
	out := map[string][]byte{}
	arch := ""
	for _, bin := range binaries {
		p := filepath.Join(dir, bin)
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, "", fmt.Errorf("reading %s (build it with CGO_ENABLED=0 GOOS=linux go build -o %s ./cmd/%s): %w", p, dir, bin, err)
		}
		a, err := ociimage.StaticLinuxArch(p)
		if err != nil {
			return nil, "", err
		}
		if arch != "" && a != arch {
			return nil, "", fmt.Errorf("%s is built for %s, the other binaries for %s", p, a, arch)
		}
		arch, out[bin] = a, data
	}
	return out, arch, nil
}

// baseFiles are what an empty base lacks: a passwd and group entry for the
// non-root user, a home, /tmp, and the CA certificates.
func baseFiles(caFile string) ([]ociimage.File, error) {
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("reading the CA certificates (Debian package ca-certificates): %w", err)
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:%s:/sbin/nologin\n", nonRootID, nonRootID, imageHome)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", nonRootID)
	return []ociimage.File{
		{Path: "etc", Mode: 0o755, Dir: true},
		{Path: "etc/passwd", Mode: 0o644, Data: []byte(passwd)},
		{Path: "etc/group", Mode: 0o644, Data: []byte(group)},
		{Path: "etc/ssl", Mode: 0o755, Dir: true},
		{Path: "etc/ssl/certs", Mode: 0o755, Dir: true},
		{Path: imageCAFile[1:], Mode: 0o644, Data: ca},
		{Path: "home", Mode: 0o755, Dir: true},
		{Path: imageHome[1:], Mode: 0o700, UID: nonRootID, GID: nonRootID, Dir: true},
		{Path: "tmp", Mode: 0o1777, Dir: true},
	}, nil
}

// appFiles are the binaries and the SBOM.
func appFiles(bins map[string][]byte, sbom []byte) []ociimage.File {
	files := []ociimage.File{
		{Path: "usr", Mode: 0o755, Dir: true},
		{Path: "usr/local", Mode: 0o755, Dir: true},
		{Path: imageBinDir[1:], Mode: 0o755, Dir: true},
	}
	for _, bin := range binaries {
		files = append(files, ociimage.File{Path: path.Join(imageBinDir[1:], bin), Mode: 0o755, Data: bins[bin]})
	}
	for _, dir := range []string{"usr/share", "usr/share/doc", path.Dir(imageSBOM[1:])} {
		files = append(files, ociimage.File{Path: dir, Mode: 0o755, Dir: true})
	}
	return append(files, ociimage.File{Path: imageSBOM[1:], Mode: 0o644, Data: sbom})
}
