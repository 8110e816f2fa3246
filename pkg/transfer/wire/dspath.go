package wire

import (
	"fmt"
	"path"
	"strings"
)

// SectorSize is the unit of VMDK extent sizes.
const SectorSize = 512

// DatastorePath is a file on a datastore, "[datastore] dir/file.vmdk".
type DatastorePath struct {
	// Datastore is the datastore's name.
	Datastore string
	// Path is the file's path inside the datastore, without a leading slash.
	Path string
}

// ParseDatastorePath parses "[datastore] dir/file". It refuses an empty
// datastore or path and any ".." element, so the path cannot leave the
// datastore's folder.
func ParseDatastorePath(s string) (DatastorePath, error) {
	rest, ok := strings.CutPrefix(s, "[")
	if !ok {
		return DatastorePath{}, fmt.Errorf("datastore path %q does not start with [datastore]", s)
	}
	ds, p, ok := strings.Cut(rest, "]")
	if !ok || ds == "" {
		return DatastorePath{}, fmt.Errorf("datastore path %q has no datastore name", s)
	}
	p = strings.TrimLeft(strings.TrimSpace(p), "/")
	if p == "" {
		return DatastorePath{}, fmt.Errorf("datastore path %q has no file", s)
	}
	for _, elem := range strings.Split(p, "/") {
		if elem == ".." {
			return DatastorePath{}, fmt.Errorf("datastore path %q leaves its datastore", s)
		}
	}
	return DatastorePath{Datastore: ds, Path: p}, nil
}

// String formats the path as vSphere does.
func (p DatastorePath) String() string {
	return fmt.Sprintf("[%s] %s", p.Datastore, p.Path)
}

// Sibling is the path of a file in the same directory, as a descriptor's
// extent names it (a bare file name, relative to the descriptor).
func (p DatastorePath) Sibling(name string) (DatastorePath, error) {
	if name == "" || strings.HasPrefix(name, "/") || strings.Contains(name, "..") {
		return DatastorePath{}, fmt.Errorf("extent file %q is not a file next to the descriptor", name)
	}
	return DatastorePath{Datastore: p.Datastore, Path: path.Join(path.Dir(p.Path), name)}, nil
}
