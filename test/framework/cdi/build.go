package cdi

import (
	"maps"
	"path/filepath"
	"slices"

	"platform.example/vm-migration/test/framework"
)

// Env vars the test suites and the Makefile use to point at the builds.
const (
	// EnvCDIDir names the folder hack/build-cdi.sh printed (binaries,
	// crds/).
	EnvCDIDir = "CDI_DIR"
	// EnvImagesDir names the folder hack/build-cdi-images.sh printed
	// (image tarballs, resources/, the images list).
	EnvImagesDir = "CDI_IMAGES_DIR"
)

// Images are the references of CDI's images on the node.
type Images struct {
	Controller   string
	APIServer    string
	UploadProxy  string
	Importer     string
	Cloner       string
	UploadServer string
}

// Build is what hack/build-cdi-images.sh left in its folder.
type Build struct {
	// Dir is the folder.
	Dir string
	// Images are the images' references.
	Images Images
	// Tarballs are the images' docker-archive tarballs, for the node's
	// containerd to import.
	Tarballs []string
	// ResourcesDir holds the YAML of CDI's operator generators.
	ResourcesDir string
	// CRDDir holds CDI's CustomResourceDefinitions.
	CRDDir string
}

// imageNames are the names of CDI's images in the list, and where each
// reference goes.
func (b *Build) imageNames() map[string]*string {
	return map[string]*string{
		"controller": &b.Images.Controller, "apiserver": &b.Images.APIServer, "uploadproxy": &b.Images.UploadProxy,
		"importer": &b.Images.Importer, "cloner": &b.Images.Cloner, "uploadserver": &b.Images.UploadServer,
	}
}

// LoadBuild reads the images list of hack/build-cdi-images.sh's folder
// dir; crdDir, when not empty, overrides the folder's crds link.
func LoadBuild(dir, crdDir string) (*Build, error) {
	b := &Build{Dir: dir, ResourcesDir: filepath.Join(dir, "resources"), CRDDir: filepath.Join(dir, "crds")}
	if crdDir != "" {
		b.CRDDir = crdDir
	}
	refs := b.imageNames()
	l, err := framework.ReadImageList(dir, "CDI", "hack/build-cdi-images.sh", true, slices.Sorted(maps.Keys(refs))...)
	if err != nil {
		return nil, err
	}
	for name, ref := range refs {
		*ref = l.Refs[name]
	}
	b.Tarballs = l.Tarballs
	return b, nil
}
