package kubevirt

import (
	"fmt"

	"platform.example/vm-migration/test/framework"
)

// EnvDir names the folder hack/build-kubevirt.sh prints: the binaries,
// crds/, install/, tarballs/ and the images list.
const EnvDir = "KUBEVIRT_DIR"

// Build is what hack/build-kubevirt.sh left in its folder.
type Build struct {
	// Dir is the folder.
	Dir string
	// Version is the KubeVirt version built (the images' tag).
	Version string
	// Images are the images' references by component (virt-api,
	// virt-controller).
	Images map[string]string
	// Tarballs are the images' docker-archive tarballs, for the node's
	// containerd to import.
	Tarballs []string
}

// components are the images a build must hold.
var components = []string{"virt-api", "virt-controller"}

// LoadBuild reads the images list of hack/build-kubevirt.sh's folder dir.
func LoadBuild(dir string) (*Build, error) {
	l, err := framework.ReadImageList(dir, "KubeVirt", "hack/build-kubevirt.sh", false, components...)
	if err != nil {
		return nil, err
	}
	b := &Build{Dir: dir, Images: l.Refs, Tarballs: l.Tarballs}
	for _, ref := range l.Refs {
		if tag := framework.Tag(ref); tag != "" {
			b.Version = tag
		}
	}
	if b.Version == "" {
		return nil, fmt.Errorf("the KubeVirt images list in %s names no tagged image", dir)
	}
	return b, nil
}

// EnvNodeDir names the folder hack/build-kubevirt-node.sh prints: the
// images of virt-handler and virt-launcher, and node/, virt-handler's
// DaemonSet.
const EnvNodeDir = "KUBEVIRT_NODE_DIR"

// NodeBuild is what hack/build-kubevirt-node.sh left in its folder:
// KubeVirt's node side.
type NodeBuild struct {
	// Dir is the folder.
	Dir string
	// Images are the images' references by component (virt-handler,
	// virt-launcher).
	Images map[string]string
	// Tarballs are the images' docker-archive tarballs, for the node's
	// containerd to import.
	Tarballs []string
}

// nodeComponents are the images a node build must hold.
var nodeComponents = []string{"virt-handler", "virt-launcher"}

// LoadNodeBuild reads the images list of hack/build-kubevirt-node.sh's
// folder dir.
func LoadNodeBuild(dir string) (*NodeBuild, error) {
	l, err := framework.ReadImageList(dir, "KubeVirt node", "hack/build-kubevirt-node.sh", true, nodeComponents...)
	if err != nil {
		return nil, err
	}
	return &NodeBuild{Dir: dir, Images: l.Refs, Tarballs: l.Tarballs}, nil
}
