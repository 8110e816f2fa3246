package transfer

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"platform.example/vm-migration/pkg/blocktree"
	"platform.example/vm-migration/pkg/transfer/wire"
)

// sparseImage writes an image of size bytes with data at the given
// offsets and holes elsewhere, and returns its bytes.
func sparseImage(t *testing.T, path string, size int64, data map[int64]string) []byte {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Truncate(size))
	want := make([]byte, size)
	for off, s := range data {
		_, err := f.WriteAt([]byte(s), off)
		require.NoError(t, err)
		copy(want[off:], s)
	}
	return want
}

// sum is the root of the block tree of b.
func sum(b []byte) string {
	t, _, err := blocktree.Compute(context.Background(), bytes.NewReader(b), int64(len(b)), blocktree.Options{})
	if err != nil {
		panic(err)
	}
	return t.Root()
}

func TestHashImage(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "disk.img")
	const size = 12 << 20
	want := sparseImage(t, img, size, map[int64]string{0: "boot sector", 5<<20 + 17: "data in the middle", size - 3: "end"})
	ctx := context.Background()

	got, gotSize, err := HashImage(ctx, img, size)
	require.NoError(t, err)
	assert.Equal(t, sum(want), got, "holes hash as zeros")
	assert.Equal(t, int64(size), gotSize)

	got, gotSize, err = HashImage(ctx, img, 6<<20)
	require.NoError(t, err)
	assert.Equal(t, sum(want[:6<<20]), got, "only the first bytes asked for: a target larger than the disk")
	assert.Equal(t, int64(size), gotSize)

	_, gotSize, err = HashImage(ctx, img, size+512)
	require.Error(t, err, "an image shorter than the disk")
	assert.Contains(t, err.Error(), "shorter than")
	assert.Equal(t, int64(size), gotSize)

	_, _, err = HashImage(ctx, dir, 512)
	assert.ErrorContains(t, err, "neither a regular file nor a block device")

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, _, err = HashImage(cancelled, img, size)
	assert.ErrorIs(t, err, context.Canceled)
}

func TestHashMain(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.img"), filepath.Join(dir, "b.img")
	wantA := sparseImage(t, a, 2<<20, map[int64]string{100: "disk a"})
	wantB := sparseImage(t, b, 1<<20, map[int64]string{0: "disk b"})
	term := filepath.Join(dir, "termination-log")
	run := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := HashMain(context.Background(), append([]string{"--termination-log=" + term}, args...), &out, &errOut)
		return code, out.String(), errOut.String()
	}

	code, out, _ := run("target/disk-0="+a+":2097152", "staged/disk-1="+b+":1048576")
	require.Equal(t, ExitOK, code)
	res, err := wire.ParseHashResult([]byte(out))
	require.NoError(t, err)
	assert.Equal(t, []wire.ImageHash{
		{Name: "target/disk-0", Bytes: 2 << 20, Size: 2 << 20, SHA256: sum(wantA)},
		{Name: "staged/disk-1", Bytes: 1 << 20, Size: 1 << 20, SHA256: sum(wantB)},
	}, res.Images)
	msg, err := os.ReadFile(term)
	require.NoError(t, err)
	assert.JSONEq(t, out, string(msg), "the same result as the termination message")

	code, out, _ = run("target/disk-0="+a+":2097152", "target/disk-1="+filepath.Join(dir, "missing.img")+":512")
	assert.Equal(t, ExitFailed, code, "an image that cannot be read")
	res, err = wire.ParseHashResult([]byte(out))
	require.NoError(t, err)
	assert.Equal(t, sum(wantA), res.Images[0].SHA256)
	assert.Empty(t, res.Images[1].SHA256)
	assert.Contains(t, res.Images[1].Error, "no such file")

	for _, bad := range [][]string{nil, {"no-equals"}, {"x=" + a}, {"x=" + a + ":0"}, {"x=" + a + ":-5"},
		{"--tree", "y=" + a + ".tree", "x=" + a + ":512"}, {"--tree", "x=/t1", "--tree", "x=/t2", "x=" + a + ":512"}, {"--tree", "x", "x=" + a + ":512"},
		{"--tree", "=/t", "x=" + a + ":512"}, {"--tree", "x=", "x=" + a + ":512"}} {
		code, _, _ := run(bad...)
		assert.Equal(t, ExitUsage, code, "command line %q", bad)
	}
}

// TestHashMainComparesTrees gives the hash command a tree file per image:
// it reports the stored root and the first byte range in which the stored
// tree and the image differ (a block whose bytes changed, a size
// changed), and a tree file that does not read as such; the images are
// hashed all the same.
func TestHashMainComparesTrees(t *testing.T) {
	dir := t.TempDir()
	const size = 5<<20 + 1000
	img := filepath.Join(dir, "disk.img")
	want := sparseImage(t, img, size, map[int64]string{10: "boot", 3<<20 + 5: "data", size - 4: "end"})
	writeTree := func(name string, data []byte) string {
		tree, _, err := blocktree.Compute(context.Background(), bytes.NewReader(data), int64(len(data)), blocktree.Options{})
		require.NoError(t, err)
		var buf bytes.Buffer
		_, err = tree.WriteTo(&buf)
		require.NoError(t, err)
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
		return path
	}
	changed := bytes.Clone(want)
	changed[2<<20+7] ^= 1
	changed[4<<20] ^= 1
	same, other := writeTree("same.tree", want), writeTree("other.tree", changed)
	shorter, longer := writeTree("shorter.tree", want[:size-1000]), writeTree("longer.tree", append(bytes.Clone(want), make([]byte, 2<<20)...))
	garbled := filepath.Join(dir, "garbled.tree")
	data, err := os.ReadFile(same)
	require.NoError(t, err)
	data[len(data)-1] ^= 1
	require.NoError(t, os.WriteFile(garbled, data, 0o644))

	term := filepath.Join(dir, "termination-log")
	args := []string{"--termination-log=" + term}
	names := []string{"same", "other", "shorter", "longer", "garbled", "missing", "none"}
	trees := map[string]string{"same": same, "other": other, "shorter": shorter, "longer": longer, "garbled": garbled, "missing": filepath.Join(dir, "missing.tree")}
	for _, n := range names {
		if trees[n] != "" {
			args = append(args, "--tree", n+"="+trees[n])
		}
	}
	for _, n := range names {
		args = append(args, fmt.Sprintf("%s=%s:%d", n, img, size))
	}
	var out, errOut bytes.Buffer
	require.Equal(t, ExitOK, HashMain(context.Background(), args, &out, &errOut), errOut.String())
	res, err := wire.ParseHashResult(out.Bytes())
	require.NoError(t, err)
	assert.Equal(t, blocktree.Scheme, res.Scheme)
	root := sum(want)
	byName := map[string]wire.ImageHash{}
	for _, img := range res.Images {
		assert.Equal(t, root, img.SHA256, "%s: the image is hashed whatever its tree file", img.Name)
		assert.Empty(t, img.Error)
		byName[img.Name] = img
	}
	assert.Equal(t, wire.ImageHash{Name: "same", Bytes: size, Size: size, SHA256: root, StoredRoot: root}, byName["same"])
	assert.Equal(t, sum(changed), byName["other"].StoredRoot)
	assert.Equal(t, &wire.ByteRange{Offset: 2 << 20, Length: 1 << 20}, byName["other"].FirstDifference, "the first block that differs")
	assert.Equal(t, &wire.ByteRange{Offset: 5 << 20, Length: 1000}, byName["shorter"].FirstDifference, "the last block is shorter")
	assert.Equal(t, &wire.ByteRange{Offset: 5 << 20, Length: 1 << 20}, byName["longer"].FirstDifference, "the stored tree goes on")
	assert.Contains(t, byName["garbled"].TreeError, "its header says")
	assert.Empty(t, byName["garbled"].StoredRoot, "the root of a tree file that does not read is not reported")
	assert.Nil(t, byName["garbled"].FirstDifference)
	assert.Contains(t, byName["missing"].TreeError, "no such file")
	assert.Equal(t, wire.ImageHash{Name: "none", Bytes: size, Size: size, SHA256: root}, byName["none"])
	msg, err := os.ReadFile(term)
	require.NoError(t, err)
	assert.JSONEq(t, out.String(), string(msg))
}

func TestHashTerminationMessageFits(t *testing.T) {
	res := &wire.HashResult{Kind: wire.KindHash, Scheme: blocktree.Scheme}
	for i := range wire.MaxHashImages {
		res.Images = append(res.Images, wire.ImageHash{Name: fmt.Sprintf("staged/disk-%d", i+100), Bytes: 1 << 50, Size: 1 << 50,
			Error: strings.Repeat("a long reason ", 40), TreeError: strings.Repeat("a tree's long reason ", 40)})
	}
	res.Images[0].Error, res.Images[0].SHA256 = "", strings.Repeat("f", 64)
	msg := wire.HashTerminationMessage(res)
	assert.LessOrEqual(t, len(msg), wire.MaxTerminationMessage)
	back, err := wire.ParseHashResult(msg)
	require.NoError(t, err)
	assert.Len(t, back.Images, wire.MaxHashImages)
	assert.Equal(t, strings.Repeat("f", 64), back.Images[0].SHA256)

	// Every image with its root, a stored root and a first difference,
	// all figures as long as they get (below 2^53 bytes: 8 PiB), fits as is.
	all := &wire.HashResult{Kind: wire.KindHash, Scheme: blocktree.Scheme}
	for i := range wire.MaxHashImages {
		all.Images = append(all.Images, wire.ImageHash{Name: fmt.Sprintf("target/disk-%d", i+100), Bytes: 1<<53 - 1, Size: 1<<53 - 1,
			SHA256: strings.Repeat("e", 64), StoredRoot: strings.Repeat("f", 64), FirstDifference: &wire.ByteRange{Offset: 1<<53 - 1<<20, Length: 1 << 20}})
	}
	msg = wire.HashTerminationMessage(all)
	t.Logf("%d images, every figure: %d bytes", wire.MaxHashImages, len(msg))
	assert.LessOrEqual(t, len(msg), wire.MaxTerminationMessage, "a full result with every checksum fits as is")
	back, err = wire.ParseHashResult(msg)
	require.NoError(t, err)
	assert.Equal(t, all, back)
}
