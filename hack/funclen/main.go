// Command funclen lists the functions longer than a limit (default 60
// lines, body included) in the Go files under the given directories,
// generated and test files aside, and exits 1 when it found any. make
// verify runs it over pkg/ and cmd/.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	limit := flag.Int("max", 60, "the most lines a function may have")
	flag.Parse()
	found := 0
	for _, root := range flag.Args() {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "generated" || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.HasPrefix(d.Name(), "zz_generated") {
				return nil
			}
			n, err := check(path, *limit)
			found += n
			return err
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "funclen:", err)
			os.Exit(2)
		}
	}
	if found > 0 {
		fmt.Fprintf(os.Stderr, "funclen: %d functions over %d lines\n", found, *limit)
		os.Exit(1)
	}
}

// check prints the long functions of one file and returns how many.
func check(path string, limit int) (int, error) {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		return 0, fmt.Errorf("parsing %s: %w", path, err)
	}
	n := 0
	for _, decl := range file.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		start, end := fset.Position(fn.Pos()).Line, fset.Position(fn.End()).Line
		if lines := end - start + 1; lines > limit {
			fmt.Printf("%s:%d: %s is %d lines\n", path, start, fn.Name.Name, lines)
			n++
		}
	}
	return n, nil
}
