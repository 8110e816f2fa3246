package main

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"sort"
	"strings"
	"time"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// Metric names the controller exports.
const (
	reconcileHistogram = "vm_migration_reconcile_duration_seconds"
	ownHistogram       = "vm_migration_reconcile_own_duration_seconds"
	heapAllocBytes     = "go_memstats_heap_alloc_bytes"
	goMemoryLimit      = "go_gc_gomemlimit_bytes"
	reconcileTotal     = "vm_migration_reconcile_total"
	finishedSkipsTotal = "vm_migration_finished_skips_total"
	statusWritesTotal  = "vm_migration_status_writes_total"
	// validationWaitHistogram is the time from creation to leaving
	// Validating, by outcome.
	validationWaitHistogram = "vm_migration_validation_wait_seconds"
)

// report holds the figures of one run.
type report struct {
	n, hosts          int
	succeeded, failed int
	failures          []string
	wall              time.Duration
	requests          map[request]int
	conflicts         map[request]int
	writes            writeKinds
	statusWrites      float64
	peakRSS           int64
	memory            memoryFigures
	p50, p99          float64    // seconds
	ownP50, ownP99    float64    // seconds, the reconciles' own time
	ownOver           [2]float64 // reconciles whose own time passed 20 ms, 100 ms
	apiP50, apiP99    float64    // seconds, the controller's API round trips
	apiTimed          int
	reconciles        float64
	ctrlCPU, ourCPU   time.Duration
	machineCPU        time.Duration
	loadMean, loadMax float64
	soap              map[string]int
	cutShort          string

	// validation: from creation to leaving Validating, as the benchmark's
	// watch timed it and as the controller's histogram has it.
	validation validationFigures
	// proofJobs are the distinct proof Jobs seen in all.
	proofJobs int
	// outage is the outage per migration and the queues around it.
	outage outageFigures
	// nodeCPU and conversionRun shape the simulated node; conversion
	// pods waited for room at most podsWaiting at once, and ran at most
	// podsRunning at once.
	nodeCPU                  string
	conversionRun            time.Duration
	podsWaiting, podsRunning int

	finishedSkips   float64
	quiet           time.Duration
	quietReconciles float64
	quietSkips      float64
	quietRequests   map[request]int
	quietSOAP       int
}

// newReport computes the run's figures between two samples.
func (b *bench) newReport(before, after sample, hwm int64) *report {
	byPhase, _, writes, failures := b.watch.counts()
	hist := minus(after.metrics.buckets(reconcileHistogram), before.metrics.buckets(reconcileHistogram))
	own := minus(after.metrics.buckets(ownHistogram), before.metrics.buckets(ownHistogram))
	_, conflicts := b.proxy.snapshot()
	r := &report{
		n: b.o.n, hosts: b.o.hosts,
		succeeded: byPhase["Succeeded"], failed: byPhase["Failed"], failures: failures,
		wall:          after.at.Sub(before.at),
		requests:      diff(after.requests, before.requests),
		conflicts:     conflicts,
		writes:        writes,
		statusWrites:  after.metrics.sum(statusWritesTotal) - before.metrics.sum(statusWritesTotal),
		peakRSS:       hwm,
		p50:           quantile(0.5, hist),
		p99:           quantile(0.99, hist),
		ownP50:        quantile(0.5, own),
		ownP99:        quantile(0.99, own),
		ownOver:       [2]float64{above(0.02, own), above(0.1, own)},
		reconciles:    after.metrics.sum(reconcileTotal) - before.metrics.sum(reconcileTotal),
		finishedSkips: after.metrics.sum(finishedSkipsTotal) - before.metrics.sum(finishedSkipsTotal),
		ctrlCPU:       after.ctrlCPU - before.ctrlCPU,
		ourCPU:        after.ourCPU - before.ourCPU,
		machineCPU:    after.machine - before.machine,
		soap:          diff(after.soap, before.soap),
	}
	r.loadMean, r.loadMax = meanMax(b.loads)
	waits := b.watch.validationWaits()
	wait := minus(after.metrics.summedBuckets(validationWaitHistogram), before.metrics.summedBuckets(validationWaitHistogram))
	r.validation = validationFigures{
		p50: percentile(0.5, waits), p99: percentile(0.99, waits), seen: len(waits), still: b.watch.stillValidating(),
		ctrlP50: quantile(0.5, wait), ctrlP99: quantile(0.99, wait),
	}
	if len(wait) > 0 {
		r.validation.ctrlCount = wait[len(wait)-1].count
	}
	r.proofJobs = b.watch.proofJobsCreated()
	r.outage = b.watch.outageFigures()
	r.nodeCPU, r.conversionRun = b.o.nodeCPU.String(), b.o.conversionRun
	r.podsWaiting, r.podsRunning = b.node.peaks()
	var q []float64
	q, r.apiTimed = b.proxy.latencyQuantiles(before.timed, 0.5, 0.99)
	r.apiP50, r.apiP99 = q[0], q[1]
	return r
}

// addQuiet adds the quiet period's figures.
func (r *report) addQuiet(after, quiet sample) {
	r.quiet = quiet.at.Sub(after.at)
	r.quietReconciles = quiet.metrics.sum(reconcileTotal) - after.metrics.sum(reconcileTotal)
	r.quietSkips = quiet.metrics.sum(finishedSkipsTotal) - after.metrics.sum(finishedSkipsTotal)
	r.quietRequests = diff(quiet.requests, after.requests)
	for _, v := range diff(quiet.soap, after.soap) {
		r.quietSOAP += v
	}
}

// print writes the report; its last line is the summary line.
func (r *report) print(w io.Writer) {
	n := float64(r.n)
	fmt.Fprintln(w, "== bench-scale: a CONTROL-PLANE benchmark: no disk bytes move ==")
	fmt.Fprintln(w, "   test/standins in light mode: transfer pods end at once with a complete result (bytes = capacity, a checksum),")
	if r.conversionRun > 0 {
		fmt.Fprintf(w, "   conversion pods run %s once the simulated node placed them; clones and VM starts complete at once; vcsim VMs have no disk content.\n", r.conversionRun)
	} else {
		fmt.Fprintln(w, "   conversions, clones and VM starts complete at once; vcsim VMs have no disk content.")
	}
	fmt.Fprintf(w, "   real etcd, kube-apiserver, kube-controller-manager (%s); the controller as its own process, production flags.\n", strings.Join(managerArgs, " "))
	fmt.Fprintf(w, "machine: %d cores shared with other work; 1-min load average during the run: mean %.1f, max %.1f;\n", runtime.NumCPU(), r.loadMean, r.loadMax)
	fmt.Fprintf(w, "   busy CPU of the whole machine %.0fs, of this benchmark's processes %.0fs (controller %.0fs) in %.0fs of wall time\n",
		r.machineCPU.Seconds(), r.ourCPU.Seconds(), r.ctrlCPU.Seconds(), r.wall.Seconds())
	fmt.Fprintf(w, "N=%d migrations of VMs spread over %d ESXi hosts (vcsim), the controller's default per-host transfer limit\n", r.n, r.hosts)
	if r.cutShort != "" {
		fmt.Fprintf(w, "CUT SHORT: %s\n", firstLine(r.cutShort))
	}
	fmt.Fprintf(w, "wall time until all ended: %.1f s (succeeded %d, failed %d)\n", r.wall.Seconds(), r.succeeded, r.failed)
	for i, f := range r.failures {
		if i == 5 {
			fmt.Fprintf(w, "   ... and %d more failures\n", len(r.failures)-5)
			break
		}
		fmt.Fprintf(w, "   failed: %s\n", firstLine(f))
	}
	r.printRequests(w, n)
	r.validation.print(w)
	fmt.Fprintf(w, "proof Jobs created in all: %d (%.3f per migration; Jobs labelled %s=%s, each UID once)\n",
		r.proofJobs, float64(r.proofJobs)/n, v1alpha1.LabelComponent, v1alpha1.ComponentProof)
	checkpoints := float64(r.writes.checkpoint)
	fmt.Fprintf(w, "status writes: %.2f per migration (%.0f in all; the watch saw %d at checkpoints, %d others, %d progress-only)\n",
		r.statusWrites/n, r.statusWrites, r.writes.checkpoint, r.writes.other, r.writes.progress)
	fmt.Fprintf(w, "   per checkpoint reached: %.2f (%.1f checkpoints per migration); progress writes counted apart: %.2f per migration\n",
		float64(r.writes.checkpoint+r.writes.other)/math.Max(checkpoints, 1), checkpoints/n, float64(r.writes.progress)/n)
	for i, what := range sortedByCount(r.writes.otherWhat) {
		if i == 8 {
			break
		}
		fmt.Fprintf(w, "   %6.2f per migration within %s\n", float64(r.writes.otherWhat[what])/n, what)
	}
	r.memory.print(w, r.peakRSS, n)
	fmt.Fprintf(w, "reconcile latency (%s): p50 %.1f ms, p99 %.1f ms over %.0f reconciles (%.1f per migration; %.0f queued keys of finished migrations dropped unreconciled)\n",
		reconcileHistogram, r.p50*1000, r.p99*1000, r.reconciles, r.reconciles/n, r.finishedSkips)
	fmt.Fprintf(w, "   its own time, without its API and vSphere calls (%s): p50 %.2f ms, p99 %.2f ms; %.0f reconciles took more than 20 ms of it, %.0f more than 100 ms (the controller logs those at -v=2)\n",
		ownHistogram, r.ownP50*1000, r.ownP99*1000, r.ownOver[0], r.ownOver[1])
	fmt.Fprintf(w, "   for scale: the controller's API round trips (proxy to the API server and back, watches aside): p50 %.1f ms, p99 %.1f ms over %d requests\n",
		r.apiP50*1000, r.apiP99*1000, r.apiTimed)
	if r.quiet > 0 {
		fmt.Fprintf(w, "quiet period of %.0fs after the run: %.0f reconciles of finished migrations (%.0f keys dropped unreconciled), %d API requests (%s), %d vSphere calls\n",
			r.quiet.Seconds(), r.quietReconciles, r.quietSkips, total(r.quietRequests), topRequests(r.quietRequests, 4), r.quietSOAP)
	}
	r.printSOAP(w, n)
	r.printOutage(w)
	fmt.Fprintf(w, "scale: N=%d succeeded=%d writes/migration=%.2f p99 reconcile=%.1f ms, own p99=%.1f ms, api p99=%.1f ms, peak RSS=%.0f MiB, live heap=%.1f MiB\n",
		r.n, r.succeeded, r.statusWrites/n, r.p99*1000, r.ownP99*1000, r.apiP99*1000, float64(r.peakRSS)/(1<<20), float64(r.memory.liveHeap)/(1<<20))
}

// outageFigures are the outage per migration (status.downtime.seconds of
// those that succeeded) and the queues around it.
type outageFigures struct {
	seconds []float64
	// maxOff is the most sources off at once, maxWaiting the most
	// migrations waiting in Queued for conversion capacity at once;
	// podWaited counts the migrations whose conversion pod was seen
	// waiting Unschedulable, their source off.
	maxOff, maxWaiting, podWaited int
}

// printOutage prints the outage lines; the second is the one
// hack/bench-scale.sh compares (PACING=compare).
func (r *report) printOutage(w io.Writer) {
	o := r.outage
	_, hi := meanMax(o.seconds)
	fmt.Fprintf(w, "the simulated node offers %s CPU to conversion pods, each runs %s once placed: at most %d ran at once, at most %d waited Unschedulable at once (%d migrations' conversion pods waited so, their source off)\n",
		r.nodeCPU, r.conversionRun, r.podsRunning, r.podsWaiting, o.podWaited)
	fmt.Fprintf(w, "outage per migration (status.downtime.seconds, %d succeeded): p50 %.0f s, max %.0f s; sources off at once: max %d; waiting before the stop for conversion capacity at once: max %d\n",
		len(o.seconds), percentile(0.5, o.seconds), hi, o.maxOff, o.maxWaiting)
}

// printRequests prints the controller's API requests per migration.
func (r *report) printRequests(w io.Writer, n float64) {
	fmt.Fprintf(w, "API requests of the controller per migration (counting proxy; %d in all, %.1f per migration):\n", total(r.requests), float64(total(r.requests))/n)
	for _, k := range sortedRequests(r.requests) {
		extra := ""
		if c := r.conflicts[k]; c > 0 {
			extra = fmt.Sprintf("   (%d answered 409 Conflict)", c)
		}
		fmt.Fprintf(w, "   %8.3f  %-8s %s%s\n", float64(r.requests[k])/n, k.verb, k.resource, extra)
	}
}

// printSOAP prints the vSphere calls per migration.
func (r *report) printSOAP(w io.Writer, n float64) {
	all := 0
	methods := make([]string, 0, len(r.soap))
	for m, v := range r.soap {
		all += v
		methods = append(methods, m)
	}
	sort.Slice(methods, func(i, j int) bool { return r.soap[methods[i]] > r.soap[methods[j]] })
	parts := make([]string, 0, len(methods))
	for _, m := range methods {
		parts = append(parts, fmt.Sprintf("%s %.2f", m, float64(r.soap[m])/n))
	}
	fmt.Fprintf(w, "vSphere calls per migration (SOAP, counted by vcsim): %.2f: %s\n", float64(all)/n, strings.Join(parts, ", "))
}

// sortedByCount orders keys by count, highest first.
func sortedByCount(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	return keys
}

func total(m map[request]int) int {
	t := 0
	for _, v := range m {
		t += v
	}
	return t
}

// topRequests names the k most frequent requests.
func topRequests(m map[request]int, k int) string {
	keys := sortedRequests(m)
	parts := []string{}
	for i, key := range keys {
		if i == k {
			break
		}
		parts = append(parts, fmt.Sprintf("%d %s", m[key], key))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// memoryFigures are the controller's memory at the end of a run.
type memoryFigures struct {
	// limit is its cgroup's memory limit (0: none) and cgroup what the
	// kernel said of that cgroup.
	limit  int64
	cgroup cgroupStats
	// softLimit is the Go runtime's soft memory limit (go_gc_gomemlimit_bytes).
	softLimit float64
	// endRSS is the resident memory after the quiet period and a forced GC.
	endRSS int64
	// liveHeap is the heap after a forced GC (go_memstats_heap_alloc_bytes).
	liveHeap int64
	// profile is where the heap profile taken then was kept ("" if not).
	profile string
}

// print writes the memory lines of the report.
func (m memoryFigures) print(w io.Writer, peakRSS int64, n float64) {
	mib := func(b int64) float64 { return float64(b) / (1 << 20) }
	if m.limit > 0 {
		fmt.Fprintf(w, "controller memory: cgroup limit %.0f MiB (the Deployment's unless --memory-limit said otherwise), Go soft limit %.0f MiB; cgroup peak usage %.0f MiB (page cache included), limit met %d times, OOM kills %d\n",
			mib(m.limit), m.softLimit/(1<<20), mib(m.cgroup.maxUsage), m.cgroup.failures, m.cgroup.oomKills)
	} else {
		fmt.Fprintln(w, "controller memory: no memory limit (MEMLIMIT=0)")
	}
	fmt.Fprintf(w, "controller peak RSS (VmHWM): %.0f MiB (%.1f KiB per migration); RSS after the quiet period and a forced GC %.0f MiB; live heap then %.1f MiB (%.1f KiB per migration)\n",
		mib(peakRSS), float64(peakRSS)/1024/n, mib(m.endRSS), mib(m.liveHeap), float64(m.liveHeap)/1024/n)
	if m.profile != "" {
		fmt.Fprintf(w, "   heap profile after the forced GC: %s (go tool pprof -sample_index=inuse_space -top %s)\n", m.profile, m.profile)
	}
}

// validationFigures are the times from creation to leaving Validating.
type validationFigures struct {
	// p50 and p99 are the benchmark's watch's, in seconds: from the
	// migration's first event (its creation) to its first event past
	// Validating; seen is how many it timed, still how many it never saw
	// past it.
	p50, p99    float64
	seen, still int
	// ctrlP50 and ctrlP99 are the controller's histogram's
	// (vm_migration_validation_wait_seconds, summed over outcomes) over
	// ctrlCount observations.
	ctrlP50, ctrlP99 float64
	ctrlCount        float64
}

// print writes the line of the time from apply to leaving Validating.
func (v validationFigures) print(w io.Writer) {
	fmt.Fprintf(w, "time from apply to leaving Validating: p50 %.1f s, p99 %.1f s over %d migrations (the benchmark's watch; %d never left it); the controller's %s: p50 %.1f s, p99 %.1f s over %.0f\n",
		v.p50, v.p99, v.seen, v.still, validationWaitHistogram, v.ctrlP50, v.ctrlP99, v.ctrlCount)
}
