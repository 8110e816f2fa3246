// Package framework runs a real Kubernetes control plane (etcd and
// kube-apiserver, optionally kube-controller-manager) as local processes for
// the project's integration and end-to-end tests.
//
// A test package starts one shared control plane from its TestMain:
//
//	func TestMain(m *testing.M) {
//		framework.Run(m, framework.WithCRDs(framework.RepoPath("manifests/crd")))
//	}
//
// and each test takes it with Env, which skips the test when the binaries
// were not built (and CI is not set), and a fresh namespace with
// Environment.Namespace.
//
// The binaries come from $TESTBIN_DIR, or from the repository's
// _output/testbin, which hack/build-testbin.sh fills. Every process runs in
// its own process group and is killed by pid when the suite ends, fails or
// is interrupted; the kernel kills them too (parent-death signal) if the test
// binary dies without running its cleanup, for example on a panic or a test
// timeout.
package framework
