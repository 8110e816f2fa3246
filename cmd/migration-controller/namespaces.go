package main

import (
	"flag"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// addNamespaceFlags defines --namespaces and its one-namespace alias
// --namespace, which both add to namespaces.
func addNamespaceFlags(fs *flag.FlagSet, namespaces *[]string) {
	fs.Func("namespaces", "comma-separated namespaces to watch, each with the Roles of manifests/overlays/namespaced; none means all namespaces (the cluster-wide install)",
		namespacesFlag(namespaces))
	fs.Func("namespace", "one namespace to watch: the same as --namespaces", namespacesFlag(namespaces))
}

// namespacesFlag parses --namespaces (and its one-namespace alias
// --namespace) into namespaces: comma-separated namespace names, each
// added once it is a valid name; empty entries are skipped. A flag given
// twice adds to the list.
func namespacesFlag(namespaces *[]string) func(string) error {
	return func(v string) error {
		for _, ns := range strings.Split(v, ",") {
			if ns = strings.TrimSpace(ns); ns == "" {
				continue
			}
			if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
				return fmt.Errorf("%q is not a namespace name: %s", ns, strings.Join(errs, "; "))
			}
			*namespaces = append(*namespaces, ns)
		}
		return nil
	}
}
