package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	migclient "platform.example/vm-migration/pkg/generated/migration/clientset/versioned"
	miginformers "platform.example/vm-migration/pkg/generated/migration/informers/externalversions"
	"platform.example/vm-migration/test/builders"
	"platform.example/vm-migration/test/framework"
	"platform.example/vm-migration/test/standins"
	"platform.example/vm-migration/test/vcsimlocal"
)

// adminConfig is the administrator's config, with a rate limit that never
// holds the benchmark's own requests (or the stand-ins') back.
func adminConfig(env *framework.Environment) *rest.Config {
	cfg := env.Config()
	cfg.QPS, cfg.Burst = 2000, 4000
	return cfg
}

// sample is what is read of the world at one instant.
type sample struct {
	at       time.Time
	metrics  metrics
	requests map[request]int
	soap     map[string]int
	ctrlCPU  time.Duration
	ourCPU   time.Duration // every process of the benchmark, this one included
	machine  time.Duration
	timed    int // requests the proxy timed so far
}

// bench is one run's world.
type bench struct {
	o     options
	start time.Time
	dir   string
	env   *framework.Environment
	vc    *vcsimlocal.Server
	proxy *countingProxy
	ctrl  *controller
	cg    *memoryCgroup
	watch *watcher
	mig   migclient.Interface
	loads []float64
	// node is what the simulated node saw of the conversion pods.
	node nodeStats
}

func run(ctx context.Context, o options) error {
	b := &bench{o: o, start: time.Now()}
	dir, cleanup, err := workDir(o.workDir)
	if err != nil {
		return err
	}
	defer cleanup()
	b.dir = dir
	if err := b.startWorld(ctx, dir); err != nil {
		b.stopWorld()
		return err
	}
	defer b.stopWorld()
	rep, err := b.measure(ctx)
	if rep != nil {
		rep.print(os.Stdout)
	}
	return err
}

// workDir is the given directory, or a temporary one removed at the end.
func workDir(dir string) (string, func(), error) {
	if dir != "" {
		return dir, func() {}, os.MkdirAll(dir, 0o755)
	}
	tmp, err := os.MkdirTemp("", "bench-scale-")
	if err != nil {
		return "", nil, fmt.Errorf("creating a work directory: %w", err)
	}
	return tmp, func() { _ = os.RemoveAll(tmp) }, nil
}

// startWorld starts everything the controller runs against, then the
// controller, and waits until it leads.
func (b *bench) startWorld(ctx context.Context, dir string) error {
	say(b.start, "starting etcd, kube-apiserver and kube-controller-manager (%v)", managerArgs)
	env, err := startControlPlane(ctx)
	if err != nil {
		return err
	}
	b.env = env
	say(b.start, "vcsim: %d VMs on %d ESXi hosts (no disk content)", b.o.n, b.o.hosts)
	if b.vc, err = startVCSim(ctx, b.o.n, b.o.hosts, b.o.vmWorkers); err != nil {
		return err
	}
	if err := b.startStandins(ctx, dir); err != nil {
		return err
	}
	admin := adminConfig(env)
	kube := kubernetes.NewForConfigOrDie(admin)
	b.mig = migclient.NewForConfigOrDie(admin)
	if err := createSecret(ctx, kube, b.vc); err != nil {
		return err
	}
	if b.proxy, err = startProxy(admin.Host, admin.CAData); err != nil {
		return err
	}
	kubeconfig := filepath.Join(dir, "controller.kubeconfig")
	if err := controllerKubeconfig(ctx, kube, b.proxy.URL(), b.proxy.CA, kubeconfig); err != nil {
		return err
	}
	if err := b.makeCgroup(); err != nil {
		return err
	}
	if b.ctrl, err = startController(b.o.controller, kubeconfig, dir, splitArgs(b.o.controllerArgs), b.cg); err != nil {
		return err
	}
	say(b.start, "controller pid %d (log %s), waiting for it to lead", b.ctrl.pid(), b.ctrl.logFilePath)
	return b.ctrl.waitLeading(ctx, 3*time.Minute)
}

// makeCgroup makes the controller's memory cgroup, unless --memory-limit
// is 0.
func (b *bench) makeCgroup() error {
	limit, err := memoryLimit(b.o.memoryLimit)
	if err != nil || limit == 0 {
		return err
	}
	if b.cg, err = newMemoryCgroup(limit); err != nil {
		return err
	}
	say(b.start, "the controller runs in the memory cgroup %s, limit %.0f MiB (--memory-limit=%s)", b.cg.dir, float64(limit)/(1<<20), b.o.memoryLimit)
	return nil
}

// standinsStop stops the stand-ins and waits for them.
var standinsStop func()

func (b *bench) startStandins(ctx context.Context, dir string) error {
	sctx, cancel := context.WithCancel(ctx)
	done, err := startStandins(sctx, b.env, filepath.Join(dir, "standins"),
		completerOptions{nodeCPU: b.o.nodeCPU, conversionRun: b.o.conversionRun, stats: &b.node})
	if err != nil {
		cancel()
		return err
	}
	standinsStop = func() {
		cancel()
		if err := <-done; err != nil {
			fmt.Fprintln(os.Stderr, "benchscale: stand-ins:", err)
		}
	}
	say(b.start, "stand-ins running in light mode (no bytes move); the node offers %s CPU to conversion pods, each runs %s", b.o.nodeCPU.String(), b.o.conversionRun)
	return nil
}

// stopWorld stops what startWorld started, in reverse order.
func (b *bench) stopWorld() {
	if b.ctrl != nil {
		b.ctrl.stop(30 * time.Second)
	}
	if b.cg != nil {
		if err := b.cg.remove(); err != nil {
			fmt.Fprintln(os.Stderr, "benchscale:", err)
		}
	}
	if b.proxy != nil {
		b.proxy.Close()
	}
	if standinsStop != nil {
		standinsStop()
	}
	if b.vc != nil {
		b.vc.Close()
	}
	if b.env != nil {
		b.env.Stop()
	}
}

// take reads the metrics, counters and CPU times now.
func (b *bench) take() (sample, error) {
	s := sample{at: time.Now()}
	var err error
	if s.metrics, err = scrape(b.ctrl.metricsURL); err != nil {
		return s, err
	}
	s.requests, _ = b.proxy.snapshot()
	s.timed = b.proxy.requestsSoFar()
	s.soap = b.vc.SOAPCalls()
	if s.ctrlCPU, err = procCPU(b.ctrl.pid()); err != nil {
		return s, err
	}
	s.ourCPU = s.ctrlCPU
	for _, pid := range append(mapValues(b.env.PIDs()), os.Getpid()) {
		if cpu, err := procCPU(pid); err == nil {
			s.ourCPU += cpu
		}
	}
	s.machine, _ = machineCPU()
	return s, nil
}

func mapValues(m map[string]int) []int {
	out := make([]int, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// measure creates the migrations, follows them to the end, waits the
// quiet period and returns the report. A run cut short returns a report
// of how far it got, with the reason.
func (b *bench) measure(ctx context.Context) (*report, error) {
	if err := b.startWatcher(ctx); err != nil {
		return nil, err
	}
	before, err := b.take()
	if err != nil {
		return nil, err
	}
	say(b.start, "creating %d migrations", b.o.n)
	if err := b.createMigrations(ctx); err != nil {
		return nil, err
	}
	waitErr := b.waitEnded(ctx, before.at)
	after, err := b.take()
	if err != nil {
		return nil, err
	}
	hwm, _ := procStatus(b.ctrl.pid(), "VmHWM")
	rep := b.newReport(before, after, hwm)
	if waitErr != nil {
		rep.cutShort = waitErr.Error()
		return rep, waitErr
	}
	say(b.start, "all %d ended after %.1fs", b.o.n, after.at.Sub(before.at).Seconds())
	start, err := b.controllerSeesAllEnded(ctx)
	if err != nil {
		return rep, err
	}
	say(b.start, "the controller's cache shows them ended too; quiet period of %s", b.o.quiet)
	if err := sleepCtx(ctx, b.o.quiet); err != nil {
		return rep, err
	}
	quiet, err := b.take()
	if err != nil {
		return rep, err
	}
	rep.addQuiet(start, quiet)
	if hwm2, err := procStatus(b.ctrl.pid(), "VmHWM"); err == nil {
		rep.peakRSS = hwm2
	}
	rep.memory, err = b.memoryAtEnd()
	return rep, err
}

// memoryAtEnd forces a GC in the controller (through its heap profile,
// kept in the work directory when --work-dir names one) and reads its
// heap, its resident memory and its cgroup's figures then.
func (b *bench) memoryAtEnd() (memoryFigures, error) {
	var m memoryFigures
	if b.cg != nil {
		m.limit, m.cgroup = b.cg.limit, b.cg.stats()
	}
	client := http.Client{Timeout: time.Minute}
	resp, err := client.Get(b.ctrl.heapURL)
	if err != nil {
		return m, fmt.Errorf("forcing a GC in the controller: %w", err)
	}
	profile, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		return m, fmt.Errorf("forcing a GC in the controller: %s: %v", resp.Status, err)
	}
	if b.o.workDir != "" {
		m.profile = filepath.Join(b.dir, "controller-heap.pb.gz")
		if err := os.WriteFile(m.profile, profile, 0o644); err != nil {
			return m, fmt.Errorf("keeping the heap profile: %w", err)
		}
	}
	metrics, err := scrape(b.ctrl.metricsURL)
	if err != nil {
		return m, err
	}
	m.liveHeap, m.softLimit = int64(metrics[heapAllocBytes]), metrics[goMemoryLimit]
	m.endRSS, _ = procStatus(b.ctrl.pid(), "VmRSS")
	return m, nil
}

// controllerSeesAllEnded waits until the controller's own gauge of
// migrations by phase counts every migration ended (its cache may lag
// behind the benchmark's watch), and samples then: the quiet period
// starts there.
func (b *bench) controllerSeesAllEnded(ctx context.Context) (sample, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		s, err := b.take()
		if err != nil {
			return s, err
		}
		ended := s.metrics[`vm_migration_migrations{phase="Succeeded"}`] + s.metrics[`vm_migration_migrations{phase="Failed"}`]
		if int(ended) >= b.o.n || time.Now().After(deadline) {
			return s, nil
		}
		if err := sleepCtx(ctx, 500*time.Millisecond); err != nil {
			return s, err
		}
	}
}

// startWatcher follows the benchmark namespace's migrations.
func (b *bench) startWatcher(ctx context.Context) error {
	b.watch = newWatcher(b.o.n)
	factory := miginformers.NewSharedInformerFactoryWithOptions(b.mig, 0, miginformers.WithNamespace(benchNamespace))
	informer := factory.Migration().V1alpha1().VirtualMachineMigrations().Informer()
	if _, err := informer.AddEventHandler(b.watch.handler()); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return errors.New("the benchmark's watch of the migrations did not sync")
	}
	return b.watchProofJobs(ctx)
}

// watchProofJobs counts the proof Jobs of the benchmark's namespace (those
// labelled component=proof), each once, however briefly it lived.
func (b *bench) watchProofJobs(ctx context.Context) error {
	proof := labels.SelectorFromSet(labels.Set{v1alpha1.LabelComponent: v1alpha1.ComponentProof}).String()
	factory := informers.NewSharedInformerFactoryWithOptions(kubernetes.NewForConfigOrDie(adminConfig(b.env)), 0,
		informers.WithNamespace(benchNamespace), informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = proof }))
	informer := factory.Batch().V1().Jobs().Informer()
	if _, err := informer.AddEventHandler(b.watch.proofJobHandler()); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return errors.New("the benchmark's watch of the proof Jobs did not sync")
	}
	return nil
}

// newMigration is the i-th migration: its VM by name, the pod network,
// the stand-ins' storage class, a short shutdown timeout.
func newMigration(vc *vcsimlocal.Server, i int) *v1alpha1.VirtualMachineMigration {
	name := vmName(i)
	return builders.Migration(builders.Named(name), builders.InNamespace(benchNamespace), builders.WithoutUID,
		builders.SourceAt(vc.URL), builders.Credentials(credentialsSecret), builders.Datacenter(vcsimlocal.Datacenter),
		builders.SourceVM(name), builders.TargetName(name), builders.DefaultStorage(standins.DefaultStorageClass),
		builders.Networks(builders.PodNetwork(vcsimlocal.NetworkVM)),
		builders.StagingClass(standins.DefaultStorageClass), builders.ShutdownTimeout(30*time.Second))
}

// createMigrations creates the N migrations from several goroutines.
func (b *bench) createMigrations(ctx context.Context) error {
	var next atomic.Int64
	errs := make([]error, b.o.createWorkers)
	var wg sync.WaitGroup
	api := b.mig.MigrationV1alpha1().VirtualMachineMigrations(benchNamespace)
	for w := range b.o.createWorkers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < b.o.n && errs[w] == nil; i = int(next.Add(1) - 1) {
				if _, err := api.Create(ctx, newMigration(b.vc, i), metav1.CreateOptions{}); err != nil {
					errs[w] = fmt.Errorf("creating migration %s: %w", vmName(i), err)
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// waitEnded waits until every migration ended, printing progress; it
// gives up at the timeout or when the controller exits.
func (b *bench) waitEnded(ctx context.Context, t0 time.Time) error {
	tick := time.NewTicker(b.o.progressEvery)
	defer tick.Stop()
	load := time.NewTicker(5 * time.Second)
	defer load.Stop()
	deadline := time.After(b.o.timeout - time.Since(b.start))
	b.loads = append(b.loads, loadAverage())
	for {
		select {
		case <-b.watch.done:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("interrupted: %w", ctx.Err())
		case <-deadline:
			return fmt.Errorf("not every migration ended within --timeout=%s", b.o.timeout)
		case <-b.ctrl.exited:
			return fmt.Errorf("the controller exited (%v); log %s:\n%s", b.ctrl.waitErr, b.ctrl.logFilePath, framework.TailBytes(b.ctrl.logFilePath, 2000))
		case <-load.C:
			b.loads = append(b.loads, loadAverage())
		case <-tick.C:
			byPhase, ended, _, _ := b.watch.counts()
			rss, _ := procStatus(b.ctrl.pid(), "VmRSS")
			b.node.mu.Lock()
			waiting := b.node.waiting
			b.node.mu.Unlock()
			say(b.start, "%5.0fs: %d/%d ended; %s; %d sources off, %d waiting for conversion capacity before the stop, %d conversion pods Unschedulable; controller RSS %.0f MiB; load %.1f",
				time.Since(t0).Seconds(), ended, b.o.n, phaseLine(byPhase), b.watch.sourcesOff(), b.watch.waitingBeforeStop(), waiting, float64(rss)/(1<<20), loadAverage())
		}
	}
}

// sleepCtx sleeps, or returns early with ctx's error.
func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// meanMax is the mean and the maximum of xs, NaN ignored.
func meanMax(xs []float64) (float64, float64) {
	sum, n, hi := 0.0, 0, math.Inf(-1)
	for _, x := range xs {
		if math.IsNaN(x) {
			continue
		}
		sum, n, hi = sum+x, n+1, math.Max(hi, x)
	}
	if n == 0 {
		return math.NaN(), math.NaN()
	}
	return sum / float64(n), hi
}
