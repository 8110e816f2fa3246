package blocktree

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCoreutilsPipelines runs the pipelines the package documentation
// gives (split --filter, sha256sum, cut) and compares their output with
// Root: for a file of exactly the size, and for the first SIZE bytes of a
// longer file (as of a device) through head -c.
func TestCoreutilsPipelines(t *testing.T) {
	if out, err := exec.Command("split", "--help").CombinedOutput(); err != nil || !bytes.Contains(out, []byte("--filter")) {
		t.Skip("split has no --filter here")
	}
	dir := t.TempDir()
	for _, size := range []int64{0, 1, BlockSize - 1, BlockSize, BlockSize + 1, 3*BlockSize + 12345} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			data := image(size+BlockSize/2, uint64(size)+17)
			exact := filepath.Join(dir, fmt.Sprintf("exact-%d.img", size))
			longer := filepath.Join(dir, fmt.Sprintf("longer-%d.img", size))
			require.NoError(t, os.WriteFile(exact, data[:size], 0o600))
			require.NoError(t, os.WriteFile(longer, data, 0o600))
			tree, _, err := Compute(context.Background(), bytes.NewReader(data), size, Options{})
			require.NoError(t, err)
			for name, pipeline := range map[string]string{
				"file":   "split -b 1048576 --filter='sha256sum | cut -c1-64' " + exact + " | sha256sum",
				"device": fmt.Sprintf("head -c %d %s | split -b 1048576 --filter='sha256sum | cut -c1-64' | sha256sum", size, longer),
			} {
				cmd := exec.Command("sh", "-c", pipeline)
				cmd.Dir = dir // split writes nothing with --filter, but just in case
				out, err := cmd.CombinedOutput()
				require.NoError(t, err, "%s: %s", pipeline, out)
				assert.Equal(t, tree.Root(), strings.Fields(string(out))[0], "%s: %s", name, pipeline)
			}
		})
	}
}
