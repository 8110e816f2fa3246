package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
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

// file is one entry of a layer.
type file struct {
	path     string
	mode     int64
	uid, gid int
	data     []byte
	dir      bool
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
		a, err := staticLinuxArch(p)
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

// staticLinuxArch returns the Go architecture of a static Linux ELF
// executable, or says why the file cannot run in the image.
func staticLinuxArch(p string) (string, error) {
	f, err := elf.Open(p)
	if err != nil {
		return "", fmt.Errorf("%s is not a Linux executable: %w", p, err)
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return "", fmt.Errorf("%s is dynamically linked and the image has no libc: build it with CGO_ENABLED=0", p)
		}
	}
	switch f.Machine {
	case elf.EM_X86_64:
		return "amd64", nil
	case elf.EM_AARCH64:
		return "arm64", nil
	case elf.EM_PPC64:
		return "ppc64le", nil
	case elf.EM_S390:
		return "s390x", nil
	}
	return "", fmt.Errorf("%s is built for an unsupported machine %v", p, f.Machine)
}

// baseFiles are what an empty base lacks: a passwd and group entry for the
// non-root user, a home, /tmp, and the CA certificates.
func baseFiles(caFile string) ([]file, error) {
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("reading the CA certificates (Debian package ca-certificates): %w", err)
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:%s:/sbin/nologin\n", nonRootID, nonRootID, imageHome)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", nonRootID)
	return []file{
		{path: "etc", mode: 0o755, dir: true},
		{path: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{path: "etc/group", mode: 0o644, data: []byte(group)},
		{path: "etc/ssl", mode: 0o755, dir: true},
		{path: "etc/ssl/certs", mode: 0o755, dir: true},
		{path: imageCAFile[1:], mode: 0o644, data: ca},
		{path: "home", mode: 0o755, dir: true},
		{path: imageHome[1:], mode: 0o700, uid: nonRootID, gid: nonRootID, dir: true},
		{path: "tmp", mode: 0o1777, dir: true},
	}, nil
}

// appFiles are the binaries and the SBOM.
func appFiles(bins map[string][]byte, sbom []byte) []file {
	files := []file{
		{path: "usr", mode: 0o755, dir: true},
		{path: "usr/local", mode: 0o755, dir: true},
		{path: imageBinDir[1:], mode: 0o755, dir: true},
	}
	for _, bin := range binaries {
		files = append(files, file{path: path.Join(imageBinDir[1:], bin), mode: 0o755, data: bins[bin]})
	}
	for _, dir := range []string{"usr/share", "usr/share/doc", path.Dir(imageSBOM[1:])} {
		files = append(files, file{path: dir, mode: 0o755, dir: true})
	}
	return append(files, file{path: imageSBOM[1:], mode: 0o644, data: sbom})
}

// layer turns files into an uncompressed tar, then an OCI layer.
func layer(files []file, mtime time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.path, Mode: f.mode, Uid: f.uid, Gid: f.gid, ModTime: mtime, Format: tar.FormatPAX}
		if f.dir {
			h.Typeflag, h.Name = tar.TypeDir, f.path+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("writing %s into a layer: %w", f.path, err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, fmt.Errorf("writing %s into a layer: %w", f.path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("closing a layer: %w", err)
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer))
}
