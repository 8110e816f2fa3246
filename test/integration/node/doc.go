// Package node holds the integration tests of the test framework's real
// node (framework.WithNode): pods from images built here run under
// PodSecurity restricted with real volumes, reach the API server through
// the kubernetes Service and servers of the test process at the host
// address; images that were never imported fail as on a real cluster;
// pods resolve Services through the cluster DNS (CoreDNS; the tests of it
// skip without $COREDNS_DIR); and a stopped stack leaves no process,
// namespace, veth, mount or cgroup behind. They need root,
// hack/build-testbin.sh, hack/build-coredns.sh and
// hack/install-node-deps.sh:
//
//	TESTBIN_DIR=$PWD/_output/testbin COREDNS_DIR=$PWD/_output/coredns go test -tags integration ./test/integration/node/
package node
