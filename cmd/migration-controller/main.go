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
	"net/http/pprof"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // the json log format
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
	profiling          bool
	healthAddr         string
	vsphereCallTimeout time.Duration
	conversion         conversionFlags
	pods               podFlags
	transferStreams    int
	hostConnections    int
	apiQPS             float64
	apiBurst           int
	logging            *logsapi.LoggingConfiguration
}

// Defaults of the client rate limit, one token bucket that all the
// controller's API clients share (manager.NewClients), so that
// --kube-api-qps and --kube-api-burst bound the controller as a whole (five
// buckets of 50 and 100, one per client, let it send 250 a second). A migration sends about 60 to 90 requests over its
// life, most in Validating and the copy (make bench-scale measured 54
// before the dry run and image proofs of Validating, which add up to about
// 25 more), so a wave of N needs at least N*75/QPS seconds of API time: a
// thousand take 12.5 minutes at 100 QPS; client-go's own 5 QPS and burst 10
// held a thousand migrations back for hours. 100 QPS leaves the API server
// room: kube-apiserver's default --max-requests-inflight 400 and
// --max-mutating-requests-inflight 200 make 600 seats under API Priority
// and Fairness, of which the built-in workload-low level (every
// ServiceAccount without a FlowSchema of its own, nominalConcurrencyShares
// 100 of 245) holds 245 and workload-high (40) 98, while 100 requests a
// second at bench-scale's 31 ms median round trip hold 3 seats (26 at its
// 261 ms p99); manifests/flowcontrol.yaml gives the controller 46 seats of
// its own. The burst of 200, two seconds' worth, absorbs the requests of
// migrations created together (each one's dry run sends one request per
// object) and stays below the 300 requests one flow may queue in that
// priority level, so that a whole burst from one namespace waits there
// rather than being refused.
const (
	defaultAPIQPS   = 100
	defaultAPIBurst = 200
)

func parseFlags(args []string) (*flags, error) {
	f := &flags{logging: logsapi.NewLoggingConfiguration()}
	fs := flag.NewFlagSet("migration-controller", flag.ContinueOnError)
	// -v, --vmodule, --logging-format and the split-stream options of
	// k8s.io/component-base; --log-format is the short name of the format.
	logsapi.AddGoFlags(f.logging, fs)
	fs.StringVar(&f.logging.Format, "log-format", logsapi.DefaultLogFormat, `log format: "text" (klog's) or "json" (one JSON object a line)`)
	f.controllerFlags(fs)
	f.pipelineFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	return f, f.complete()
}

// controllerFlags are the flags of the controller process: its cluster,
// its workers and limits, leader election and the probes.
func (f *flags) controllerFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "path to a kubeconfig; empty means in-cluster, then $KUBECONFIG")
	addNamespaceFlags(fs, &f.opts.Namespaces)
	fs.IntVar(&f.opts.Workers, "workers", 4, "migrations reconciled in parallel")
	fs.Float64Var(&f.apiQPS, "kube-api-qps", defaultAPIQPS, "requests per second the controller may send to the API server on average, all its clients together (client-side rate limit; a migration sends about 60-90 over its life, so a wave of N needs N*75/QPS seconds of API time at least; raise it with the shares of manifests/flowcontrol.yaml's priority level)")
	fs.IntVar(&f.apiBurst, "kube-api-burst", defaultAPIBurst, "requests the controller, all its clients together, may send at once before --kube-api-qps paces them (keep it below the 300 requests one flow may queue in manifests/flowcontrol.yaml's priority level)")
	fs.IntVar(&f.opts.MaxTransfersPerHost, "max-transfers-per-host", 4, "concurrent transfers from one ESXi host (0: no bound)")
	fs.IntVar(&f.opts.MaxTransfersPerDatastore, "max-transfers-per-datastore", 0, "concurrent transfers from one datastore (0: no bound)")
	fs.DurationVar(&f.vsphereCallTimeout, "vsphere-call-timeout", 2*time.Minute, "deadline of each vSphere operation")
	fs.IntVar(&f.opts.VSphereOperationsPerEndpoint, "vsphere-operations-per-endpoint", 0, "vSphere operations (each holds a worker) run against one endpoint at once; more are refused and looked at again a moment later (0: --workers minus one, at least 1, so that one endpoint that stalls never holds every worker)")
	fs.DurationVar(&f.opts.Decisions.PollInterval, "poll-interval", statemachine.DefaultPollInterval, "how often vSphere and running jobs are looked at")
	fs.DurationVar(&f.opts.Decisions.WaitInterval, "wait-interval", statemachine.DefaultWaitInterval, "how often a waiting migration is looked at")
	fs.DurationVar(&f.opts.Decisions.VerificationMaxAge, "verification-max-age", statemachine.DefaultVerificationMaxAge, "how long before the target VM is started its disks may have been read back by the verification; a start that comes later (the VM's creation held, a pause) reads them back again first")
	fs.DurationVar(&f.opts.DefaultTTLAfterFinished, "default-ttl-after-finished", 0, "delete a finished migration this long after it finished, when its spec.ttlSecondsAfterFinished is unset, keeping what it produced and recording its evidence in an event and the log first (0: keep finished migrations until deleted)")
	fs.BoolVar(&f.leaderElect, "leader-elect", true, "elect a leader among replicas with a Lease; only the leader acts (false: act at once, for a single copy only)")
	fs.StringVar(&f.leaseNamespace, "leader-election-namespace", "vm-migration-system", "namespace of the leader election Lease")
	fs.StringVar(&f.leaseName, "leader-election-id", "vm-migration-controller", "name of the leader election Lease")
	fs.StringVar(&f.metricsAddr, "metrics-bind-address", ":8080", "address of /metrics (empty: off)")
	fs.BoolVar(&f.profiling, "profiling", false, "also serve Go's profiles (/debug/pprof/) on the metrics address: heap, CPU, goroutines (off by default: they are not for everyone who can reach /metrics)")
	fs.StringVar(&f.healthAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz (empty: off)")
}

// pipelineFlags are the flags of what the controller runs: the transfer
// and conversion Jobs.
func (f *flags) pipelineFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.opts.Pipeline.TransferImage, "transfer-image", "", "image of the transfer Jobs, which carries vm-transfer (empty: the image the controller itself runs from, read from its own Pod named by POD_NAME and POD_NAMESPACE)")
	fs.IntVar(&f.transferStreams, "transfer-streams", wire.DefaultStreamsPerDisk, "most Range connections a transfer reads one disk with (the per-host budget may allow fewer)")
	fs.IntVar(&f.hostConnections, "transfer-connections-per-host", wire.DefaultHostConnections, "datastore connections all transfers from one ESXi host may hold at once, their SOAP sessions included; with --max-transfers-per-host it sets the streams per disk")
	fs.BoolVar(&f.opts.Pipeline.TransferProgress, "transfer-progress", true, "give each transfer attempt a progress ConfigMap it may patch (through its own ServiceAccount and Role) for live progress")
	f.addConversionFlags(fs)
	f.addPodFlags(fs)
}

// complete checks the flags together and derives the options.
func (f *flags) complete() error {
	if errs := logsapi.Validate(f.logging, nil, nil); len(errs) > 0 {
		return fmt.Errorf("--log-format and the logging flags: %w", errs.ToAggregate())
	}
	switch {
	case f.opts.Workers < 1:
		return fmt.Errorf("--workers must be at least 1, got %d", f.opts.Workers)
	case f.opts.MaxTransfersPerHost < 0 || f.opts.MaxTransfersPerDatastore < 0:
		return errors.New("--max-transfers-per-host and --max-transfers-per-datastore must not be negative")
	case f.transferStreams < 1 || f.hostConnections < 1:
		return errors.New("--transfer-streams and --transfer-connections-per-host must be at least 1")
	case f.opts.Decisions.VerificationMaxAge < time.Minute:
		return fmt.Errorf("--verification-max-age must be at least 1m, got %s", f.opts.Decisions.VerificationMaxAge)
	case f.opts.DefaultTTLAfterFinished < 0:
		return fmt.Errorf("--default-ttl-after-finished must not be negative, got %s", f.opts.DefaultTTLAfterFinished)
	case f.apiQPS <= 0 || f.apiBurst < 1:
		return fmt.Errorf("--kube-api-qps must be positive and --kube-api-burst at least 1, got %g and %d", f.apiQPS, f.apiBurst)
	}
	f.opts.Pipeline.TransferStreams = wire.StreamsPerDisk(f.transferStreams, f.hostConnections, f.opts.MaxTransfersPerHost, wire.DefaultParallelDisks)
	f.opts.VSphereCallTimeout = f.vsphereCallTimeout
	if err := f.completePods(); err != nil {
		return err
	}
	return f.completeConversion()
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
	if err := logsapi.ValidateAndApply(f.logging, nil); err != nil {
		fmt.Fprintln(os.Stderr, "migration-controller:", err)
		os.Exit(2)
	}
	applySoftMemoryLimit()
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

// limitClients sets the client-side rate limit of cfg: manager.Run's
// clients share one token bucket of that size; the client of leader
// election and the one that reads the controller's own Pod, built from cfg
// alone, each get a bucket of their own, so that throttling never delays a
// Lease renewal.
func (f *flags) limitClients(cfg *rest.Config) {
	cfg.QPS, cfg.Burst = float32(f.apiQPS), f.apiBurst
}

func run(ctx context.Context, f *flags) error {
	cfg, err := restConfig(f.kubeconfig)
	if err != nil {
		return err
	}
	cfg.UserAgent = "vm-migration-controller"
	f.limitClients(cfg)
	if f.opts.Pipeline.TransferImage == "" {
		kube, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return fmt.Errorf("building kubernetes client: %w", err)
		}
		if f.opts.Pipeline.TransferImage, err = ownImage(ctx, kube, os.Getenv); err != nil {
			return err
		}
		klog.InfoS("Transfer image is the controller's own", "image", f.opts.Pipeline.TransferImage)
	}

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
	h := &health{}
	servers, err := startServers(ctx, f, registry, &ready, h)
	if err != nil {
		return err
	}
	defer shutdownServers(servers)

	loop := func(ctx context.Context) error { return manager.Run(ctx, cfg, f.opts) }
	if !f.leaderElect {
		return runAlone(ctx, loop, h)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building kubernetes client: %w", err)
	}
	ec, err := electionConfig(f, kube, h)
	if err != nil {
		return err
	}
	return runElected(ctx, ec, loop, h)
}

// metricsMux serves /metrics from registry and, with profiling, Go's
// profiles under /debug/pprof/.
func metricsMux(registry *prometheus.Registry, profiling bool) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	if profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

func startServers(ctx context.Context, f *flags, registry *prometheus.Registry, ready *atomic.Bool, h *health) ([]*http.Server, error) {
	var servers []*http.Server
	if f.metricsAddr != "" {
		servers = append(servers, &http.Server{Addr: f.metricsAddr, Handler: metricsMux(registry, f.profiling), ReadHeaderTimeout: 5 * time.Second})
	}
	if f.healthAddr != "" {
		mux := http.NewServeMux()
		mux.HandleFunc("/healthz", h.serveHTTP)
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
