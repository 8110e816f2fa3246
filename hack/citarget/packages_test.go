package citarget

import (
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// packageInstaller is the one script that installs Debian packages: as
// root it runs apt-get update once, then installs what is missing;
// otherwise it names what is missing.
const packageInstaller = "hack/install-debian-packages.sh"

// TestScriptsInstallWhatTheyNeed: every make target installs the Debian
// packages it needs, as the README promises (issue 34: make
// conversion-image failed on a fresh machine with "mmdebstrap is missing:
// apt-get install -y mmdebstrap"). So no script under hack/ but the
// installer runs apt-get install or tells its reader to: each calls the
// installer (directly or through hack/install-*-deps.sh), which updates
// the package lists once before it installs.
func TestScriptsInstallWhatTheyNeed(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	checked := 0
	err := filepath.WalkDir(filepath.Join(root, "hack"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".sh") {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == packageInstaller {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		checked++
		for n, line := range strings.Split(string(data), "\n") {
			assert.NotContains(t, line, "apt-get install", "%s:%d: installs or asks for Debian packages itself; call %s (it runs apt-get update first)", rel, n+1, packageInstaller)
			assert.NotRegexp(t, `is missing: (run|apt)`, line, "%s:%d: names a missing tool instead of installing it", rel, n+1)
		}
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, checked, 5, "the scripts under hack/")
}
