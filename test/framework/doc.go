// Package framework runs a real Kubernetes control plane (etcd and
// kube-apiserver, optionally kube-controller-manager) as local processes for
// the project's integration and end-to-end tests, and, on request, a real
// node with it.
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
//
// # The real node
//
// WithNode adds a real node: kube-controller-manager, kube-scheduler,
// containerd (v2, built from modules), runc and the CNI plugins (Debian's),
// the kubelet and kube-proxy, all of the Kubernetes version of the API
// server. Pods run for real, as containers, from images imported into the
// node's containerd (ImportImage; BuildGoImage builds a static Go command
// into an image). It needs root, hack/build-testbin.sh and
// hack/install-node-deps.sh. Suites that do not ask for a node run as
// before, with nothing of it.
//
// Where things live:
//
//   - The node has namespaces of its own, made by `unshare` around process
//     1 of a new PID namespace (the sandbox command, which only waits and
//     reaps): a network namespace, a private mount namespace and the PID
//     namespace, with its own /proc. containerd, the kubelet and kube-proxy
//     are started into them with nsenter; the shims and the pods are their
//     children. When process 1 ends (Stop, or the test binary's death
//     through the parent-death signal and unshare --kill-child), the kernel
//     kills every process of the node, and the network and mount namespaces
//     go with the last of them: nothing of them can outlive the stack.
//   - Network: a veth pair joins the machine's namespace (its end carries
//     HostAddress) and the node's (eth0 carries NodeIP; the kubelet refuses
//     a loopback node IP). Addresses come from 198.18.0.0/15, the range for
//     network device testing: slot i is the link 198.18.i.0/30 and the pods'
//     subnet 198.19.i.0/24, chosen under a lock among those no route of the
//     machine overlaps, so stacks started at once get different ones. The
//     pods live on a CNI bridge inside the node's namespace, which has no
//     default route: nothing a pod sends leaves the machine.
//   - etcd, kube-apiserver, kube-controller-manager and kube-scheduler run in
//     the machine's namespaces. etcd listens on 127.0.0.1; the API server
//     listens on HostAddress and advertises it as the endpoint of the
//     `kubernetes` Service, so pods reach it through the Service (kube-proxy
//     in iptables mode inside the node) as in-cluster clients do, and the
//     kubelet and kube-proxy reach it directly. Servers of the test process
//     (vcsim, webhooks) that bind HostAddress are reachable from pods; the
//     machine reaches the pods' subnet through a route via the node.
//   - Mounts: in the node's mount namespace, /var/lib and /run are seen
//     through overlays whose upper layers are the node's, and folders of the
//     node's are bound over /var/lib/kubelet, /var/lib/cni, /run/containerd
//     and /var/log, the paths the kubelet, containerd and the CNI plugins
//     hard-code; files holding the values the kubelet wants are bound over
//     the six /proc/sys settings it would otherwise change machine-wide. The
//     machine's own folders and settings are never written.
//   - cgroups: the kubelet's cgroupRoot is a folder vmm-node-<owner pid>-<id>
//     at the top of every hierarchy (cgroup v1, as on these machines; on v2
//     the folder gets the root's delegated controllers, which has not been
//     tried), removed deepest first at Stop, or at the start of a later
//     stack when its owner process is gone.
//   - Security: the API server authorizes with Node and RBAC, admits with
//     NodeRestriction and ServiceAccount (pods get projected tokens), and
//     trusts a CA of the node's for the kubelet's and kube-proxy's client
//     certificates, the kubelet's serving certificate and its own kubelet
//     client certificate (logs, exec and port-forward through the API
//     server). The kubelet authenticates and authorizes requests through the
//     API server (webhook). A default StorageClass of `local` volumes
//     (CreateLocalVolume) gives pods real mounted volumes with fsGroup; where
//     /dev/kvm exists, the RuntimeClass kvm offers it to pods.
//   - Cluster DNS: with $COREDNS_DIR set (the folder of the binary
//     hack/build-coredns.sh builds), CoreDNS runs in kube-system as a
//     cluster runs it (dns.go: its image built here, its ServiceAccount,
//     RBAC, Corefile ConfigMap, a restricted Deployment, the kube-dns
//     Service at ClusterDNSIP) and the kubelet's clusterDNS names it; the
//     node is ready once CoreDNS is Available and routed. It answers the
//     cluster's names only (NXDOMAIN for the rest: nothing outside the
//     machine is reachable). Without $COREDNS_DIR the node has no cluster
//     DNS, and the framework says so once.
//
// Stop stops kube-proxy, the kubelet and kube-scheduler by pid, kills and
// deletes every container (so the shims exit), stops containerd and process
// 1 of the node, removes the cgroup folders, then stops the control plane.
// test/framework/cmd/testnode runs the same stack as a command.
package framework
