package cdi

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

// LoadBuild reads the images list of hack/build-cdi-images.sh's folder
// dir; crdDir, when not empty, overrides the folder's crds link.
func LoadBuild(dir, crdDir string) (*Build, error) {
	f, err := os.Open(filepath.Join(dir, "images"))
	if err != nil {
		return nil, fmt.Errorf("reading the CDI images list (run hack/build-cdi-images.sh): %w", err)
	}
	defer f.Close()
	b := &Build{Dir: dir, ResourcesDir: filepath.Join(dir, "resources"), CRDDir: filepath.Join(dir, "crds")}
	if crdDir != "" {
		b.CRDDir = crdDir
	}
	refs := map[string]*string{
		"controller": &b.Images.Controller, "apiserver": &b.Images.APIServer, "uploadproxy": &b.Images.UploadProxy,
		"importer": &b.Images.Importer, "cloner": &b.Images.Cloner, "uploadserver": &b.Images.UploadServer,
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 {
			continue
		}
		ref, ok := refs[fields[0]]
		if !ok {
			return nil, fmt.Errorf("the CDI images list names an unknown image %q", fields[0])
		}
		*ref = fields[1]
		b.Tarballs = append(b.Tarballs, filepath.Join(dir, fields[2]))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the CDI images list: %w", err)
	}
	for name, ref := range refs {
		if *ref == "" {
			return nil, fmt.Errorf("the CDI images list in %s has no %s image", dir, name)
		}
	}
	return b, nil
}
