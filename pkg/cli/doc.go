// Package cli is kubectl-vmm, the kubectl plugin for VirtualMachineMigrations:
// list and get (with live per-disk progress), create, approve, pause,
// resume, cancel, describe and plan. It follows kubectl's conventions: the
// kubeconfig, context and namespace flags of k8s.io/cli-runtime, -o
// yaml|json|name|wide, --watch, errors on stderr as one line and exit code 1.
//
// Commands read and write through the generated migration clientset and the
// Kubernetes clientset a Factory returns, so tests run them against fake
// clientsets; what they print is rendered by pure functions of the
// migration and the current time, tested against golden files.
package cli
