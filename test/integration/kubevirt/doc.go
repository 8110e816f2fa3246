// Package kubevirt holds the integration tests of the real KubeVirt control
// plane that hack/build-kubevirt.sh builds from KubeVirt's modules: every
// CRD its generators write is Established on the project's real control
// plane, and virt-controller runs as a process against it with a KubeVirt
// CR. The tests need $KUBEVIRT_DIR (the folder the build script prints) and
// skip without it, so `make test-integration` does not build KubeVirt;
// `make test-kubevirt` builds it and runs them:
//
//	TESTBIN_DIR=$(hack/build-testbin.sh | tail -n1) KUBEVIRT_DIR=$(hack/build-kubevirt.sh | tail -n1) \
//	  go test -count=1 -tags integration ./test/integration/kubevirt/
package kubevirt
