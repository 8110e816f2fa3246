//go:build tools

// Package tools records the CDI commands hack/build-cdi.sh builds, so that
// `go mod tidy` keeps their dependencies in this module's go.mod and go.sum.
package tools

import (
	_ "kubevirt.io/containerized-data-importer/cmd/cdi-apiserver"
	_ "kubevirt.io/containerized-data-importer/cmd/cdi-cloner"
	_ "kubevirt.io/containerized-data-importer/cmd/cdi-controller"
	_ "kubevirt.io/containerized-data-importer/cmd/cdi-importer"
	_ "kubevirt.io/containerized-data-importer/cmd/cdi-uploadproxy"
	_ "kubevirt.io/containerized-data-importer/cmd/cdi-uploadserver"
)
