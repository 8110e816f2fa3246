// Package crdschema reads the VirtualMachineMigration CRD that
// controller-gen writes into manifests/crd, for unit tests to hold values
// and Go constants to the bounds its schema sets (maxLength, maxItems)
// without an API server.
package crdschema

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"unicode/utf8"

	"sigs.k8s.io/yaml"
)

// File is the CRD's path from the repository's root.
const File = "manifests/crd/migration.platform.example_virtualmachinemigrations.yaml"

// Schema is a node of the CRD's OpenAPI v3 schema.
type Schema map[string]any

// Load reads the schema of the CRD's first version (v1alpha1).
func Load() (Schema, error) {
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		return nil, fmt.Errorf("finding the repository")
	}
	path := filepath.Join(filepath.Dir(self), "..", "..", filepath.FromSlash(File))
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Name   string `json:"name"`
				Schema struct {
					OpenAPIV3Schema Schema `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		return nil, fmt.Errorf("reading %s: %w", File, err)
	}
	if len(crd.Spec.Versions) == 0 {
		return nil, fmt.Errorf("%s has no version", File)
	}
	return crd.Spec.Versions[0].Schema.OpenAPIV3Schema, nil
}

// At is the node at path: field names joined by dots, "[]" after a list
// for its items ("status.source.snapshots[]"); nil when there is none.
func (s Schema) At(path string) Schema {
	node := s
	for _, part := range strings.Split(path, ".") {
		name, items := strings.CutSuffix(part, "[]")
		node = node.child(name)
		if items {
			node = node.items()
		}
		if node == nil {
			return nil
		}
	}
	return node
}

// Int is the node's integer keyword (maxLength, maxItems), and whether
// it has it.
func (s Schema) Int(keyword string) (int, bool) {
	v, ok := s[keyword].(float64) // as JSON numbers decode
	return int(v), ok
}

func (s Schema) child(name string) Schema {
	props, _ := s["properties"].(map[string]any)
	c, _ := props[name].(map[string]any)
	return c
}

func (s Schema) items() Schema {
	c, _ := s["items"].(map[string]any)
	return c
}

// Value is a string of a value, where it is and what the schema says of it.
type Value struct {
	// Path of the string, as At takes it, with the list indexes:
	// "status.source.disks[2].fileName".
	Path string
	// Schema is the node that describes it; nil when none does.
	Schema Schema
	// Text is the string.
	Text string
}

// Strings lists every string of v (marshaled to JSON) under the node s,
// by path, with the node that describes it. root names v's place in the
// schema ("status").
func (s Schema) Strings(root string, v any) ([]Value, error) {
	doc, err := asJSON(v)
	if err != nil {
		return nil, err
	}
	var out []Value
	walk(root, s.At(root), doc, func(path string, node Schema, x any) {
		if str, ok := x.(string); ok {
			out = append(out, Value{Path: path, Schema: node, Text: str})
		}
	})
	return out, nil
}

// Violations lists, sorted, where v (marshaled to JSON) passes a
// maxLength (in characters, as the API server counts) or a maxItems of
// the schema under root.
func (s Schema) Violations(root string, v any) ([]string, error) {
	doc, err := asJSON(v)
	if err != nil {
		return nil, err
	}
	var out []string
	walk(root, s.At(root), doc, func(path string, node Schema, x any) {
		switch x := x.(type) {
		case string:
			if max, ok := node.Int("maxLength"); ok && utf8.RuneCountInString(x) > max {
				out = append(out, fmt.Sprintf("%s: %d characters, more than maxLength %d", path, utf8.RuneCountInString(x), max))
			}
		case []any:
			if max, ok := node.Int("maxItems"); ok && len(x) > max {
				out = append(out, fmt.Sprintf("%s: %d items, more than maxItems %d", path, len(x), max))
			}
		}
	})
	sort.Strings(out)
	return out, nil
}

// walk calls fn on x and everything in it, with its path and schema node.
func walk(path string, node Schema, x any, fn func(string, Schema, any)) {
	fn(path, node, x)
	switch x := x.(type) {
	case map[string]any:
		for k, v := range x {
			walk(path+"."+k, node.child(k), v, fn)
		}
	case []any:
		for i, v := range x {
			walk(fmt.Sprintf("%s[%d]", path, i), node.items(), v, fn)
		}
	}
}

// asJSON is v as encoding/json reads it back into an any.
func asJSON(v any) (any, error) {
	var doc any
	data, err := json.Marshal(v)
	if err == nil {
		err = json.Unmarshal(data, &doc)
	}
	return doc, err
}
