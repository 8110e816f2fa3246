// Command standins runs the SIMULATED cluster actors of package standins
// (storage, CDI, KubeVirt, and KubeVirt's and CDI's admission webhooks)
// against an API server with a real node, for hack/run-local.sh:
//
//	standins --kubeconfig FILE --root DIR --local-volume-node NODE [--launcher-image REF] [--real-kubevirt] [--real-cdi --real-provisioners P]
//
// It runs until SIGINT or SIGTERM, then unregisters its webhooks. See the package documentation for
// what is simulated and which rules of the real components it enforces.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"platform.example/vm-migration/test/standins"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "standins:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		kubeconfig string
		cfg        standins.Config
	)
	fs := flag.NewFlagSet("standins", flag.ContinueOnError)
	klog.InitFlags(fs)
	fs.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of an administrator")
	fs.StringVar(&cfg.Root, "root", "", "directory for the simulated volumes and pods")
	fs.StringVar(&cfg.Namespace, "namespace", "", "only this namespace (empty: all)")
	fs.StringVar(&cfg.LocalVolumeNode, "local-volume-node", "", "the real node whose kubelet mounts the storage stand-in's local volumes (empty: hostPath volumes)")
	fs.StringVar(&cfg.NodeName, "node-name", "", "node the KubeVirt stand-in reports instances on (empty: --local-volume-node)")
	fs.Int64Var(&cfg.CloneBytesPerSecond, "clone-bytes-per-second", 0, "throttle of the simulated CDI clone (0: none)")
	fs.DurationVar(&cfg.VMIStartDelay, "vmi-start-delay", 0, "how long a VMI stays Scheduling before its launcher pod is created")
	fs.BoolVar(&cfg.RealKubeVirtNode, "real-kubevirt-node", false, "KubeVirt's node side runs too (virt-handler, the real virt-launcher): no KubeVirt stand-in at all")
	fs.BoolVar(&cfg.RealKubeVirt, "real-kubevirt", false, "KubeVirt's own virt-api and virt-controller run (install-kubevirt): play virt-handler only, for the launcher pods virt-controller renders")
	fs.BoolVar(&cfg.RealCDI, "real-cdi", false, "CDI's own controller, apiserver and uploadproxy run (install-cdi): serve no DataVolume webhook, import nothing")
	var realProvisioners string
	fs.StringVar(&realProvisioners, "real-provisioners", "", "comma-separated provisioners of real storage beside the stand-in, whose classes' claims it leaves alone (install-cdi installs rancher.io/local-path)")
	fs.StringVar(&cfg.LauncherImage, "launcher-image", "", "launcher image (test/images) to run each VMI's guest with in a pod on the node (empty: VMIs are marked Running, no guest runs)")
	fs.StringVar(&cfg.LauncherRuntimeClass, "launcher-runtime-class", "", "RuntimeClass offering /dev/kvm to launcher pods (empty: TCG)")
	fs.BoolVar(&cfg.Light, "light", false, "control-plane benchmark mode: clones complete at once; no bytes move")
	fs.IntVar(&cfg.Workers, "workers", 0, "keys each stand-in works on at once (0: each one's default)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if realProvisioners != "" {
		cfg.RealProvisioners = strings.Split(realProvisioners, ",")
	}
	if kubeconfig == "" || cfg.Root == "" {
		return errors.New("--kubeconfig and --root are required")
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("loading %s: %w", kubeconfig, err)
	}
	cfg.RestConfig = rc
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	klog.InfoS("Simulated storage, CDI, KubeVirt and their webhooks starting", "node", cfg.LocalVolumeNode, "root", cfg.Root)
	return standins.Run(ctx, cfg)
}
