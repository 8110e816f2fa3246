package blocktree

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// treeFile is the file of the tree of data.
func treeFile(t testing.TB, data []byte) (*Tree, []byte) {
	t.Helper()
	tree, _ := naiveTree(data)
	var buf bytes.Buffer
	n, err := tree.WriteTo(&buf)
	require.NoError(t, err)
	require.Equal(t, int64(buf.Len()), n)
	return tree, buf.Bytes()
}

func TestTreeFileRoundTrip(t *testing.T) {
	for _, size := range []int64{0, 1, BlockSize, 3*BlockSize + 5} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			tree, file := treeFile(t, image(size, 2))
			header := fmt.Sprintf("vmm-block-tree v1 block=1048576 size=%d root=%s\n", size, tree.Root())
			require.True(t, strings.HasPrefix(string(file), header), "header %q", file[:min(len(file), 140)])
			assert.Equal(t, int64(len(header)), HeaderLen(size))
			assert.Equal(t, FileLen(size), int64(len(file)))
			for i, l := range tree.Leaves {
				assert.Equal(t, l[:], file[len(header)+32*i:len(header)+32*(i+1)], "leaf %d", i)
			}
			back, err := ReadTree(bytes.NewReader(file))
			require.NoError(t, err)
			assert.Equal(t, tree.Size, back.Size)
			assert.Equal(t, len(tree.Leaves), len(back.Leaves))
			assert.Equal(t, tree.Root(), back.Root())
		})
	}
	_, err := (&Tree{Size: BlockSize + 1}).WriteTo(io.Discard)
	assert.ErrorContains(t, err, "leaves", "a malformed tree is not written")
	_, err = (&Tree{Size: 1, Leaves: make([]Leaf, 1)}).WriteTo(failingWriter{})
	assert.ErrorContains(t, err, "disk full")
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestReadTreeRefuses(t *testing.T) {
	tree, file := treeFile(t, image(3*BlockSize+5, 4))
	root := tree.Root()
	body := file[HeaderLen(tree.Size):]
	withHeader := func(h string) []byte { return append([]byte(h), body...) }
	damaged := bytes.Clone(file)
	damaged[len(damaged)-1] ^= 1
	tests := map[string]struct {
		file []byte
		want string
	}{
		"empty":             {file: nil, want: "it is empty"},
		"no line":           {file: []byte(strings.Repeat("x", 500)), want: "hold no line"},
		"cut in the header": {file: file[:30], want: "before the end of its header line"},
		"another magic":     {file: withHeader("vmm-block-list v1 block=1048576 size=3145733 root=" + root + "\n"), want: "does not start with"},
		"another version":   {file: withHeader("vmm-block-tree v2 block=1048576 size=3145733 root=" + root + "\n"), want: `version "v2"`},
		"another block":     {file: withHeader("vmm-block-tree v1 block=65536 size=3145733 root=" + root + "\n"), want: "block=65536"},
		"a field missing":   {file: withHeader("vmm-block-tree v1 block=1048576 size=3145733\n"), want: "fields"},
		"a field too many":  {file: withHeader("vmm-block-tree v1 block=1048576 size=3145733 root=" + root + " x=1\n"), want: "fields"},
		"two spaces":        {file: withHeader("vmm-block-tree v1 block=1048576  size=3145733 root=" + root + "\n"), want: "fields"},
		"size not decimal":  {file: withHeader("vmm-block-tree v1 block=1048576 size=0x300005 root=" + root + "\n"), want: "not size=<bytes>"},
		"size with a zero":  {file: withHeader("vmm-block-tree v1 block=1048576 size=03145733 root=" + root + "\n"), want: "not size=<bytes>"},
		"size with a plus":  {file: withHeader("vmm-block-tree v1 block=1048576 size=+3145733 root=" + root + "\n"), want: "not size=<bytes>"},
		"a negative size":   {file: withHeader("vmm-block-tree v1 block=1048576 size=-1 root=" + root + "\n"), want: "not size=<bytes>"},
		"size past int64":   {file: withHeader("vmm-block-tree v1 block=1048576 size=9223372036854775808 root=" + root + "\n"), want: "not size=<bytes>"},
		"uppercase root":    {file: withHeader("vmm-block-tree v1 block=1048576 size=3145733 root=" + strings.ToUpper(root) + "\n"), want: "root=<64"},
		"short root":        {file: withHeader("vmm-block-tree v1 block=1048576 size=3145733 root=" + root[:10] + "\n"), want: "root=<64"},
		"CRLF":              {file: withHeader("vmm-block-tree v1 block=1048576 size=3145733 root=" + root + "\r\n"), want: "root=<64"},
		"a leaf short":      {file: file[:len(file)-32], want: "ends after 3 of its 4 leaves"},
		"half a leaf":       {file: file[:len(file)-16], want: "ends after 3 of its 4 leaves"},
		"a byte more":       {file: append(bytes.Clone(file), 0), want: "bytes past its 4 leaves"},
		"a leaf more":       {file: append(bytes.Clone(file), body[:32]...), want: "bytes past its 4 leaves"},
		"a size one block less": {file: withHeader("vmm-block-tree v1 block=1048576 size=3145728 root=" + root + "\n"),
			want: "bytes past its 3 leaves"},
		"a damaged leaf": {file: damaged, want: "its header says " + root},
		"another root": {file: withHeader("vmm-block-tree v1 block=1048576 size=3145733 root=" + strings.Repeat("0", 64) + "\n"),
			want: "its header says 0000"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ReadTree(bytes.NewReader(tc.file))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "\n")
		})
	}
}

// TestReadTreeMemoryIsBounded: a header naming a huge size over a few
// leaves is refused without allocating for the size's leaf count.
func TestReadTreeMemoryIsBounded(t *testing.T) {
	file := append([]byte("vmm-block-tree v1 block=1048576 size=9223372036854775807 root="+strings.Repeat("a", 64)+"\n"), make([]byte, 32*100)...)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := ReadTree(bytes.NewReader(file))
	runtime.ReadMemStats(&after)
	assert.ErrorContains(t, err, "ends after 100 of its 8796093022208 leaves")
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(8<<20), "allocated for the header's count, not the bytes present")
}

func TestReaderStreams(t *testing.T) {
	tree, file := treeFile(t, image(5*BlockSize, 6))
	r, err := NewReader(bytes.NewReader(file))
	require.NoError(t, err)
	assert.Equal(t, tree.Size, r.Size())
	assert.Equal(t, tree.Root(), r.Root())
	assert.Equal(t, int64(5), r.Leaves())
	for i, want := range tree.Leaves {
		l, err := r.Next()
		require.NoError(t, err, "leaf %d", i)
		assert.Equal(t, want, l)
	}
	_, err = r.Next()
	assert.ErrorIs(t, err, io.EOF)

	size, root, err := ReadHeader(file)
	require.NoError(t, err)
	assert.Equal(t, tree.Size, size)
	assert.Equal(t, tree.Root(), root)
	_, _, err = ReadHeader([]byte("vmm-block-tree v1"))
	assert.Error(t, err)
}
