// Command standins runs the SIMULATED cluster actors of package standins
// (kubelet, storage, CDI, KubeVirt, and KubeVirt's and CDI's admission
// webhooks) against an API server, for hack/run-local.sh:
//
//	standins --kubeconfig FILE --root DIR --transfer-image IMAGE --transfer-binary PATH
//
// It runs until SIGINT or SIGTERM, then stops every transfer process it
// started and unregisters its webhooks. See the package documentation for
// what is simulated and which rules of the real components it enforces.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
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
	fs.StringVar(&cfg.NodeName, "node-name", standins.DefaultNodeName, "name of the simulated node")
	fs.StringVar(&cfg.TransferImage, "transfer-image", "", "image whose pods run --transfer-binary")
	fs.StringVar(&cfg.TransferBinary, "transfer-binary", "", "path of a built vm-transfer")
	fs.DurationVar(&cfg.ConversionDuration, "conversion-duration", 0, "how long a simulated conversion takes")
	fs.Int64Var(&cfg.CloneBytesPerSecond, "clone-bytes-per-second", 0, "throttle of the simulated CDI clone (0: none)")
	fs.DurationVar(&cfg.VMIStartDelay, "vmi-start-delay", 0, "how long a simulated VMI stays Scheduling")
	fs.BoolVar(&cfg.Light, "light", false, "control-plane benchmark mode: transfer pods end at once with a complete result, clones complete at once; no bytes move")
	fs.IntVar(&cfg.Workers, "workers", 0, "keys each stand-in works on at once (0: each one's default)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if kubeconfig == "" || cfg.Root == "" || cfg.TransferImage == "" || cfg.TransferBinary == "" {
		return errors.New("--kubeconfig, --root, --transfer-image and --transfer-binary are required")
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("loading %s: %w", kubeconfig, err)
	}
	cfg.RestConfig = rc
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	klog.Info("simulated kubelet, storage, CDI, KubeVirt and their webhooks starting", "node", cfg.NodeName, "root", cfg.Root)
	return standins.Run(ctx, cfg)
}
