//go:build tools

// Package tools records the KubeVirt commands hack/build-kubevirt.sh builds,
// so that `go mod tidy` keeps their dependencies in this module's go.mod and
// go.sum.
package tools

import (
	_ "kubevirt.io/kubevirt/cmd/virt-api"
	_ "kubevirt.io/kubevirt/cmd/virt-controller"
	_ "kubevirt.io/kubevirt/cmd/virt-operator"
)
