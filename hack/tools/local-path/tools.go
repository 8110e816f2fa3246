//go:build tools

// Package tools pins Rancher's local-path-provisioner, the dynamic
// provisioner of the test node's real storage, built by
// hack/build-local-path.sh from the Go module proxy. A module of its own
// keeps its dependencies out of the project's go.mod.
package tools

import _ "github.com/rancher/local-path-provisioner"
