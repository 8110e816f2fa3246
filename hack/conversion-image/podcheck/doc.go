// Package podcheck runs a container of a pod the controller renders (the
// conversion pod) with runc, from an image built here, the way a kubelet
// and containerd would run it, without a node: the image's layers unpacked
// into a root file system, an OCI runtime bundle whose config.json is made
// from the pod spec (user and group, fsGroup as a supplementary group,
// read-only root, no capabilities, no new privileges, the pod's volumes as
// bind mounts with fsGroup applied, the termination-message file, the
// container's environment over the image's, its CPU and memory limits as
// a cgroup, new PID, network, IPC, UTS and mount namespaces), optionally
// /dev/kvm as the test node's "kvm" RuntimeClass offers it (mode 0666).
//
// What it does not reproduce: containerd's RuntimeDefault seccomp profile
// (a filter refusing the system calls of that profile a conversion could
// reach stands in for it: namespaces, mounts, keyrings, BPF, tracing,
// modules), AppArmor (the test node disables it), the pod network and the
// image pull. The real node (test/framework) runs the same pods for real.
//
// The conversion-tagged test (podcheck_test.go) converts the real BIOS
// Debian guest with the image of make conversion-image and the pod's own
// script and domain XML, then boots the result:
//
//	hack/conversion-image/check.sh
package podcheck
