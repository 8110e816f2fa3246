// Package integration holds the project's integration tests: the
// VirtualMachineMigration CRD's validation and defaults, its status
// subresource and printer columns, the controller's RBAC, and the controller
// against a real kube-apiserver and etcd started by test/framework.
//
// The tests build only with the integration tag:
//
//	make test-integration
//	TESTBIN_DIR=$PWD/_output/testbin go test -tags integration ./test/integration/...
package integration
