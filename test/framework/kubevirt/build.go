package kubevirt

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
	f, err := os.Open(filepath.Join(dir, "images"))
	if err != nil {
		return nil, fmt.Errorf("reading the KubeVirt images list (run hack/build-kubevirt.sh): %w", err)
	}
	defer f.Close()
	b := &Build{Dir: dir, Images: map[string]string{}}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 {
			continue
		}
		b.Images[fields[0]] = fields[1]
		b.Tarballs = append(b.Tarballs, filepath.Join(dir, fields[2]))
		if _, tag, ok := strings.Cut(fields[1][strings.LastIndex(fields[1], "/")+1:], ":"); ok {
			b.Version = tag
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the KubeVirt images list: %w", err)
	}
	for _, c := range components {
		if b.Images[c] == "" {
			return nil, fmt.Errorf("the KubeVirt images list in %s has no %s image", dir, c)
		}
	}
	if b.Version == "" {
		return nil, fmt.Errorf("the KubeVirt images list in %s names no tagged image", dir)
	}
	return b, nil
}
