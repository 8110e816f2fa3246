package standins

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSparseCopy checks the clone's bytes, its holes and its throttle.
func TestSparseCopy(t *testing.T) {
	dir := t.TempDir()
	data := make([]byte, 4<<20)
	_, err := rand.Read(data[:1<<20])
	require.NoError(t, err, "filling the source with random bytes")
	copy(data[3<<20:], data[:1000]) // data after a zero run, then a zero tail
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	require.NoError(t, os.WriteFile(src, data, 0o644), "writing the source")
	var reported int64
	start := time.Now()
	require.NoError(t, sparseCopy(context.Background(), src, dst, 8<<20, func(n int64) { reported += n }), "sparseCopy")
	took := time.Since(start)
	got, err := os.ReadFile(dst)
	require.NoError(t, err, "reading the clone")
	assert.True(t, bytes.Equal(got, data), "the clone differs from the source")
	assert.Equal(t, int64(len(data)), reported, "the progress reported is every byte of the source")
	assert.GreaterOrEqual(t, took, 400*time.Millisecond, "4 MiB at 8 MiB/s took %s: the throttle did not hold", took)
	assert.LessOrEqual(t, took, 2*time.Second, "4 MiB at 8 MiB/s took %s", took)
}
