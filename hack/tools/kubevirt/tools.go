//go:build tools

// Package tools records the KubeVirt commands hack/build-kubevirt.sh (the
// control plane) and hack/build-kubevirt-node.sh (the node side) build,
// so that `go mod tidy` keeps their dependencies in this module's go.mod and
// go.sum.
package tools

import (
	_ "kubevirt.io/kubevirt/cmd/virt-api"
	_ "kubevirt.io/kubevirt/cmd/virt-chroot"
	_ "kubevirt.io/kubevirt/cmd/virt-controller"
	_ "kubevirt.io/kubevirt/cmd/virt-freezer"
	_ "kubevirt.io/kubevirt/cmd/virt-handler"
	_ "kubevirt.io/kubevirt/cmd/virt-launcher"
	_ "kubevirt.io/kubevirt/cmd/virt-launcher-monitor"
	_ "kubevirt.io/kubevirt/cmd/virt-operator"
	_ "kubevirt.io/kubevirt/cmd/virt-probe"
	_ "kubevirt.io/kubevirt/cmd/virt-tail"
)
