// Command cdicrds writes out the CustomResourceDefinitions of the
// Containerized Data Importer (CDI) as YAML files, one per CRD.
//
// CDI ships no CRD files: its operator carries them as YAML strings in a
// generated Go file, pkg/operator/resources/crds_generated.go, a
// package-level map[string]string from a short name ("datavolume") to the
// CRD's YAML. This command reads that file from the module cache with
// go/parser and go/ast, without compiling or importing CDI, and writes each
// entry to <out>/<name>.yaml. hack/build-cdi.sh runs it at build time, so
// the project commits no copy of upstream's CRDs.
//
//	go run ./hack/cdicrds -src <cdi module>/pkg/operator/resources/crds_generated.go -out <dir>
package main

import (
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

func main() {
	src := flag.String("src", "", "CDI's crds_generated.go")
	out := flag.String("out", "", "folder to write <name>.yaml into (created; must not exist yet)")
	varName := flag.String("var", "CDICRDs", "name of the package-level map[string]string that holds the CRDs")
	flag.Parse()
	if *src == "" || *out == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: cdicrds -src crds_generated.go -out dir [-var CDICRDs]")
		os.Exit(2)
	}
	names, err := extract(*src, *varName, *out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cdicrds:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "cdicrds: wrote %d CRDs to %s: %s\n", len(names), *out, strings.Join(names, " "))
}

// plainName is what a map key must be to become a file name.
var plainName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// extract reads the map varName from the Go file src and writes each entry
// to out/<key>.yaml, ending in a newline. It returns the keys, sorted. It
// checks the whole map before it writes anything, so a file of another
// shape leaves no out folder behind.
func extract(src, varName, out string) ([]string, error) {
	crds, err := readMap(src, varName)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(crds))
	for name := range crds {
		names = append(names, name)
	}
	sort.Strings(names)
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", out, err)
	}
	for _, name := range names {
		text := crds[name]
		if !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		path := filepath.Join(out, name+".yaml")
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			return nil, fmt.Errorf("write %s: %w", path, err)
		}
	}
	return names, nil
}

// readMap parses src and returns the entries of the package-level
// map[string]string literal named varName.
func readMap(src, varName string) (map[string]string, error) {
	file, err := parser.ParseFile(token.NewFileSet(), src, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", src, err)
	}
	value, err := findVar(file, varName)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	lit, ok := value.(*ast.CompositeLit)
	if !ok || !isStringMap(lit.Type) {
		return nil, fmt.Errorf("%s: %s is not a map[string]string literal", src, varName)
	}
	crds := make(map[string]string, len(lit.Elts))
	for _, elt := range lit.Elts {
		kv, ok := elt.(*ast.KeyValueExpr)
		if !ok {
			return nil, fmt.Errorf("%s: %s has an element that is not key: value", src, varName)
		}
		key, err := stringValue(kv.Key)
		if err != nil {
			return nil, fmt.Errorf("%s: a key of %s is not a string literal", src, varName)
		}
		if !plainName.MatchString(key) {
			return nil, fmt.Errorf("%s: key %q is not a plain name", src, key)
		}
		if _, dup := crds[key]; dup {
			return nil, fmt.Errorf("%s: key %q appears twice", src, key)
		}
		text, err := stringValue(kv.Value)
		if err != nil {
			return nil, fmt.Errorf("%s: value of %q is not a string literal", src, key)
		}
		if !strings.Contains(text, "kind: CustomResourceDefinition") {
			return nil, fmt.Errorf("%s: value of %q is not a CustomResourceDefinition", src, key)
		}
		crds[key] = text
	}
	if len(crds) == 0 {
		return nil, fmt.Errorf("%s: %s has no entries", src, varName)
	}
	return crds, nil
}

// findVar returns the value of the package-level var name.
func findVar(file *ast.File, name string) (ast.Expr, error) {
	for _, decl := range file.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.VAR {
			continue
		}
		for _, spec := range gen.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, ident := range vs.Names {
				if ident.Name != name {
					continue
				}
				if i >= len(vs.Values) {
					return nil, fmt.Errorf("var %s has no value", name)
				}
				return vs.Values[i], nil
			}
		}
	}
	return nil, fmt.Errorf("no package-level var %s", name)
}

// isStringMap reports whether expr is the type map[string]string.
func isStringMap(expr ast.Expr) bool {
	m, ok := expr.(*ast.MapType)
	return ok && isIdent(m.Key, "string") && isIdent(m.Value, "string")
}

func isIdent(expr ast.Expr, name string) bool {
	id, ok := expr.(*ast.Ident)
	return ok && id.Name == name
}

// errNotConstant is stringValue's error for anything but string literals
// joined with +.
var errNotConstant = errors.New("not a constant string")

// stringValue returns the value of a string literal, or of string literals
// joined with +.
func stringValue(expr ast.Expr) (string, error) {
	switch e := expr.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", errNotConstant
		}
		return strconv.Unquote(e.Value)
	case *ast.ParenExpr:
		return stringValue(e.X)
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return "", errNotConstant
		}
		left, err := stringValue(e.X)
		if err != nil {
			return "", err
		}
		right, err := stringValue(e.Y)
		if err != nil {
			return "", err
		}
		return left + right, nil
	}
	return "", errNotConstant
}
