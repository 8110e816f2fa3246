// Package ociimage assembles OCI images from files without a container
// engine, with go-containerregistry: uncompressed tar layers of files with
// fixed owners, modes and times (so a build is reproducible), on an empty
// base, with OCI media types. hack/image builds the controller's image with
// it, and test/framework the test node's sandbox and test images.
package ociimage

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// File is one entry of a layer: a regular file holding Data, a folder, or
// a symbolic link to Link.
type File struct {
	// Path inside the image, without a leading slash.
	Path     string
	Mode     int64
	UID, GID int
	Data     []byte
	Dir      bool
	// Link, when set, makes the entry a symbolic link to it.
	Link string
}

// Assemble builds an image from an empty base: one layer per element of
// layers, in order, then the config, with created as the image's time and
// every file's.
func Assemble(layers [][]File, created time.Time, arch string, config v1.Config) (v1.Image, error) {
	var built []v1.Layer
	for _, files := range layers {
		l, err := Layer(files, created)
		if err != nil {
			return nil, err
		}
		built = append(built, l)
	}
	return AssembleLayers(built, created, arch, config)
}

// AssembleLayers builds an image from an empty base, with OCI media types:
// layers in order (built by Layer, or read from a prepared tarball), then
// the config, with created as the image's time.
func AssembleLayers(layers []v1.Layer, created time.Time, arch string, config v1.Config) (v1.Image, error) {
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.AppendLayers(img, layers...)
	if err != nil {
		return nil, fmt.Errorf("adding the layers: %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("reading the image config: %w", err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", arch
	cfg.Created = v1.Time{Time: created}
	cfg.Config = config
	return mutate.ConfigFile(img, cfg)
}

// Layer turns files into an uncompressed tar, then an OCI layer.
func Layer(files []File, mtime time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.Path, Mode: f.Mode, Uid: f.UID, Gid: f.GID, ModTime: mtime, Format: tar.FormatPAX}
		switch {
		case f.Dir:
			h.Typeflag, h.Name = tar.TypeDir, f.Path+"/"
		case f.Link != "":
			h.Typeflag, h.Linkname = tar.TypeSymlink, f.Link
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.Data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("writing %s into a layer: %w", f.Path, err)
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, fmt.Errorf("writing %s into a layer: %w", f.Path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("closing a layer: %w", err)
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer))
}

// StaticLinuxArch returns the Go architecture of a static Linux ELF
// executable, or says why the file cannot run in an image without a libc.
func StaticLinuxArch(p string) (string, error) {
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
