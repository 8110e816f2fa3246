//go:build tools

// Package tools records the CoreDNS command hack/build-coredns.sh builds
// (upstream's main package with its default plugin set), so that
// `go mod tidy` keeps its dependencies in this module's go.mod and go.sum.
package tools

import (
	_ "github.com/coredns/coredns"
)
