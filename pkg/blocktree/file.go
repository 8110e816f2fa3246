package blocktree

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Magic and FormatVersion open a tree file's header line.
const (
	// Magic is the header's first word.
	Magic = "vmm-block-tree"
	// FormatVersion is the version of the file format.
	FormatVersion = "v1"
)

// maxHeaderLen bounds the header line: the longest a size and a root
// make it is 127 bytes.
const maxHeaderLen = 160

// Header is the first line of the file of a tree of size bytes whose root
// is root (lowercase hex): "vmm-block-tree v1 block=1048576 size=<size>
// root=<root>\n".
func Header(size int64, root string) []byte {
	return fmt.Appendf(nil, "%s %s block=%d size=%d root=%s\n", Magic, FormatVersion, BlockSize, size, root)
}

// HeaderLen is the length of the header of a tree of size bytes: the
// leaves start there, leaf i at HeaderLen(size)+32*i.
func HeaderLen(size int64) int64 {
	return int64(len(Header(size, strings.Repeat("0", 2*len(Leaf{})))))
}

// FileLen is the length of the file of a tree of size bytes.
func FileLen(size int64) int64 {
	return HeaderLen(size) + NumLeaves(size)*int64(len(Leaf{}))
}

// WriteTo writes the tree file: its header, then its leaves.
func (t *Tree) WriteTo(w io.Writer) (int64, error) {
	if err := t.Check(); err != nil {
		return 0, err
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	n, _ := bw.Write(Header(t.Size, t.Root()))
	written := int64(n)
	for _, l := range t.Leaves {
		n, _ := bw.Write(l[:])
		written += int64(n)
	}
	if err := bw.Flush(); err != nil {
		return written - int64(bw.Buffered()), fmt.Errorf("writing the tree: %w", err)
	}
	return written, nil
}

// ReadTree reads a tree file and checks it: its header, a leaf count
// that is its size's, nothing past the leaves, and leaves whose root is
// the header's. Its memory grows with the leaves actually read.
func ReadTree(r io.Reader) (*Tree, error) {
	tr, err := NewReader(r)
	if err != nil {
		return nil, err
	}
	t := &Tree{Size: tr.Size(), Leaves: make([]Leaf, 0, min(tr.Leaves(), 1<<16))}
	for {
		l, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return t, nil
		}
		if err != nil {
			return nil, err
		}
		t.Leaves = append(t.Leaves, l)
	}
}

// Reader reads a tree file's leaves one at a time, in order, checking the
// file as ReadTree does: memory does not grow with the tree.
type Reader struct {
	r    *bufio.Reader
	size int64
	root string
	n, i int64
	sum  *RootHasher
}

// NewReader reads a tree file's header.
func NewReader(r io.Reader) (*Reader, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	line, err := readLine(br)
	if err != nil {
		return nil, err
	}
	size, root, err := parseHeader(line)
	if err != nil {
		return nil, err
	}
	return &Reader{r: br, size: size, root: root, n: NumLeaves(size), sum: NewRootHasher()}, nil
}

// readLine reads the header line, at most maxHeaderLen bytes.
func readLine(br *bufio.Reader) (string, error) {
	var line []byte
	for len(line) < maxHeaderLen {
		c, err := br.ReadByte()
		if errors.Is(err, io.EOF) {
			return "", fmt.Errorf("not a block tree file: %s", describeStart(line))
		}
		if err != nil {
			return "", fmt.Errorf("reading the tree file: %w", err)
		}
		if c == '\n' {
			return string(line), nil
		}
		line = append(line, c)
	}
	return "", fmt.Errorf("not a block tree file: its first %d bytes hold no line", maxHeaderLen)
}

// describeStart says what a file that ended before its header's end held.
func describeStart(b []byte) string {
	if len(b) == 0 {
		return "it is empty"
	}
	return fmt.Sprintf("it ends after %d bytes, before the end of its header line", len(b))
}

// parseHeader reads "vmm-block-tree v1 block=1048576 size=N root=HEX".
func parseHeader(line string) (int64, string, error) {
	f := strings.Split(line, " ")
	switch {
	case len(f) == 0 || f[0] != Magic:
		return 0, "", fmt.Errorf("not a block tree file: its first line does not start with %q", Magic)
	case len(f) < 2 || f[1] != FormatVersion:
		return 0, "", fmt.Errorf("tree file: version %q, this reads %s", quoteField(f, 1), FormatVersion)
	case len(f) != 5:
		return 0, "", fmt.Errorf("tree file: the header has %d fields, not 5 (%s %s block= size= root=)", len(f), Magic, FormatVersion)
	case f[2] != "block="+strconv.Itoa(BlockSize):
		return 0, "", fmt.Errorf("tree file: %q, this reads block=%d", f[2], BlockSize)
	}
	s, ok := strings.CutPrefix(f[3], "size=")
	size, err := strconv.ParseInt(s, 10, 64)
	if !ok || err != nil || size < 0 || strconv.FormatInt(size, 10) != s {
		return 0, "", fmt.Errorf("tree file: %q is not size=<bytes>", cutField(f[3]))
	}
	root, ok := strings.CutPrefix(f[4], "root=")
	if _, err := parseLeaf(root); !ok || err != nil {
		return 0, "", fmt.Errorf("tree file: %q is not root=<64 lowercase hex digits>", cutField(f[4]))
	}
	return size, root, nil
}

// quoteField is field i, or "" when there is none.
func quoteField(f []string, i int) string {
	if i < len(f) {
		return cutField(f[i])
	}
	return ""
}

// cutField keeps a field short in a message.
func cutField(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// Size is the size the tree covers, from the header.
func (r *Reader) Size() int64 { return r.size }

// Root is the header's root.
func (r *Reader) Root() string { return r.root }

// Leaves is how many leaves the file must hold.
func (r *Reader) Leaves() int64 { return r.n }

// Next is the next leaf. After the last, it returns io.EOF only if the
// file ends there and the leaves' root is the header's; any other
// problem is an error, and so is a file that ends early.
func (r *Reader) Next() (Leaf, error) {
	var l Leaf
	if r.i == r.n {
		if _, err := r.r.ReadByte(); err == nil {
			return l, fmt.Errorf("tree file: bytes past its %d leaves", r.n)
		} else if !errors.Is(err, io.EOF) {
			return l, fmt.Errorf("reading the tree file: %w", err)
		}
		if got := r.sum.Sum(); got != r.root {
			return l, fmt.Errorf("tree file: its leaves' root is %s, its header says %s", got, r.root)
		}
		return l, io.EOF
	}
	if _, err := io.ReadFull(r.r, l[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return l, fmt.Errorf("tree file: it ends after %d of its %d leaves (size %d)", r.i, r.n, r.size)
		}
		return l, fmt.Errorf("reading the tree file: %w", err)
	}
	r.i++
	r.sum.Add(l)
	return l, nil
}

// ReadHeader reads a tree file's header alone: its size and root.
func ReadHeader(data []byte) (size int64, root string, err error) {
	i := bytes.IndexByte(data, '\n')
	if i < 0 || i >= maxHeaderLen {
		return 0, "", errors.New("not a block tree file: no header line")
	}
	return parseHeader(string(data[:i]))
}
