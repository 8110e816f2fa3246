package transfer

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"platform.example/vm-migration/pkg/blocktree"
)

// maxQemuImgMap bounds the qemu-img map output tree-update reads: one
// entry per run of clusters is well under 200 bytes, so this is millions
// of runs.
const maxQemuImgMap = 512 << 20

// ChecksumResult is what "vm-transfer checksum --json" prints.
type ChecksumResult struct {
	// Kind is "checksum".
	Kind string `json:"kind"`
	// Path of the image.
	Path string `json:"path"`
	// Root of the block tree of the first Size bytes.
	Root string `json:"root"`
	// Size is how many bytes were hashed.
	Size int64 `json:"size"`
	// Scheme is blocktree.Scheme.
	Scheme string `json:"scheme"`
	// Leaves is how many blocks the tree has.
	Leaves int64 `json:"leaves"`
	// BlocksRead were read; BlocksUnread lay in holes (not read).
	BlocksRead   int64 `json:"blocksRead"`
	BlocksUnread int64 `json:"blocksUnread"`
	// Seconds it took.
	Seconds float64 `json:"seconds"`
}

// ChecksumMain runs "vm-transfer checksum [--json] [--tree-out FILE] PATH
// [SIZE]": the root of the block tree of the first SIZE bytes (the
// image's size by default) of a file or block device, its blocks hashed
// on every core the process may use, a file's holes unread. It prints
// "<root>  PATH" (or one JSON line, ChecksumResult) and, with --tree-out,
// writes the tree file (atomically, synced). It exits 0 on success, 1 on
// a failure (one line on stderr), 2 on a wrong command line.
func ChecksumMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("vm-transfer checksum", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print one JSON line: root, size, scheme, leaves, blocks read and unread, seconds")
	treeOut := fs.String("tree-out", "", "write the tree file (header line and leaves) to FILE")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: vm-transfer checksum [--json] [--tree-out FILE] PATH [SIZE]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitUsage
	}
	if fs.NArg() < 1 || fs.NArg() > 2 || fs.Arg(0) == "" {
		fmt.Fprintln(stderr, "vm-transfer checksum: give PATH and, optionally, SIZE (bytes)")
		return ExitUsage
	}
	size := int64(-1)
	if fs.NArg() == 2 {
		n, err := strconv.ParseInt(fs.Arg(1), 10, 64)
		if err != nil || n < 0 {
			fmt.Fprintf(stderr, "vm-transfer checksum: SIZE %q is not a number of bytes\n", fs.Arg(1))
			return ExitUsage
		}
		size = n
	}
	res, err := checksum(ctx, fs.Arg(0), size, *treeOut)
	if err != nil {
		fmt.Fprintf(stderr, "vm-transfer checksum: %s\n", oneLine(err.Error()))
		return ExitFailed
	}
	if *asJSON {
		err = writeJSONLine(stdout, res)
	} else {
		_, err = fmt.Fprintf(stdout, "%s  %s\n", res.Root, res.Path)
	}
	if err != nil {
		fmt.Fprintf(stderr, "vm-transfer checksum: writing the result: %v\n", err)
		return ExitFailed
	}
	return ExitOK
}

// checksum computes the tree of the first size bytes of the image at
// path (its size when size is negative), writing it to treeOut if given.
func checksum(ctx context.Context, path string, size int64, treeOut string) (*ChecksumResult, error) {
	start := time.Now()
	d, imageSize, err := openImageToRead(path)
	if err != nil {
		return nil, err
	}
	defer d.close()
	if size < 0 {
		size = imageSize
	}
	if size > imageSize {
		return nil, fmt.Errorf("%s is %d bytes, shorter than the %d to hash", path, imageSize, size)
	}
	var lf *leafFile
	if treeOut != "" {
		if lf, err = createLeafFile(treeOut, size); err != nil {
			return nil, err
		}
		defer lf.discard()
	}
	root := blocktree.NewRootHasher()
	st, err := blocktree.Walk(ctx, d, size, blocktree.Options{}, func(i int64, l blocktree.Leaf) error {
		root.Add(l)
		if lf != nil {
			return lf.put(i, l)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("hashing %s: %w", path, err)
	}
	if lf != nil {
		if err := lf.finish(root.Sum()); err != nil {
			return nil, err
		}
	}
	return &ChecksumResult{Kind: "checksum", Path: path, Root: root.Sum(), Size: size, Scheme: blocktree.Scheme, Leaves: root.Count(),
		BlocksRead: st.BlocksRead, BlocksUnread: st.BlocksUnread, Seconds: time.Since(start).Seconds()}, nil
}

// TreeUpdateResult is the line "vm-transfer tree-update" prints.
type TreeUpdateResult struct {
	// Kind is "treeUpdate".
	Kind string `json:"kind"`
	// Root of the updated tree.
	Root string `json:"root"`
	// BlocksRehashed overlap what the overlay held; BytesRehashed is
	// their length.
	BlocksRehashed int64 `json:"blocksRehashed"`
	BytesRehashed  int64 `json:"bytesRehashed"`
	// BytesRead from the image (the re-hashed blocks but their holes).
	BytesRead int64 `json:"bytesRead"`
	// Seconds it took.
	Seconds float64 `json:"seconds"`
}

// TreeUpdateMain runs "vm-transfer tree-update --image PATH --tree FILE
// --qemu-img-map FILE [--size N]": it reads the image's tree file,
// re-hashes the blocks that overlap what a qcow2 overlay held (the
// entries of depth 0 of its qemu-img map --output=json, taken before it
// was committed into the image), writes the tree back atomically and
// prints one JSON line (TreeUpdateResult). --size, when given, must be
// the tree's. It exits 0 on success, 1 on a failure (one line on stderr;
// the tree file is then as it was), 2 on a wrong command line.
func TreeUpdateMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("vm-transfer tree-update", flag.ContinueOnError)
	fs.SetOutput(stderr)
	image := fs.String("image", "", "the image (a file or block device) the overlay was committed into")
	tree := fs.String("tree", "", "the image's tree file, rewritten")
	mapFile := fs.String("qemu-img-map", "", "the output of qemu-img map --output=json of the overlay, before its commit")
	size := fs.Int64("size", -1, "the disk's size in bytes: must be the tree's (default: the tree's)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitUsage
	}
	if *image == "" || *tree == "" || *mapFile == "" || fs.NArg() > 0 || *size < -1 {
		fmt.Fprintln(stderr, "vm-transfer tree-update: give --image, --tree and --qemu-img-map (and --size N at least 0), and no arguments")
		return ExitUsage
	}
	res, err := treeUpdate(ctx, *image, *tree, *mapFile, *size)
	if err != nil {
		fmt.Fprintf(stderr, "vm-transfer tree-update: %s\n", oneLine(err.Error()))
		return ExitFailed
	}
	if err := writeJSONLine(stdout, res); err != nil {
		fmt.Fprintf(stderr, "vm-transfer tree-update: writing the result: %v\n", err)
		return ExitFailed
	}
	return ExitOK
}

// treeUpdate does tree-update's work.
func treeUpdate(ctx context.Context, image, treeFile, mapFile string, size int64) (*TreeUpdateResult, error) {
	start := time.Now()
	tree, err := readTreeFile(treeFile)
	if err != nil {
		return nil, err
	}
	if size >= 0 && size != tree.Size {
		return nil, fmt.Errorf("the tree file %s is of %d bytes, not the %d given", treeFile, tree.Size, size)
	}
	data, err := readBounded(mapFile, maxQemuImgMap)
	if err != nil {
		return nil, err
	}
	ranges, err := blocktree.ParseQemuImgMap(data, tree.Size)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", mapFile, err)
	}
	d, imageSize, err := openImageToRead(image)
	if err != nil {
		return nil, err
	}
	defer d.close()
	if imageSize < tree.Size {
		return nil, fmt.Errorf("%s is %d bytes, shorter than its tree's %d", image, imageSize, tree.Size)
	}
	st, err := tree.Update(ctx, d, ranges, blocktree.Options{})
	if err != nil {
		return nil, fmt.Errorf("re-hashing %s: %w", image, err)
	}
	if err := writeTreeFile(treeFile, tree); err != nil {
		return nil, err
	}
	return &TreeUpdateResult{Kind: "treeUpdate", Root: tree.Root(), BlocksRehashed: st.Blocks, BytesRehashed: st.Bytes,
		BytesRead: st.BytesRead, Seconds: time.Since(start).Seconds()}, nil
}

// readTreeFile reads and checks a tree file.
func readTreeFile(path string) (*blocktree.Tree, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t, err := blocktree.ReadTree(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// readBounded reads a file of at most limit bytes.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is more than %d bytes", path, limit)
	}
	return data, nil
}

// writeTreeFile replaces a tree file: written to a temporary beside it,
// synced, renamed over it, the directory synced.
func writeTreeFile(path string, t *blocktree.Tree) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".")
	if err != nil {
		return fmt.Errorf("writing the tree file: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = t.WriteTo(tmp)
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err == nil {
		err = syncDir(filepath.Dir(path))
	}
	if err != nil {
		return fmt.Errorf("writing the tree file %s: %w", path, err)
	}
	return nil
}
