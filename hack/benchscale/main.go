// Command benchscale is the driver of `make bench-scale`
// (hack/bench-scale.sh): a CONTROL-PLANE benchmark of the migration
// controller with N migrations at once.
//
// It starts a real etcd, kube-apiserver and kube-controller-manager
// (test/framework, binaries from hack/build-testbin.sh), vcsim with N
// VMs spread over several standalone ESXi hosts (in process, counting
// every SOAP call by method), the stand-ins of test/standins in light mode
// (in process: transfer pods end at once with a complete result, clones
// and VM starts complete at once, no byte moves), and the controller as
// its own process with its production flags (and --profiling, for the
// live heap), in a memory cgroup with the Deployment's memory limit
// (--memory-limit), whose API requests go through a counting reverse
// proxy. It creates N migrations, waits until every one ended, lets a
// quiet period pass, forces a GC in the controller and prints what it
// measured; the last line reads
//
//	scale: N=<n> succeeded=<n> writes/migration=<w> p99 reconcile=<ms> ms, own p99=<ms> ms, api p99=<ms> ms, peak RSS=<MiB> MiB, live heap=<MiB> MiB
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// options are the command's flags.
type options struct {
	n              int
	hosts          int
	quiet          time.Duration
	timeout        time.Duration
	controller     string
	controllerArgs string
	workDir        string
	vmWorkers      int
	createWorkers  int
	progressEvery  time.Duration
	memoryLimit    string
	nodeCPU        resource.Quantity
	conversionRun  time.Duration
}

func parseOptions() options {
	var o options
	flag.IntVar(&o.n, "n", 1000, "migrations (and source VMs)")
	flag.IntVar(&o.hosts, "hosts", 10, "standalone ESXi hosts the VMs are spread over (round robin)")
	flag.DurationVar(&o.quiet, "quiet", time.Minute, "quiet period after the run, in which reconciles of finished migrations are counted (the reported figure needs the full minute)")
	flag.DurationVar(&o.timeout, "timeout", 3*time.Hour, "give up (and report how far it got) after this long")
	flag.StringVar(&o.controller, "controller-binary", "", "the built migration-controller (required)")
	flag.StringVar(&o.controllerArgs, "controller-args", "", "extra flags for the controller, space-separated (default: none, its production defaults)")
	flag.StringVar(&o.workDir, "work-dir", "", "directory for logs and the stand-ins' files (default: a temporary one, removed)")
	flag.IntVar(&o.vmWorkers, "vm-workers", 8, "goroutines creating the VMs in vcsim")
	flag.IntVar(&o.createWorkers, "create-workers", 16, "goroutines creating the migrations")
	flag.DurationVar(&o.progressEvery, "progress", 15*time.Second, "how often to print progress")
	flag.StringVar(&o.memoryLimit, "memory-limit", "deployment", "run the controller in a memory cgroup with this limit: deployment (the memory limit of "+deploymentManifest+"), a quantity (512Mi), or 0 (no cgroup)")
	o.nodeCPU = resource.MustParse("1000")
	flag.Func("node-cpu", "allocatable CPU of the simulated node (default 1000): conversion pods beyond what it holds (by their CPU request) wait Pending Unschedulable, as kube-scheduler leaves them, until a placed one ends", func(v string) error {
		q, err := resource.ParseQuantity(v)
		if err == nil && q.Sign() <= 0 {
			err = fmt.Errorf("%s is not positive", v)
		}
		o.nodeCPU = q
		return err
	})
	flag.DurationVar(&o.conversionRun, "conversion-time", 0, "how long a placed conversion pod runs before it ends (0: at once)")
	flag.Parse()
	return o
}

func main() {
	// The controller is started from this goroutine, locked to the main
	// thread: its parent-death signal then fires only when the benchmark
	// process ends (see startController).
	runtime.LockOSThread()
	o := parseOptions()
	if o.controller == "" || o.n < 1 || o.hosts < 1 {
		fmt.Fprintln(os.Stderr, "benchscale: --controller-binary is required, and -n and --hosts must be positive")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code := 0
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "benchscale:", err)
		code = 1
	}
	stop()
	os.Exit(code)
}

// say prints a progress line on stderr.
func say(start time.Time, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[bench-scale %5.0fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
}

// splitArgs splits the extra controller flags.
func splitArgs(s string) []string { return strings.Fields(s) }
