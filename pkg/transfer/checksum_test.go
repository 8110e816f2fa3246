package transfer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"platform.example/vm-migration/pkg/blocktree"
)

// runMain runs one of the commands' mains and returns its exit code,
// stdout and stderr.
func runMain(main func(context.Context, []string, *bytes.Buffer, *bytes.Buffer) int, args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := main(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func checksumMain(ctx context.Context, args []string, out, errOut *bytes.Buffer) int {
	return ChecksumMain(ctx, args, out, errOut)
}

func treeUpdateMain(ctx context.Context, args []string, out, errOut *bytes.Buffer) int {
	return TreeUpdateMain(ctx, args, out, errOut)
}

func TestChecksumMain(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "disk.img")
	const size = 6<<20 + 4096
	want := sparseImage(t, img, size, map[int64]string{0: "boot", 4<<20 + 3: "data", size - 1: "x"})

	code, out, errOut := runMain(checksumMain, img)
	require.Equal(t, ExitOK, code, errOut)
	assert.Equal(t, sum(want)+"  "+img+"\n", out, "sha256sum's form")

	treeOut := filepath.Join(dir, "out.tree")
	code, out, errOut = runMain(checksumMain, "--json", "--tree-out", treeOut, img, "5242880")
	require.Equal(t, ExitOK, code, errOut)
	var res ChecksumResult
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	assert.Equal(t, sum(want[:5<<20]), res.Root)
	assert.Equal(t, ChecksumResult{Kind: "checksum", Path: img, Root: res.Root, Size: 5 << 20, Scheme: blocktree.Scheme, Leaves: 5,
		BlocksRead: 2, BlocksUnread: 3, Seconds: res.Seconds}, res, "holes unread")
	tree, err := readTreeFile(treeOut)
	require.NoError(t, err)
	assert.Equal(t, res.Root, tree.Root())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 2, "the image and the tree file, no temporary")

	code, out, errOut = runMain(checksumMain, img, "0")
	require.Equal(t, ExitOK, code, errOut)
	assert.True(t, strings.HasPrefix(out, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  "), "the root of nothing: %s", out)

	for name, args := range map[string][]string{
		"a size past the image": {img, fmt.Sprint(size + 1)},
		"no such file":          {filepath.Join(dir, "missing.img")},
		"a directory":           {dir},
		"tree-out nowhere":      {"--tree-out", "/nonexistent/dir/t.tree", img},
	} {
		code, out, errOut := runMain(checksumMain, args...)
		assert.Equal(t, ExitFailed, code, name)
		assert.Empty(t, out, name)
		assert.Equal(t, 1, strings.Count(errOut, "\n"), "%s: one line on stderr: %q", name, errOut)
	}
	for name, args := range map[string][]string{
		"nothing":          nil,
		"three arguments":  {img, "5", "6"},
		"a size not bytes": {img, "5MiB"},
		"a negative size":  {img, "-1"},
		"an unknown flag":  {"--sha1", img},
	} {
		code, _, _ := runMain(checksumMain, args...)
		assert.Equal(t, ExitUsage, code, name)
	}
}

// overlayMap is qemu-img map output with the given entries of depth 0
// over an image of size bytes, the rest of depth 1, as qemu-img writes it.
func overlayMap(size int64, written []blocktree.Range) []byte {
	var entries []string
	at := int64(0)
	add := func(start, length int64, depth int) {
		if length > 0 {
			entries = append(entries, fmt.Sprintf(`{ "start": %d, "length": %d, "depth": %d, "present": true, "zero": false, "data": true, "offset": %d}`,
				start, length, depth, start))
		}
	}
	for _, r := range written {
		add(at, r.Offset-at, 1)
		add(r.Offset, r.Length, 0)
		at = r.End()
	}
	add(at, size-at, 1)
	return []byte("[" + strings.Join(entries, ",\n") + "]\n")
}

func TestTreeUpdateMain(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "disk.img")
	const size = 9<<20 + 512
	before := sparseImage(t, img, size, map[int64]string{0: "boot", 5 << 20: "data", size - 3: "end"})
	treeFile := img + TreeSuffix
	code, _, errOut := runMain(checksumMain, "--tree-out", treeFile, img)
	require.Equal(t, ExitOK, code, errOut)

	// The conversion writes a few ranges (what a commit of the overlay
	// writes into the image), one of them zeros.
	written := []blocktree.Range{{Offset: 1<<20 - 10, Length: 20}, {Offset: 5<<20 + 65536, Length: 65536}, {Offset: size - 512, Length: 512}}
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	require.NoError(t, err)
	after := bytes.Clone(before)
	for i, r := range written {
		b := bytes.Repeat([]byte{byte(i + 1)}, int(r.Length))
		if i == 1 {
			b = make([]byte, r.Length)
		}
		_, err := f.WriteAt(b, r.Offset)
		require.NoError(t, err)
		copy(after[r.Offset:], b)
	}
	require.NoError(t, f.Close())
	mapFile := filepath.Join(dir, "map.json")
	require.NoError(t, os.WriteFile(mapFile, overlayMap(size, written), 0o644))

	// A failure leaves the tree file as it was.
	treeBefore, err := os.ReadFile(treeFile)
	require.NoError(t, err)
	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`[{"start": 0, "length": -5, "depth": 0}]`), 0o644))
	for name, args := range map[string][]string{
		"a malformed map":    {"--image", img, "--tree", treeFile, "--qemu-img-map", bad},
		"a map past the end": {"--image", img, "--tree", treeFile, "--qemu-img-map", mapFile, "--size", fmt.Sprint(size + 512)},
		"no map file":        {"--image", img, "--tree", treeFile, "--qemu-img-map", filepath.Join(dir, "missing.json")},
		"no image":           {"--image", filepath.Join(dir, "missing.img"), "--tree", treeFile, "--qemu-img-map", mapFile},
		"not a tree file":    {"--image", img, "--tree", mapFile, "--qemu-img-map", mapFile},
	} {
		code, out, errOut := runMain(treeUpdateMain, args...)
		assert.Equal(t, ExitFailed, code, name)
		assert.Empty(t, out, name)
		assert.Equal(t, 1, strings.Count(errOut, "\n"), "%s: one line on stderr: %q", name, errOut)
		got, err := os.ReadFile(treeFile)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(treeBefore, got), "%s: the tree file changed", name)
	}
	for name, args := range map[string][]string{
		"no image flag":  {"--tree", treeFile, "--qemu-img-map", mapFile},
		"no tree flag":   {"--image", img, "--qemu-img-map", mapFile},
		"no map flag":    {"--image", img, "--tree", treeFile},
		"an argument":    {"--image", img, "--tree", treeFile, "--qemu-img-map", mapFile, "extra"},
		"a size below 0": {"--image", img, "--tree", treeFile, "--qemu-img-map", mapFile, "--size", "-2"},
	} {
		code, _, _ := runMain(treeUpdateMain, args...)
		assert.Equal(t, ExitUsage, code, name)
	}

	code, out, errOut := runMain(treeUpdateMain, "--image", img, "--tree", treeFile, "--qemu-img-map", mapFile, "--size", fmt.Sprint(size))
	require.Equal(t, ExitOK, code, errOut)
	var res TreeUpdateResult
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	assert.Equal(t, sum(after), res.Root, "the root of the converted image")
	assert.Equal(t, int64(4), res.BlocksRehashed, "blocks 0 and 1 (across their boundary), 5, and the last")
	assert.Equal(t, int64(3<<20+512), res.BytesRehashed)
	assert.LessOrEqual(t, res.BytesRead, res.BytesRehashed)
	tree, err := readTreeFile(treeFile)
	require.NoError(t, err)
	assert.Equal(t, sum(after), tree.Root(), "the tree file written back")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 4, "the image, its tree, two maps: no temporary left")
}

// TestTreeUpdateAfterQemuImgCommit does what the conversion does, with
// the real qemu-img: an overlay over the raw image, writes into it (data
// and zeros), its map, its commit into the image, then tree-update: the
// tree is that of the committed image, computed again from every byte.
func TestTreeUpdateAfterQemuImgCommit(t *testing.T) {
	for _, tool := range []string{"qemu-img", "qemu-io"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	dir := t.TempDir()
	img := filepath.Join(dir, "disk.img")
	const size = 24 << 20
	sparseImage(t, img, size, map[int64]string{0: "boot", 3<<20 + 5: strings.Repeat("data", 100000), size - 10: "end"})
	treeFile := img + TreeSuffix
	code, _, errOut := runMain(checksumMain, "--tree-out", treeFile, img)
	require.Equal(t, ExitOK, code, errOut)

	overlay := filepath.Join(dir, "disk.qcow2")
	run := func(name string, args ...string) string {
		out, err := exec.Command(name, args...).CombinedOutput()
		require.NoError(t, err, "%s %v: %s", name, args, out)
		return string(out)
	}
	run("qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", img, overlay, fmt.Sprint(size))
	run("qemu-io", "-c", "write -P 0xab 1M 64k", "-c", "write -z 3M 1M", "-c", "write -P 7 10M 3M", "-c", "write -P 9 24575k 1k", overlay)
	mapFile := filepath.Join(dir, "map.json")
	require.NoError(t, os.WriteFile(mapFile, []byte(run("qemu-img", "map", "--output=json", overlay)), 0o644))
	run("qemu-img", "commit", "-q", "-d", overlay)

	code, out, errOut := runMain(treeUpdateMain, "--image", img, "--tree", treeFile, "--qemu-img-map", mapFile, "--size", fmt.Sprint(size))
	require.Equal(t, ExitOK, code, errOut)
	var res TreeUpdateResult
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	committed, err := os.ReadFile(img)
	require.NoError(t, err)
	assert.Equal(t, sum(committed), res.Root, "the root of the committed image")
	assert.Equal(t, int64(6), res.BlocksRehashed, "blocks 1, 3, 10-12 and 23: %s", out)
	t.Logf("%s", out)
}
