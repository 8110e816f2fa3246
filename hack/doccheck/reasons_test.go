package doccheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// reasonPackages are the folders whose exported Reason... constants are
// the reasons a migration's conditions, events and last error can carry.
var reasonPackages = []string{"pkg/statemachine", "pkg/preflight", "pkg/steps"}

// reasonConstants returns the value of every exported string constant
// named Reason... in the non-test Go files under reasonPackages, with
// where it is declared.
func reasonConstants(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, dir := range reasonPackages {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			for name, value := range reasonsOfFile(t, p) {
				out[value] = rel + ": " + name
			}
			return nil
		})
		require.NoError(t, err, "walking %s", dir)
	}
	return out
}

// reasonsOfFile maps each exported Reason... string constant of one file
// to its value.
func reasonsOfFile(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	require.NoError(t, err)
	out := map[string]string{}
	for _, decl := range f.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.CONST {
			continue
		}
		for _, spec := range gen.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, "Reason") || !name.IsExported() || i >= len(vs.Values) {
					continue
				}
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					value, err := strconv.Unquote(lit.Value)
					require.NoError(t, err)
					out[name.Name] = value
				}
			}
		}
	}
	return out
}

// heading matches a Markdown heading of level 2 to 4.
var heading = regexp.MustCompile(`^#{2,4}\s+(.*)$`)

// documentedReasons are the words in backquotes of troubleshooting.md's
// headings: each heading names the reasons its entry explains.
func documentedReasons(t *testing.T, path string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	out := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		m := heading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		parts := strings.Split(m[1], "`")
		for i := 1; i < len(parts); i += 2 {
			out[parts[i]] = true
		}
	}
	return out
}

// TestEveryReasonIsDocumented: every condition and event reason the
// controller can set has an entry (a heading naming it in backquotes) in
// docs/operators/troubleshooting.md.
func TestEveryReasonIsDocumented(t *testing.T) {
	root := repoRoot(t)
	reasons := reasonConstants(t, root)
	require.NotEmpty(t, reasons, "no Reason constant found")
	documented := documentedReasons(t, filepath.Join(root, "docs", "operators", "troubleshooting.md"))
	for value, where := range reasons {
		assert.True(t, documented[value], "reason %q (%s) has no heading in docs/operators/troubleshooting.md", value, where)
	}
	t.Logf("%d reasons checked", len(reasons))
}
