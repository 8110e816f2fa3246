package framework

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// NodeName is the name of the node the framework runs (each stack has its
// own API server, so the name need not differ between stacks).
const NodeName = "vmm-node"

// NodeStorageClass is the default StorageClass on the node: local
// PersistentVolumes (CreateLocalVolume) that the kubelet mounts, applying
// a pod's fsGroup as it does for a CSI volume.
const NodeStorageClass = "node-local"

// serviceCIDR is the cluster's service range (the API server's
// --service-cluster-ip-range).
const serviceCIDR = "10.0.0.0/24"

// nodeStartTimeout bounds the node's start, from the holder to Ready.
const nodeStartTimeout = 2 * time.Minute

// nodeControllers are the kube-controller-manager controllers a node's
// workloads need, added to those a suite names.
var nodeControllers = []string{
	"job-controller", "replicaset-controller", "deployment-controller", "garbage-collector-controller",
	"serviceaccount-controller", "serviceaccount-token-controller", "root-ca-certificate-publisher-controller",
	"namespace-controller", "endpointslice-controller", "endpointslice-mirroring-controller",
	"persistentvolume-binder-controller", "pod-garbage-collector-controller", "ttl-after-finished-controller",
}

// nodeTools are the machine's commands the node needs, installed by
// hack/install-node-deps.sh.
var nodeTools = []string{"unshare", "nsenter", "ip", "mount", "iptables", runcBinary, filepath.Join(cniBinDir, "bridge"), filepath.Join(cniBinDir, "host-local")}

// node is the real node: its namespaces, network, runtime and kubelet.
type node struct {
	name       string
	dir        string
	cgroupRoot string
	network    *nodeNetwork
	ca         *certAuthority
	kvm        bool
	// privileged lets the API server admit privileged containers
	// (WithPrivilegedPods).
	privileged bool
	// attachments is the Multus stand-in's binary, "" without it
	// (WithNetworkAttachments).
	attachments  string
	sandboxImage string
	sandboxTar   string
	// dns is the node's CoreDNS; nil without cluster DNS.
	dns        *clusterDNS
	holder     *process
	containerd *containerd
	kubelet    *process
	kubeProxy  *process
	scheduler  *process

	apiClientCert, apiClientKey string
	// frontProxyCA signs the API server's front-proxy client certificate
	// (frontProxyCert, frontProxyKey), which aggregated API servers (CDI's
	// cdi-apiserver) trust through extension-apiserver-authentication.
	frontProxyCA                  *certAuthority
	frontProxyCert, frontProxyKey string

	kubeletVersion, containerdVersion string
	// readyIn is how long the node took from containerd's start to Ready.
	readyIn time.Duration
}

// checkNodePrerequisites says what the machine lacks to run a node.
func checkNodePrerequisites(binDir string) error {
	if os.Geteuid() != 0 {
		return errors.New("the node needs root (namespaces, mounts, cgroups)")
	}
	var missing []string
	for _, b := range []string{BinaryKubelet, BinaryKubeProxy, BinaryScheduler, BinaryContainerd, BinaryContainerdRun, BinaryCtr} {
		if fi, err := os.Stat(filepath.Join(binDir, b)); err != nil || fi.Mode()&0o111 == 0 {
			missing = append(missing, filepath.Join(binDir, b)+" (hack/build-testbin.sh)")
		}
	}
	for _, t := range nodeTools {
		if _, err := exec.LookPath(t); err != nil {
			missing = append(missing, t+" (hack/install-node-deps.sh)")
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the node needs: %s", strings.Join(missing, ", "))
	}
	return checkCoreDNS()
}

// prepareNode builds the sandbox image, makes the node's namespaces,
// network, mounts, cgroup root and CA: everything the API server's flags
// depend on. The processes come after the control plane (startNode).
func (e *Environment) prepareNode(ctx context.Context, privileged, attachments bool) error {
	sandbox, err := BuildGoImage(ctx, GoImage{Package: sandboxPackage, Reference: SandboxImage})
	if err != nil {
		return fmt.Errorf("building the sandbox image: %w", err)
	}
	attachmentsBinary := ""
	if attachments {
		a, err := BuildGoImage(ctx, GoImage{Package: attachmentsPackage, Reference: attachmentsImage})
		if err != nil {
			return fmt.Errorf("building the stand-in for Multus: %w", err)
		}
		attachmentsBinary = a.Binary
	}
	id := strings.TrimPrefix(filepath.Base(e.dir), tempDirPrefix)
	n := &node{
		name:         NodeName,
		dir:          filepath.Join(e.dir, "node"),
		cgroupRoot:   cgroupRootName(id),
		privileged:   privileged,
		attachments:  attachmentsBinary,
		sandboxImage: sandbox.Reference,
		sandboxTar:   sandbox.Tarball,
	}
	if _, err := os.Stat("/dev/kvm"); err == nil {
		n.kvm = true
	}
	if n.dns, err = prepareClusterDNS(); err != nil {
		return err
	}
	e.node = n
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", n.dir, err)
	}
	if n.holder, err = e.namespaceHolder(sandbox.Binary); err != nil {
		return err
	}
	if n.network, err = e.setupNetwork(shortID(id), n.holder.pid()); err != nil {
		return err
	}
	// virt-handler (a privileged DaemonSet) needs shared mounts.
	if err := setupMounts(n.holder.pid(), n.dir, n.privileged); err != nil {
		return err
	}
	if err := createCgroupRoot(n.cgroupRoot); err != nil {
		return err
	}
	if n.ca, err = newCertAuthority(filepath.Join(n.dir, "ca.crt"), "vm-migration test node CA"); err != nil {
		return err
	}
	n.apiClientCert, n.apiClientKey, err = n.ca.issue(filepath.Join(n.dir, "apiserver-kubelet-client"), certRequest{
		commonName: "kube-apiserver-kubelet-client", organizations: []string{adminGroup},
	})
	if err != nil {
		return err
	}
	if n.frontProxyCA, err = newCertAuthority(filepath.Join(n.dir, "front-proxy-ca.crt"), "vm-migration test front-proxy CA"); err != nil {
		return err
	}
	n.frontProxyCert, n.frontProxyKey, err = n.frontProxyCA.issue(filepath.Join(n.dir, "front-proxy-client"), certRequest{
		commonName: frontProxyClient,
	})
	return err
}

// frontProxyClient is the name of the API server's front-proxy client
// certificate, the one name aggregated API servers accept.
const frontProxyClient = "front-proxy-client"

// shortID fits the stack's id into an interface name (15 bytes at most).
func shortID(id string) string {
	if len(id) > 10 {
		return id[len(id)-10:]
	}
	return id
}

// apiServerArgs turns the control plane's API server flags into a node's:
// serving on the machine's end of the veth (pods reach it there, and
// through the kubernetes Service, whose endpoint it advertises), Node and
// RBAC authorization, NodeRestriction and ServiceAccount admission (pods
// get projected tokens), client certificates of the node's CA, and the
// kubelet client certificate for logs, exec and port-forward; privileged
// containers are refused unless the environment asked for them
// (WithPrivilegedPods). As in a kubeadm cluster, it proxies to
// aggregated API servers with a front-proxy client certificate and
// request headers, and it reaches them and admission webhooks through the
// Services' endpoints (pod IPs, which the machine routes to the node): the
// machine has no route to Service IPs, which only kube-proxy in the node
// serves.
func (n *node) apiServerArgs(args []string) []string {
	replace := map[string]string{
		"--bind-address":              n.network.hostIP.String(),
		"--advertise-address":         n.network.hostIP.String(),
		"--authorization-mode":        "Node,RBAC",
		"--endpoint-reconciler-type":  "lease",
		"--disable-admission-plugins": "",
		// Nothing on the node needs a privileged container but
		// KubeVirt's virt-handler.
		"--allow-privileged": strconv.FormatBool(n.privileged),
	}
	var out []string
	for _, a := range args {
		flag, _, _ := strings.Cut(a, "=")
		if v, ok := replace[flag]; ok {
			if v != "" {
				out = append(out, flag+"="+v)
			}
			continue
		}
		out = append(out, a)
	}
	return append(out,
		"--enable-admission-plugins=NodeRestriction",
		"--client-ca-file="+n.ca.certPath,
		"--kubelet-client-certificate="+n.apiClientCert,
		"--kubelet-client-key="+n.apiClientKey,
		"--kubelet-certificate-authority="+n.ca.certPath,
		"--kubelet-preferred-address-types=InternalIP",
		"--enable-aggregator-routing=true",
		"--requestheader-client-ca-file="+n.frontProxyCA.certPath,
		"--requestheader-allowed-names="+frontProxyClient,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file="+n.frontProxyCert,
		"--proxy-client-key-file="+n.frontProxyKey,
	)
}

// startNode starts the node's processes once the control plane serves:
// containerd (with the sandbox image, and CoreDNS's, imported),
// kube-scheduler, the kubelet and kube-proxy; it waits for the node to be
// Ready, creates the node's StorageClass and, where /dev/kvm exists, the
// kvm RuntimeClass; then, with cluster DNS, installs CoreDNS and waits
// until its Service answers.
func (e *Environment) startNode(ctx context.Context) error {
	if err := e.startNodeProcesses(ctx); err != nil {
		return err
	}
	n := e.node
	if n.dns == nil {
		return nil
	}
	cs, err := kubernetes.NewForConfig(e.Config())
	if err != nil {
		return fmt.Errorf("creating clientset: %w", err)
	}
	if err := e.startClusterDNS(ctx, cs, n); err != nil {
		return err
	}
	n.readyIn += n.dns.readyIn
	return nil
}

// startNodeProcesses starts the node's processes and waits for it to be
// Ready, within nodeStartTimeout.
func (e *Environment) startNodeProcesses(ctx context.Context) error {
	n := e.node
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, nodeStartTimeout)
	defer cancel()
	if err := e.startContainerd(ctx, n); err != nil {
		return err
	}
	if err := n.containerd.importImage(ctx, n.sandboxTar); err != nil {
		return fmt.Errorf("importing the sandbox image: %w", err)
	}
	if n.dns != nil {
		if err := n.containerd.importImage(ctx, n.dns.tarball); err != nil {
			return fmt.Errorf("importing the CoreDNS image: %w", err)
		}
	}
	if err := e.startScheduler(ctx, n); err != nil {
		return err
	}
	if err := e.startKubelet(ctx, n); err != nil {
		return err
	}
	if err := e.startKubeProxy(n); err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(e.Config())
	if err != nil {
		return fmt.Errorf("creating clientset: %w", err)
	}
	if err := e.waitNodeReady(ctx, cs, n); err != nil {
		return err
	}
	// A pod started before kube-proxy programs the kubernetes Service is
	// refused ("no route to host") when it calls the API server through
	// it, which pods of a real node never see once the node has run a
	// while.
	if err := waitServiceRouted(ctx, n, "default/kubernetes:https cluster IP"); err != nil {
		return err
	}
	n.readyIn = time.Since(start)
	return n.createClasses(ctx, cs)
}

// waitNodeReady waits until the node is Ready and records the versions it
// reports.
func (e *Environment) waitNodeReady(ctx context.Context, cs kubernetes.Interface, n *node) error {
	return waitFor(ctx, n.kubelet, "node "+n.name+" Ready", func() (bool, error) {
		if exited, why := n.kubeProxy.exited(); exited {
			return false, fmt.Errorf("kube-proxy %v; log %s:\n%s", why, n.kubeProxy.logPath, n.kubeProxy.tail(30))
		}
		obj, err := cs.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range obj.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				n.kubeletVersion = obj.Status.NodeInfo.KubeletVersion
				n.containerdVersion = strings.TrimPrefix(obj.Status.NodeInfo.ContainerRuntimeVersion, "containerd://")
				return true, nil
			}
		}
		return false, nil
	})
}

// waitServiceRouted waits until kube-proxy has programmed, in the node,
// each Service port named by a rule comment ("<namespace>/<service>:<port>
// cluster IP") with endpoints to send it to.
func waitServiceRouted(ctx context.Context, n *node, comments ...string) error {
	what := "kube-proxy to route " + strings.Join(comments, ", ")
	return waitFor(ctx, n.kubeProxy, what, func() (bool, error) {
		cmd := inNode(n.holder.pid(), false, "iptables-save", "-t", "nat")
		out, err := exec.CommandContext(ctx, cmd[0], cmd[1:]...).Output()
		if err != nil {
			return false, nil
		}
		routed := 0
		for _, c := range comments {
			for _, line := range strings.Split(string(out), "\n") {
				if strings.Contains(line, `"`+c+`"`) && strings.Contains(line, "-j KUBE-SVC-") {
					routed++
					break
				}
			}
		}
		return routed == len(comments), nil
	})
}

// createClasses creates the node's default StorageClass and, when the
// machine has /dev/kvm, the kvm RuntimeClass.
func (n *node) createClasses(ctx context.Context, cs kubernetes.Interface) error {
	immediate := storagev1.VolumeBindingImmediate
	retain := corev1.PersistentVolumeReclaimRetain
	sc := &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{
			Name:        NodeStorageClass,
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"},
		},
		Provisioner:       "kubernetes.io/no-provisioner",
		ReclaimPolicy:     &retain,
		VolumeBindingMode: &immediate,
	}
	if _, err := cs.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating storage class %s: %w", sc.Name, err)
	}
	if !n.kvm {
		return nil
	}
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: RuntimeClassKVM}, Handler: RuntimeClassKVM}
	if _, err := cs.NodeV1().RuntimeClasses().Create(ctx, rc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating runtime class %s: %w", rc.Name, err)
	}
	return nil
}

// startInNode starts binary in the node's namespaces (network, mount and
// PID) through nsenter, which forks; the process's pid is the binary's.
func (e *Environment) startInNode(n *node, name, binary string, args, env []string) (*process, error) {
	cmdline := inNode(n.holder.pid(), true, append([]string{binary}, args...)...)
	p, err := startProcessEnv(e.spawner, name, cmdline[0], cmdline[1:], e.dir, env)
	if err != nil {
		return nil, err
	}
	if err := p.findInner(binary); err != nil {
		p.stop(time.Second)
		return nil, err
	}
	return p, nil
}

// stopNode stops the node: kube-proxy, the kubelet and the scheduler by
// pid, then every container (so the shims exit), containerd, and the
// namespace holder, whose end takes whatever is left of the node's
// processes, its network namespace, veth and mounts with it; then the
// cgroup folders.
func (n *node) stop() error {
	for _, p := range []*process{n.kubeProxy, n.kubelet, n.scheduler} {
		if p != nil {
			p.stop(stopGrace)
		}
	}
	var errs []error
	if n.containerd != nil && n.containerd.process != nil {
		if ok, _ := n.containerd.process.exited(); !ok {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if err := n.containerd.removeAll(ctx); err != nil {
				errs = append(errs, err)
			}
			cancel()
		}
		n.containerd.process.stop(stopGrace)
	}
	if n.holder != nil {
		n.holder.stop(stopGrace)
	}
	if err := removeCgroupRoot(n.cgroupRoot); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// processes are the node's running processes, in start order.
func (n *node) processes() []*process {
	var ps []*process
	for _, p := range []*process{n.holder, n.containerdProcess(), n.scheduler, n.kubelet, n.kubeProxy} {
		if p != nil {
			ps = append(ps, p)
		}
	}
	return ps
}

func (n *node) containerdProcess() *process {
	if n.containerd == nil {
		return nil
	}
	return n.containerd.process
}

// apiServerNodeStopGrace is how long the API server of a stack with a node
// may take to exit on SIGTERM. Serving a node, it waits for a connection
// to drain until its request timeout (60 s, measured) even after every
// client but the test process has gone; its data is thrown away, so it
// is killed sooner.
const apiServerNodeStopGrace = 2 * time.Second

// stopGrace is how long p may take to exit after SIGTERM.
func (e *Environment) stopGrace(p *process) time.Duration {
	if e.node != nil && p.name == BinaryKubeAPIServer {
		return apiServerNodeStopGrace
	}
	return stopGrace
}

// HasNode reports whether the environment runs a real node (WithNode).
func (e *Environment) HasNode() bool { return e.node != nil }

// NodeName is the node's name; empty without a node.
func (e *Environment) NodeName() string {
	if e.node == nil {
		return ""
	}
	return e.node.name
}

// NodeIP is the node's address (its end of the veth pair).
func (e *Environment) NodeIP() string {
	if e.node == nil {
		return ""
	}
	return e.node.network.nodeIP.String()
}

// HostAddress is the address of the machine's end of the veth pair: the
// API server listens there, and a server in the test process (vcsim, a
// webhook) that binds it is reachable from pods. Without a node it is
// 127.0.0.1.
func (e *Environment) HostAddress() string {
	if e.node == nil {
		return "127.0.0.1"
	}
	return e.node.network.hostIP.String()
}

// PodCIDR is the node's pod subnet.
func (e *Environment) PodCIDR() string {
	if e.node == nil {
		return ""
	}
	return e.node.network.podCIDR.String()
}

// KubeletVersion is the version the node's kubelet reports.
func (e *Environment) KubeletVersion() string {
	if e.node == nil {
		return ""
	}
	return e.node.kubeletVersion
}

// ContainerdVersion is the version of the node's containerd.
func (e *Environment) ContainerdVersion() string {
	if e.node == nil {
		return ""
	}
	return e.node.containerdVersion
}

// ContainerdAddress is the socket of the node's containerd, which the
// machine's ctr reaches (ctr --address ADDRESS --namespace k8s.io images
// import/remove, as ImportImage and RemoveImage do); empty without a node.
func (e *Environment) ContainerdAddress() string {
	if e.node == nil || e.node.containerd == nil {
		return ""
	}
	return e.node.containerd.socket
}

// NodeLine is the one-line summary commands print:
// "real node: <node> kubelet <version> containerd <version>".
func (e *Environment) NodeLine() string {
	return fmt.Sprintf("real node: %s kubelet %s containerd %s", e.NodeName(), e.KubeletVersion(), e.ContainerdVersion())
}

// NodeReadyIn is how long the node took from its runtime's start (the
// control plane serving) to Ready.
func (e *Environment) NodeReadyIn() time.Duration {
	if e.node == nil {
		return 0
	}
	return e.node.readyIn
}

// RuntimeClassKVM is the RuntimeClass that offers /dev/kvm, or empty when
// the machine has none (or there is no node).
func (e *Environment) RuntimeClassKVM() string {
	if e.node == nil || !e.node.kvm {
		return ""
	}
	return RuntimeClassKVM
}

// ImportImage imports an image tarball (docker-archive or OCI, as ctr
// images import takes it) into the node's containerd, where pods with
// imagePullPolicy Never or IfNotPresent find it by its reference.
func (e *Environment) ImportImage(ctx context.Context, tarball string) error {
	if e.node == nil {
		return errors.New("framework: ImportImage needs a node (WithNode)")
	}
	return e.node.containerd.importImage(ctx, tarball)
}

// RemoveImage removes an image from the node's containerd; a pod that
// names it with imagePullPolicy Never then fails with ErrImageNeverPull.
func (e *Environment) RemoveImage(ctx context.Context, ref string) error {
	if e.node == nil {
		return errors.New("framework: RemoveImage needs a node (WithNode)")
	}
	_, err := e.node.containerd.run(ctx, "images", "remove", "--sync", ref)
	return err
}

// NodePIDs are the process ids of the node's processes by name (the
// namespace holder as node-namespaces, containerd, kube-scheduler, kubelet,
// kube-proxy), as the machine numbers them.
func (e *Environment) NodePIDs() map[string]int {
	pids := map[string]int{}
	if e.node == nil {
		return pids
	}
	for _, p := range e.node.processes() {
		pids[p.name] = p.pid()
	}
	return pids
}

// NodeCgroupRoot is the kubelet's cgroupRoot, a folder of this name at the
// top of every cgroup hierarchy.
func (e *Environment) NodeCgroupRoot() string {
	if e.node == nil {
		return ""
	}
	return e.node.cgroupRoot
}

// NodeInterface is the machine's end of the node's veth pair.
func (e *Environment) NodeInterface() string {
	if e.node == nil {
		return ""
	}
	return e.node.network.hostIface
}

// CreateLocalVolume creates a folder and a local PersistentVolume of the
// node's StorageClass on it, with node affinity to the node, for a test
// claim to bind. The folder is under the environment's folder.
func (e *Environment) CreateLocalVolume(ctx context.Context, name, capacity string) (*corev1.PersistentVolume, error) {
	if e.node == nil {
		return nil, errors.New("framework: CreateLocalVolume needs a node (WithNode)")
	}
	dir := filepath.Join(e.dir, "volumes", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	pv, err := LocalPersistentVolume(name, dir, e.node.name, capacity, NodeStorageClass)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(e.Config())
	if err != nil {
		return nil, fmt.Errorf("creating clientset: %w", err)
	}
	return cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
}

// Binary is the path of a binary of the testbin folder (kubectl, ctr...),
// the ones the environment runs.
func (e *Environment) Binary(name string) string {
	return filepath.Join(e.binDir, name)
}
