package transfer

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"platform.example/vm-migration/pkg/blocktree"
	"platform.example/vm-migration/pkg/transfer/wire"
)

// hashParallel is how many images the hash command reads at once (each
// hashes its blocks on every core the process may use).
const hashParallel = 2

// openImageToRead opens an image to read: a regular file or a block
// device. The regular file is read ahead (it is read once, start to end)
// and says where its holes are.
func openImageToRead(path string) (*destination, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, 0, err
	}
	d := &destination{path: path, f: f, block: st.Mode()&os.ModeDevice != 0 && st.Mode()&os.ModeCharDevice == 0}
	if !d.block && !st.Mode().IsRegular() {
		_ = f.Close()
		return nil, 0, fmt.Errorf("%s is neither a regular file nor a block device", path)
	}
	size, err := d.size()
	if err != nil {
		_ = f.Close()
		return nil, 0, fmt.Errorf("sizing %s: %w", path, err)
	}
	if !d.block {
		_ = unix.Fadvise(int(f.Fd()), 0, size, unix.FADV_SEQUENTIAL)
	}
	return d, size, nil
}

// HashImage returns the root of the block tree of the first n bytes of
// the image at path (a regular file, whose holes are not read, or a block
// device), its blocks hashed on every core the process may use, and the
// image's size. An image shorter than n is an error.
func HashImage(ctx context.Context, path string, n int64) (string, int64, error) {
	img, err := hashImage(ctx, hashSpec{name: path, path: path, bytes: n})
	return img.SHA256, img.Size, err
}

// hashImage hashes one image of the hash command: the root of its first
// bytes' tree and, when a tree file is given, the stored tree's root and
// the first block in which they differ (the tree file is read as the
// image's leaves come, never whole). The error is the image's failure,
// also in the result's Error.
func hashImage(ctx context.Context, s hashSpec) (wire.ImageHash, error) {
	img := wire.ImageHash{Name: s.name, Bytes: s.bytes}
	fail := func(err error) (wire.ImageHash, error) {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		img.SHA256, img.StoredRoot, img.FirstDifference = "", "", nil
		img.Error = oneLine(err.Error())
		return img, err
	}
	d, size, err := openImageToRead(s.path)
	if err != nil {
		return fail(err)
	}
	defer d.close()
	img.Size = size
	if size < s.bytes {
		return fail(fmt.Errorf("%s is %d bytes, shorter than the %d to hash", s.path, size, s.bytes))
	}
	var cmp *treeCompare
	if s.tree != "" {
		cmp = openTreeCompare(s.tree, s.bytes)
	}
	root := blocktree.NewRootHasher()
	_, err = blocktree.Walk(ctx, d, s.bytes, blocktree.Options{}, func(i int64, l blocktree.Leaf) error {
		root.Add(l)
		if cmp != nil {
			cmp.leaf(i, l)
		}
		return nil
	})
	if err != nil {
		if cmp != nil {
			cmp.close()
		}
		return fail(err)
	}
	img.SHA256 = root.Sum()
	if cmp != nil {
		cmp.finish(root.Count())
		img.StoredRoot, img.FirstDifference = cmp.root, cmp.diff
		if cmp.err != nil {
			img.StoredRoot, img.FirstDifference, img.TreeError = "", nil, oneLine(cmp.err.Error())
		}
	}
	return img, nil
}

// treeCompare reads a stored tree file along with the leaves of the
// image being hashed, and finds the first block where they differ.
type treeCompare struct {
	f    *os.File
	r    *blocktree.Reader
	size int64
	root string
	diff *wire.ByteRange
	err  error
}

// openTreeCompare opens a stored tree file to compare with the tree of
// an image's first size bytes; a file that cannot be read is recorded as
// its error.
func openTreeCompare(path string, size int64) *treeCompare {
	c := &treeCompare{size: size}
	if c.f, c.err = os.Open(path); c.err != nil {
		return c
	}
	if c.r, c.err = blocktree.NewReader(c.f); c.err == nil {
		c.root = c.r.Root()
	}
	return c
}

// leaf compares the image's leaf i with the stored one.
func (c *treeCompare) leaf(i int64, l blocktree.Leaf) {
	if c.err != nil {
		return
	}
	var stored blocktree.Leaf
	have := i < c.r.Leaves()
	if have {
		if stored, c.err = c.r.Next(); c.err != nil {
			return
		}
	}
	c.differAt(i, !have || stored != l)
}

// differAt records block i as the first difference when it differs:
// its leaves do, or its lengths.
func (c *treeCompare) differAt(i int64, leavesDiffer bool) {
	mine, theirs := blocktree.BlockLen(i, c.size), blocktree.BlockLen(i, c.r.Size())
	if c.diff == nil && (leavesDiffer || mine != theirs) {
		c.diff = &wire.ByteRange{Offset: i * blocktree.BlockSize, Length: max(mine, theirs)}
	}
}

// finish reads the stored leaves past the image's n (they differ) and
// checks the end of the file, then closes it.
func (c *treeCompare) finish(n int64) {
	defer c.close()
	for i := n; c.err == nil && i < c.r.Leaves(); i++ {
		if _, c.err = c.r.Next(); c.err == nil {
			c.differAt(i, true)
		}
	}
	if c.err == nil {
		if _, err := c.r.Next(); !errors.Is(err, io.EOF) {
			c.err = err
		}
	}
}

// close closes the tree file.
func (c *treeCompare) close() {
	if c.f != nil {
		_ = c.f.Close()
	}
}

// hashSpec is one image the hash command reads: NAME=PATH:BYTES, and
// the tree file given for NAME by --tree NAME=TREEFILE.
type hashSpec struct {
	name, path string
	bytes      int64
	tree       string
}

func parseHashSpec(arg string) (hashSpec, error) {
	name, rest, ok := strings.Cut(arg, "=")
	i := strings.LastIndexByte(rest, ':')
	if !ok || name == "" || i <= 0 {
		return hashSpec{}, fmt.Errorf("%q is not NAME=PATH:BYTES", arg)
	}
	n, err := strconv.ParseInt(rest[i+1:], 10, 64)
	if err != nil || n <= 0 {
		return hashSpec{}, fmt.Errorf("%q: BYTES must be a positive number", arg)
	}
	return hashSpec{name: name, path: rest[:i], bytes: n}, nil
}

// parseTreeFlag parses --tree NAME=TREEFILE.
func parseTreeFlag(arg string) (name, path string, err error) {
	name, path, ok := strings.Cut(arg, "=")
	if !ok || name == "" || path == "" {
		return "", "", fmt.Errorf("--tree %q is not NAME=TREEFILE", arg)
	}
	return name, path, nil
}

// HashMain runs "vm-transfer hash [--termination-log FILE] [--tree
// NAME=TREEFILE]... NAME=PATH:BYTES...": the root of the block tree of the
// first BYTES bytes of each image, two at a time, and for an image given
// a tree file the stored tree's root and the first byte range in which
// they differ, as one JSON document (wire.HashResult) on stdout and in
// the termination log. It exits 0 when every image was hashed (a tree
// file that differs or does not read is in the result, not a failure), 1
// when one could not be (the result says which and why), 2 on a wrong
// command line.
func HashMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("vm-transfer hash", flag.ContinueOnError)
	fs.SetOutput(stderr)
	termLog := fs.String("termination-log", DefaultTerminationLog, "file the result is written to (the container's termination message)")
	trees := map[string]string{}
	fs.Func("tree", "NAME=TREEFILE: compare image NAME with this tree file (repeatable)", func(v string) error {
		name, path, err := parseTreeFlag(v)
		if err != nil {
			return err
		}
		if _, dup := trees[name]; dup {
			return fmt.Errorf("--tree names image %q twice", name)
		}
		trees[name] = path
		return nil
	})
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitUsage
	}
	var specs []hashSpec
	for _, a := range fs.Args() {
		s, err := parseHashSpec(a)
		if err != nil {
			fmt.Fprintf(stderr, "vm-transfer hash: %v\n", err)
			return ExitUsage
		}
		specs = append(specs, s)
	}
	if len(specs) == 0 || len(specs) > wire.MaxHashImages {
		fmt.Fprintf(stderr, "vm-transfer hash: give 1 to %d images as NAME=PATH:BYTES\n", wire.MaxHashImages)
		return ExitUsage
	}
	for name, path := range trees {
		i := slices.IndexFunc(specs, func(s hashSpec) bool { return s.name == name })
		if i < 0 {
			fmt.Fprintf(stderr, "vm-transfer hash: --tree names image %q, which is not given\n", name)
			return ExitUsage
		}
		specs[i].tree = path
	}
	res := hashAll(ctx, specs, stderr)
	code := ExitOK
	for _, img := range res.Images {
		if img.SHA256 == "" {
			code = ExitFailed
		}
	}
	_ = writeJSONLine(stdout, res)
	if err := os.WriteFile(*termLog, wire.HashTerminationMessage(res), 0o644); err != nil &&
		(*termLog != DefaultTerminationLog || !errors.Is(err, os.ErrNotExist)) {
		fmt.Fprintf(stderr, "vm-transfer hash: writing the termination log: %v\n", err)
	}
	return code
}

// hashAll hashes the images, hashParallel at a time, in order.
func hashAll(ctx context.Context, specs []hashSpec, stderr io.Writer) *wire.HashResult {
	res := &wire.HashResult{Kind: wire.KindHash, Scheme: blocktree.Scheme, Images: make([]wire.ImageHash, len(specs))}
	slots := make(chan struct{}, hashParallel)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i, s := range specs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			img, _ := hashImage(ctx, s)
			mu.Lock()
			defer mu.Unlock()
			res.Images[i] = img
			fmt.Fprintf(stderr, "vm-transfer hash: %s: %s\n", s.name, orText(img.SHA256, img.Error))
		}()
	}
	wg.Wait()
	return res
}

func orText(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
