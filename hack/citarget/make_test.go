package citarget

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recipe is what make would run for target, without running it
// (make -n), one command per line; sub-makes are followed.
func recipe(t *testing.T, target string) []string {
	t.Helper()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	out, err := exec.Command("make", "-C", root, "--no-print-directory", "-n", target).CombinedOutput()
	require.NoError(t, err, "make -n %s: %s", target, out)
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// index is the position of the first line containing s, or -1.
func index(lines []string, s string) int {
	return slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, s) })
}

// TestMakeTestRunsVerifyFirst: CI (make test) checks generated code,
// gofmt and vet, before the long suites, so that a tree whose generated
// code is stale fails in minutes (issue 25: nothing in CI ran make verify).
func TestMakeTestRunsVerifyFirst(t *testing.T) {
	lines := recipe(t, "test")
	codegen, vet, gofmt := index(lines, "hack/verify-codegen.sh"), index(lines, " vet ./..."), index(lines, "gofmt -l")
	unit := index(lines, "test -count=1 ./...")
	require.GreaterOrEqual(t, codegen, 0, "make test does not run hack/verify-codegen.sh:\n%s", strings.Join(lines, "\n"))
	require.GreaterOrEqual(t, vet, 0, "make test does not run go vet")
	require.GreaterOrEqual(t, gofmt, 0, "make test does not check gofmt")
	require.GreaterOrEqual(t, unit, 0, "make test does not run the unit tests")
	assert.Less(t, gofmt, vet, "gofmt (seconds) before vet (a minute)")
	assert.Less(t, vet, codegen, "vet before the codegen check (two minutes)")
	assert.Less(t, codegen, unit, "make verify runs before the unit tests")
	for _, later := range []string{"build-testbin.sh", "-tags integration", "-tags e2e", "test-conversion.sh"} {
		if i := index(lines, later); i >= 0 {
			assert.Less(t, codegen, i, "make verify runs before %s", later)
		}
	}
}
