package localpath

import (
	"fmt"

	"platform.example/vm-migration/test/framework"
)

// EnvDir names the folder hack/build-local-path.sh prints: the binary, the
// two image tarballs and the images list.
const EnvDir = "LOCAL_PATH_DIR"

// Build is what hack/build-local-path.sh left in its folder.
type Build struct {
	// Dir is the folder.
	Dir string
	// Version is the provisioner's version (its images' tag).
	Version string
	// Provisioner and Helper are the images' references.
	Provisioner, Helper string
	// Tarballs are the images' docker-archive tarballs, for the node's
	// containerd to import.
	Tarballs []string
}

// LoadBuild reads the images list of hack/build-local-path.sh's folder dir.
func LoadBuild(dir string) (*Build, error) {
	l, err := framework.ReadImageList(dir, "local-path-provisioner", "hack/build-local-path.sh", true, "provisioner", "helper")
	if err != nil {
		return nil, err
	}
	b := &Build{Dir: dir, Provisioner: l.Refs["provisioner"], Helper: l.Refs["helper"], Tarballs: l.Tarballs, Version: framework.Tag(l.Refs["provisioner"])}
	if b.Version == "" {
		return nil, fmt.Errorf("the local-path-provisioner images list in %s names an untagged provisioner image", dir)
	}
	return b, nil
}
