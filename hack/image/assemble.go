package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"platform.example/vm-migration/hack/image/ociimage"
)

// Labels of the image besides the OCI ones.
const (
	// LabelCommands lists the image's commands, entrypoint first.
	LabelCommands = "platform.example/commands"
	// LabelSBOM is the path of the SPDX SBOM inside the image.
	LabelSBOM = "platform.example/sbom"
)

// assemble builds the image from an empty base: two layers (base files,
// then the application) and the config.
func assemble(o Options, arch string, base, app []ociimage.File) (v1.Image, error) {
	return ociimage.Assemble([][]ociimage.File{base, app}, o.Created, arch, v1.Config{
		User:       nonRootUser,
		Entrypoint: []string{controllerEP},
		WorkingDir: imageHome,
		Env:        []string{"PATH=" + imageBinDir, "SSL_CERT_FILE=" + imageCAFile, "HOME=" + imageHome},
		Labels:     labels(o),
	})
}

func labels(o Options) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":       "vm-migration-controller",
		"org.opencontainers.image.description": "Migrates VMware vSphere VMs into KubeVirt; carries the controller (entrypoint) and vm-transfer (the transfer Jobs' command)",
		"org.opencontainers.image.version":     o.Version,
		"org.opencontainers.image.created":     o.Created.Format("2006-01-02T15:04:05Z"),
		LabelCommands:                          controllerEP + "," + imageBinDir + "/vm-transfer",
		LabelSBOM:                              imageSBOM,
	}
	if o.Revision != "" {
		l["org.opencontainers.image.revision"] = o.Revision
	}
	return l
}

// write writes, into outDir, the OCI layout (replacing an older one), the
// tarball (named tarName) and the SBOM beside them.
func write(outDir, tarName string, tag name.Tag, img v1.Image, sbom []byte) (*Result, error) {
	res := &Result{
		LayoutPath:  filepath.Join(outDir, "oci"),
		TarballPath: filepath.Join(outDir, tarName),
		SBOMPath:    filepath.Join(outDir, "sbom.spdx.json"),
	}
	digest, err := img.Digest()
	if err != nil {
		return nil, fmt.Errorf("hashing the image: %w", err)
	}
	res.Digest = digest.String()
	if err := os.RemoveAll(res.LayoutPath); err != nil {
		return nil, fmt.Errorf("removing the old layout: %w", err)
	}
	p, err := layout.Write(res.LayoutPath, empty.Index)
	if err != nil {
		return nil, fmt.Errorf("writing the OCI layout: %w", err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": tag.String()})); err != nil {
		return nil, fmt.Errorf("writing the image into the OCI layout: %w", err)
	}
	if err := tarball.WriteToFile(res.TarballPath, tag, img); err != nil {
		return nil, fmt.Errorf("writing the tarball: %w", err)
	}
	if err := os.WriteFile(res.SBOMPath, sbom, 0o644); err != nil {
		return nil, fmt.Errorf("writing the SBOM: %w", err)
	}
	return res, nil
}
