// Command install-kubevirt installs KubeVirt's control plane, as
// hack/build-kubevirt.sh built it, into a running test cluster (make
// run-local's), its images already imported into the node, and defines
// the Multus networks the migrations name (test/framework/kubevirt):
//
//	install-kubevirt --kubeconfig FILE --kubevirt-dir DIR [--kubevirt-node-dir DIR] [--network default/backend]...
//
// With --kubevirt-node-dir (hack/build-kubevirt-node.sh's folder) it
// installs virt-handler's DaemonSet too. It prints, last, "kubevirt:
// <version> virt-api, virt-controller[, virt-handler] on node <node>",
// and exits 1 with one line on standard error when the install fails.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"platform.example/vm-migration/test/framework/kubevirt"
)

// networks collects the repeatable --network flag.
type networks []string

func (n *networks) String() string     { return strings.Join(*n, ",") }
func (n *networks) Set(v string) error { *n = append(*n, v); return nil }

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "install-kubevirt:", err)
		os.Exit(1)
	}
}

func run() error {
	var kubeconfig, dir, nodeDir string
	var nets networks
	flag.StringVar(&kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "the cluster's kubeconfig")
	flag.StringVar(&dir, "kubevirt-dir", os.Getenv(kubevirt.EnvDir), "hack/build-kubevirt.sh's folder")
	flag.StringVar(&nodeDir, "kubevirt-node-dir", os.Getenv(kubevirt.EnvNodeDir), "hack/build-kubevirt-node.sh's folder: install virt-handler too (its images on the node; the node started with testnode --kubevirt-node)")
	flag.Var(&nets, "network", "a Multus network (namespace/name) to define (repeatable)")
	flag.Parse()
	if kubeconfig == "" || dir == "" {
		return fmt.Errorf("--kubeconfig and --kubevirt-dir (or $KUBECONFIG and $%s) are needed", kubevirt.EnvDir)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("reading %s: %w", kubeconfig, err)
	}
	b, err := kubevirt.LoadBuild(dir)
	if err != nil {
		return err
	}
	var node *kubevirt.NodeBuild
	if nodeDir != "" {
		if node, err = kubevirt.LoadNodeBuild(nodeDir); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 7*time.Minute)
	defer cancel()
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	if err := kubevirt.Install(ctx, cfg, kubevirt.Options{Build: b, Node: node, Logf: logf}); err != nil {
		return err
	}
	for _, n := range nets {
		if err := kubevirt.DefineNetwork(ctx, cfg, n); err != nil {
			return err
		}
	}
	line, err := kubevirt.Summary(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Println("kubevirt: " + line)
	return nil
}
