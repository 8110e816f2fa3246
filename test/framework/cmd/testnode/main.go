// Command testnode starts a real control plane and a real node (the test
// framework's WithNode: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, containerd, kubelet and kube-proxy) and keeps them
// running until SIGINT or SIGTERM, when it tears everything down and exits.
// It needs root, the binaries of hack/build-testbin.sh and the Debian
// packages of hack/install-node-deps.sh.
//
// Once the node is Ready it prints, one per line:
//
//	kubeconfig: <path>
//	real node: <node> kubelet <version> containerd <version>
//	host address: <address pods reach the machine at>
//	cluster DNS: <address> (<CoreDNS image>, kube-dns.kube-system), or off ($COREDNS_DIR unset)
//	ready in <duration> (the node: <duration> after the control plane)
//
// and, with --env-file, writes the same facts as shell variables
// (KUBECONFIG, NODE_NAME, NODE_IP, HOST_ADDRESS, KUBELET_VERSION,
// CONTAINERD_VERSION, RUNTIME_CLASS_KVM, TESTNODE_DIR, CONTAINERD_ADDRESS:
// the node's containerd socket, for ctr; CLUSTER_DNS: the cluster DNS
// address, empty without it) for a script to source. --import
// imports image tarballs into the node's containerd; while it runs,
// hack/local-node.sh imports and removes more.
//
//	go run ./test/framework/cmd/testnode --env-file /tmp/node.env --import _output/image/vm-migration-controller.tar
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"platform.example/vm-migration/test/framework"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "testnode:", err)
		os.Exit(1)
	}
}

type imports []string

func (i *imports) String() string     { return strings.Join(*i, ",") }
func (i *imports) Set(v string) error { *i = append(*i, v); return nil }

func run() error {
	var envFile string
	var kubevirtNode bool
	var crdDirs, tarballs imports
	flag.StringVar(&envFile, "env-file", "", "write the node's facts as shell variables into this file once it is Ready")
	flag.Var(&crdDirs, "crds", "install the CRDs of this folder (repeatable)")
	flag.Var(&tarballs, "import", "import this image tarball into the node's containerd (repeatable)")
	flag.BoolVar(&kubevirtNode, "kubevirt-node", false, "ready the node for KubeVirt's node side: privileged pods (virt-handler's DaemonSet) and the stand-in for Multus")
	flag.Parse()

	// Signals are taken before the start, so one during it tears down too.
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	start := time.Now()
	opts := []framework.Option{framework.WithNode()}
	if kubevirtNode {
		opts = append(opts, framework.WithPrivilegedPods(), framework.WithNetworkAttachments())
	}
	if len(crdDirs) > 0 {
		opts = append(opts, framework.WithCRDs(crdDirs...))
	}
	env, err := framework.Start(opts...)
	if err != nil {
		return err
	}
	defer env.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, t := range tarballs {
		if err := env.ImportImage(ctx, t); err != nil {
			return fmt.Errorf("importing %s: %w", t, err)
		}
	}
	if envFile != "" {
		if err := writeEnvFile(envFile, env); err != nil {
			return err
		}
	}
	dns := "off (" + framework.EnvCoreDNSDir + " unset)"
	if env.ClusterDNS() != "" {
		dns = fmt.Sprintf("%s (%s, %s.%s)", env.ClusterDNS(), env.ClusterDNSImage(), framework.ClusterDNSService, "kube-system")
	}
	fmt.Printf("kubeconfig: %s\n%s\nhost address: %s\ncluster DNS: %s\nready in %s (the node: %s after the control plane)\n", env.KubeconfigPath(), env.NodeLine(), env.HostAddress(),
		dns, time.Since(start).Round(time.Millisecond), env.NodeReadyIn().Round(time.Millisecond))
	sig := <-signals
	fmt.Fprintf(os.Stderr, "testnode: %v: stopping\n", sig)
	stop := time.Now()
	env.Stop()
	fmt.Fprintf(os.Stderr, "testnode: stopped in %s\n", time.Since(stop).Round(time.Millisecond))
	return nil
}

func writeEnvFile(path string, env *framework.Environment) error {
	vars := [][2]string{
		{"KUBECONFIG", env.KubeconfigPath()},
		{"NODE_NAME", env.NodeName()},
		{"NODE_IP", env.NodeIP()},
		{"HOST_ADDRESS", env.HostAddress()},
		{"KUBELET_VERSION", env.KubeletVersion()},
		{"CONTAINERD_VERSION", env.ContainerdVersion()},
		{"RUNTIME_CLASS_KVM", env.RuntimeClassKVM()},
		{"TESTNODE_DIR", env.Dir()},
		{"CONTAINERD_ADDRESS", env.ContainerdAddress()},
		{"CLUSTER_DNS", env.ClusterDNS()},
	}
	var b strings.Builder
	for _, v := range vars {
		fmt.Fprintf(&b, "%s='%s'\n", v[0], strings.ReplaceAll(v[1], "'", `'\''`))
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return os.Rename(tmp, path)
}
