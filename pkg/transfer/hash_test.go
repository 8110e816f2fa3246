package transfer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
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

	for _, bad := range [][]string{nil, {"no-equals"}, {"x=" + a}, {"x=" + a + ":0"}, {"x=" + a + ":-5"}} {
		code, _, _ := run(bad...)
		assert.Equal(t, ExitUsage, code, "command line %q", bad)
	}
}

func TestHashTerminationMessageFits(t *testing.T) {
	res := &wire.HashResult{Kind: wire.KindHash}
	for i := range wire.MaxHashImages {
		res.Images = append(res.Images, wire.ImageHash{Name: fmt.Sprintf("staged/disk-%d", i+100), Bytes: 1 << 50, Size: 1 << 50,
			Error: strings.Repeat("a long reason ", 40)})
	}
	res.Images[0].Error, res.Images[0].SHA256 = "", strings.Repeat("f", 64)
	msg := wire.HashTerminationMessage(res)
	assert.LessOrEqual(t, len(msg), wire.MaxTerminationMessage)
	back, err := wire.ParseHashResult(msg)
	require.NoError(t, err)
	assert.Len(t, back.Images, wire.MaxHashImages)
	assert.Equal(t, strings.Repeat("f", 64), back.Images[0].SHA256)

	all := &wire.HashResult{Kind: wire.KindHash}
	for i := range wire.MaxHashImages {
		all.Images = append(all.Images, wire.ImageHash{Name: fmt.Sprintf("target/disk-%d", i+100), Bytes: 1 << 50, Size: 1 << 50, SHA256: strings.Repeat("e", 64)})
	}
	assert.LessOrEqual(t, len(wire.HashTerminationMessage(all)), wire.MaxTerminationMessage, "a full result with every checksum fits as is")
}
