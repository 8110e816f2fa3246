// Package controlplane tests test/framework itself with
// kube-controller-manager: the Job controller and the garbage collector the
// e2e tests rely on, and the framework's process handling.
package controlplane
