package transfer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"platform.example/vm-migration/pkg/blocktree"
	"platform.example/vm-migration/pkg/transfer/wire"
)

// TreeSuffix names a file image's block tree beside it: disk.img.tree.
const TreeSuffix = ".tree"

// treePath is where a disk's tree file goes once its image is complete:
// where the spec says, else beside a file image; a block device has none
// unless the spec names one.
func treePath(d wire.DiskSpec, block bool) string {
	switch {
	case d.TreeFile != "":
		return d.TreeFile
	case block:
		return ""
	}
	return d.Destination + TreeSuffix
}

// partialTreePath is where a tree file is built before it is complete:
// ".disk.img.tree.partial" beside "disk.img.tree".
func partialTreePath(tree string) string {
	return filepath.Join(filepath.Dir(tree), "."+filepath.Base(tree)+".partial")
}

// NextData says where the image's next data is (blocktree.DataMapper): a
// file's holes are found with SEEK_DATA and SEEK_HOLE; a device, or a
// file system that cannot tell, is all data.
func (d *destination) NextData(off, end int64) (int64, int64, error) {
	data, hole := d.dataAfter(off, end)
	return data, hole, nil
}

// ReadAt reads the image (io.ReaderAt, for blocktree).
func (d *destination) ReadAt(p []byte, off int64) (int, error) { return d.f.ReadAt(p, off) }

// leafFile is a tree file being built: a header whose root is a
// placeholder until the end, then the leaves, each written where it goes
// as the hasher makes it. Once every leaf is in, finish writes the real
// header, syncs the file and renames it to the tree's path.
type leafFile struct {
	path, partial string
	size          int64
	f             *os.File
	// synced is how many leaves were synced (fdatasync): a checkpoint may
	// name those.
	synced int64
}

// placeholderRoot stands for the root in the header until it is known.
var placeholderRoot = strings.Repeat("0", 64)

// createLeafFile starts the tree file of size bytes for path, anew.
func createLeafFile(path string, size int64) (*leafFile, error) {
	lf := &leafFile{path: path, partial: partialTreePath(path), size: size}
	f, err := os.OpenFile(lf.partial, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%w: creating the tree file: %v", ErrDestination, err)
	}
	lf.f = f
	if _, err := f.WriteAt(blocktree.Header(size, placeholderRoot), 0); err != nil {
		_ = lf.close()
		return nil, fmt.Errorf("%w: writing the tree file %s: %v", ErrDestination, lf.partial, err)
	}
	return lf, nil
}

// openLeafFile reopens the partial tree file of a resumed copy and checks
// that its first leaves are the checkpoint's: they give its root's state
// (the checkpoint's tree state names them).
func openLeafFile(path string, size int64, st blocktree.BuilderState) (*leafFile, string) {
	lf := &leafFile{path: path, partial: partialTreePath(path), size: size}
	f, err := os.OpenFile(lf.partial, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Sprintf("the partial tree file: %v", err)
	}
	lf.f = f
	want := blocktree.NewRootHasher()
	if err := want.UnmarshalBinary(st.Root); err != nil {
		_ = lf.close()
		return nil, err.Error()
	}
	got := blocktree.NewRootHasher()
	r := bufio.NewReaderSize(io.NewSectionReader(f, blocktree.HeaderLen(size), st.Leaves*32), 64<<10)
	var l blocktree.Leaf
	for range st.Leaves {
		if _, err := io.ReadFull(r, l[:]); err != nil {
			_ = lf.close()
			return nil, fmt.Sprintf("the partial tree file holds fewer than the checkpoint's %d leaves: %v", st.Leaves, err)
		}
		got.Add(l)
	}
	if got.Sum() != want.Sum() {
		_ = lf.close()
		return nil, fmt.Sprintf("the partial tree file's first %d leaves are not the checkpoint's", st.Leaves)
	}
	lf.synced = st.Leaves
	return lf, ""
}

// put writes leaf i where it goes.
func (lf *leafFile) put(i int64, l blocktree.Leaf) error {
	if _, err := lf.f.WriteAt(l[:], blocktree.HeaderLen(lf.size)+32*i); err != nil {
		return fmt.Errorf("writing the tree file %s: %w", lf.partial, err)
	}
	return nil
}

// sync makes the first n leaves durable, before a checkpoint names them.
func (lf *leafFile) sync(n int64) error {
	if n <= lf.synced {
		return nil
	}
	if err := unix.Fdatasync(int(lf.f.Fd())); err != nil {
		return fmt.Errorf("syncing the tree file %s: %w", lf.partial, err)
	}
	lf.synced = n
	return nil
}

// finish writes the header with the root, syncs the file and renames it
// to the tree's path, then syncs the directory.
func (lf *leafFile) finish(root string) error {
	err := func() error {
		if _, err := lf.f.WriteAt(blocktree.Header(lf.size, root), 0); err != nil {
			return err
		}
		if err := lf.f.Truncate(blocktree.FileLen(lf.size)); err != nil {
			return err
		}
		if err := lf.f.Sync(); err != nil {
			return err
		}
		if err := lf.close(); err != nil {
			return err
		}
		if err := os.Rename(lf.partial, lf.path); err != nil {
			return err
		}
		return syncDir(filepath.Dir(lf.path))
	}()
	if err != nil {
		_ = lf.close()
		return fmt.Errorf("%w: writing the tree file %s: %v", ErrDestination, lf.path, err)
	}
	return nil
}

// close closes the partial file (again is fine).
func (lf *leafFile) close() error {
	if lf.f == nil {
		return nil
	}
	err := lf.f.Close()
	lf.f = nil
	return err
}

// discard closes and removes the partial file.
func (lf *leafFile) discard() {
	_ = lf.close()
	_ = os.Remove(lf.partial)
}

// syncDir syncs a directory, so that a rename in it is durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// imageTree computes the tree of the image's first size bytes, its blocks
// hashed in parallel, its holes unread, and, when tree is not empty,
// writes the tree file there (atomically, synced) if its root is want
// (any root when want is ""). It returns the root.
func imageTree(ctx context.Context, dst *destination, size int64, tree, want string) (string, error) {
	var lf *leafFile
	if tree != "" {
		var err error
		if lf, err = createLeafFile(tree, size); err != nil {
			return "", err
		}
		defer lf.discard()
	}
	root := blocktree.NewRootHasher()
	_, err := blocktree.Walk(ctx, dst, size, blocktree.Options{}, func(i int64, l blocktree.Leaf) error {
		root.Add(l)
		if lf != nil {
			return lf.put(i, l)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	sum := root.Sum()
	if want != "" && sum != want {
		return sum, errRootDiffers
	}
	if lf != nil {
		if err := lf.finish(sum); err != nil {
			return sum, err
		}
	}
	return sum, nil
}

// errRootDiffers says an image's tree is not the one recorded.
var errRootDiffers = errors.New("the image's tree root is not the recorded one")
