package framework

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ImageList is the `images` file an upstream component's build script
// leaves in its folder (hack/build-cdi-images.sh, hack/build-kubevirt.sh,
// hack/build-local-path.sh): one line per image, its name, its reference
// and its docker-archive tarball, relative to the folder.
type ImageList struct {
	// Refs are the images' references by name.
	Refs map[string]string
	// Tarballs are the images' tarballs, for the node's containerd to
	// import, in the file's order.
	Tarballs []string
}

// ReadImageList reads the images file of dir, built by script for
// component, and fails unless it names every one of required (an unknown
// name is an error too when known is true: the list and its reader are
// then out of step).
func ReadImageList(dir, component, script string, known bool, required ...string) (*ImageList, error) {
	f, err := os.Open(filepath.Join(dir, "images"))
	if err != nil {
		return nil, fmt.Errorf("reading the %s images list (run %s): %w", component, script, err)
	}
	defer f.Close()
	l := &ImageList{Refs: map[string]string{}}
	want := map[string]bool{}
	for _, r := range required {
		want[r] = true
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 {
			continue
		}
		if known && !want[fields[0]] {
			return nil, fmt.Errorf("the %s images list names an unknown image %q", component, fields[0])
		}
		l.Refs[fields[0]] = fields[1]
		l.Tarballs = append(l.Tarballs, filepath.Join(dir, fields[2]))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the %s images list: %w", component, err)
	}
	for _, r := range required {
		if l.Refs[r] == "" {
			return nil, fmt.Errorf("the %s images list in %s has no %s image", component, dir, r)
		}
	}
	return l, nil
}

// Tag is the tag of reference ref ("" when it has none).
func Tag(ref string) string {
	_, tag, _ := strings.Cut(ref[strings.LastIndex(ref, "/")+1:], ":")
	return tag
}
