// Command migration-controller runs the VirtualMachineMigration controller:
// it migrates VMware vSphere VMs into KubeVirt, one VirtualMachineMigration
// at a time per key, through a resumable state machine.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"platform.example/vm-migration/pkg/manager"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/transfer/wire"
)

type flags struct {
	kubeconfig         string
	opts               manager.Options
	leaderElect        bool
	leaseNamespace     string
	leaseName          string
	metricsAddr        string
	healthAddr         string
	vsphereCallTimeout time.Duration
	seccompProfile     string
	transferStreams    int
	hostConnections    int
}

func parseFlags(args []string) (*flags, error) {
	f := &flags{}
	fs := flag.NewFlagSet("migration-controller", flag.ContinueOnError)
	klog.InitFlags(fs)
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "path to a kubeconfig; empty means in-cluster, then $KUBECONFIG")
	addNamespaceFlags(fs, &f.opts.Namespaces)
	fs.IntVar(&f.opts.Workers, "workers", 4, "migrations reconciled in parallel")
	fs.IntVar(&f.opts.MaxTransfersPerHost, "max-transfers-per-host", 4, "concurrent transfers from one ESXi host (0: no bound)")
	fs.IntVar(&f.opts.MaxTransfersPerDatastore, "max-transfers-per-datastore", 0, "concurrent transfers from one datastore (0: no bound)")
	fs.DurationVar(&f.vsphereCallTimeout, "vsphere-call-timeout", 2*time.Minute, "deadline of each vSphere operation")
	fs.DurationVar(&f.opts.Decisions.PollInterval, "poll-interval", statemachine.DefaultPollInterval, "how often vSphere and running jobs are looked at")
	fs.DurationVar(&f.opts.Decisions.WaitInterval, "wait-interval", statemachine.DefaultWaitInterval, "how often a waiting migration is looked at")
	fs.StringVar(&f.opts.Pipeline.TransferImage, "transfer-image", "vm-migration-controller:latest", "image of the transfer Jobs: the controller's own image, which carries vm-transfer")
	fs.StringVar(&f.opts.Pipeline.ConversionImage, "conversion-image", "", "default virt-v2v image of the conversion Jobs, for migrations without spec.conversion.image")
	fs.Func("allowed-conversion-images", "comma-separated patterns (path.Match, e.g. registry.example.com/v2v/*) a migration's own spec.conversion.image must match; the default image is always allowed, no other without this flag",
		func(v string) error {
			for _, p := range strings.Split(v, ",") {
				if p = strings.TrimSpace(p); p != "" {
					if _, err := path.Match(p, ""); err != nil {
						return fmt.Errorf("pattern %q: %w", p, err)
					}
					f.opts.AllowedConversionImages = append(f.opts.AllowedConversionImages, p)
				}
			}
			return nil
		})
	fs.IntVar(&f.transferStreams, "transfer-streams", wire.DefaultStreamsPerDisk, "most Range connections a transfer reads one disk with (the per-host budget may allow fewer)")
	fs.IntVar(&f.hostConnections, "transfer-connections-per-host", wire.DefaultHostConnections, "datastore connections all transfers from one ESXi host may hold at once, their SOAP sessions included; with --max-transfers-per-host it sets the streams per disk")
	fs.BoolVar(&f.opts.Pipeline.TransferProgress, "transfer-progress", true, "give each transfer attempt a progress ConfigMap it may patch (through its own ServiceAccount and Role) for live progress")
	fs.BoolVar(&f.opts.Pipeline.ConversionKVM, "conversion-kvm", false, "request /dev/kvm (devices.kubevirt.io/kvm) for the conversion Jobs")
	fs.StringVar(&f.seccompProfile, "conversion-seccomp-profile", "", "Localhost seccomp profile for conversion pods whose libguestfs runs passt (empty: RuntimeDefault)")
	fs.BoolVar(&f.leaderElect, "leader-elect", false, "elect a leader among replicas with a Lease")
	fs.StringVar(&f.leaseNamespace, "leader-election-namespace", "vm-migration-system", "namespace of the leader election Lease")
	fs.StringVar(&f.leaseName, "leader-election-id", "vm-migration-controller", "name of the leader election Lease")
	fs.StringVar(&f.metricsAddr, "metrics-bind-address", ":8080", "address of /metrics (empty: off)")
	fs.StringVar(&f.healthAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz (empty: off)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if f.opts.Workers < 1 {
		return nil, fmt.Errorf("--workers must be at least 1, got %d", f.opts.Workers)
	}
	if f.opts.MaxTransfersPerHost < 0 || f.opts.MaxTransfersPerDatastore < 0 {
		return nil, errors.New("--max-transfers-per-host and --max-transfers-per-datastore must not be negative")
	}
	if f.transferStreams < 1 || f.hostConnections < 1 {
		return nil, errors.New("--transfer-streams and --transfer-connections-per-host must be at least 1")
	}
	f.opts.Pipeline.TransferStreams = wire.StreamsPerDisk(f.transferStreams, f.hostConnections, f.opts.MaxTransfersPerHost, wire.DefaultParallelDisks)
	f.opts.VSphereCallTimeout = f.vsphereCallTimeout
	if f.opts.Pipeline.TransferImage == "" {
		return nil, errors.New("--transfer-image must name the controller's image")
	}
	if f.seccompProfile != "" {
		profile := f.seccompProfile
		f.opts.Pipeline.ConversionSeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: &profile}
	}
	return f, nil
}

func main() {
	f, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "migration-controller:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, f); err != nil {
		fmt.Fprintln(os.Stderr, "migration-controller:", err)
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		if cfg, err := rest.InClusterConfig(); err == nil {
			return cfg, nil
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	return cfg, nil
}

func run(ctx context.Context, f *flags) error {
	logger := klog.FromContext(ctx)
	cfg, err := restConfig(f.kubeconfig)
	if err != nil {
		return err
	}
	cfg.UserAgent = "vm-migration-controller"

	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	f.opts.Registerer = registry
	var ready atomic.Bool
	readyCh := make(chan struct{})
	f.opts.Ready = readyCh
	go func() {
		select {
		case <-readyCh:
			ready.Store(true)
		case <-ctx.Done():
		}
	}()
	servers, err := startServers(ctx, f, registry, &ready)
	if err != nil {
		return err
	}
	defer shutdownServers(servers)

	if !f.leaderElect {
		return manager.Run(ctx, cfg, f.opts)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building kubernetes client: %w", err)
	}
	id, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("reading hostname for the leader election identity: %w", err)
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: f.leaseNamespace, Name: f.leaseName},
		Client:     kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	var runErr error
	leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
		Lock:            lock,
		ReleaseOnCancel: true,
		LeaseDuration:   15 * time.Second,
		RenewDeadline:   10 * time.Second,
		RetryPeriod:     2 * time.Second,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				runErr = manager.Run(ctx, cfg, f.opts)
			},
			OnStoppedLeading: func() { logger.Info("leadership lost or released", "identity", id) },
		},
	})
	return runErr
}

func startServers(ctx context.Context, f *flags, registry *prometheus.Registry, ready *atomic.Bool) ([]*http.Server, error) {
	var servers []*http.Server
	if f.metricsAddr != "" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
		servers = append(servers, &http.Server{Addr: f.metricsAddr, Handler: mux, ReadHeaderTimeout: 5 * time.Second})
	}
	if f.healthAddr != "" {
		mux := http.NewServeMux()
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
		mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
			if !ready.Load() && f.leaderElect {
				// A standby replica is ready to take over: it serves.
				_, _ = w.Write([]byte("ok (standby)"))
				return
			}
			if !ready.Load() {
				http.Error(w, "caches not synced", http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write([]byte("ok"))
		})
		servers = append(servers, &http.Server{Addr: f.healthAddr, Handler: mux, ReadHeaderTimeout: 5 * time.Second})
	}
	for _, s := range servers {
		errCh := make(chan error, 1)
		go func() { errCh <- s.ListenAndServe() }()
		select {
		case err := <-errCh:
			shutdownServers(servers)
			return nil, fmt.Errorf("serving on %s: %w", s.Addr, err)
		case <-time.After(100 * time.Millisecond):
		}
		klog.FromContext(ctx).Info("serving", "address", s.Addr)
	}
	return servers, nil
}

func shutdownServers(servers []*http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range servers {
		_ = s.Shutdown(ctx)
	}
}
