//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/test/vcsimlocal"
)

// The command's leader election timings (cmd/migration-controller): a
// standby takes over once it saw no renewal for leaseDuration; it looks
// every retryPeriod plus up to 1.2 times that in jitter.
const (
	leaseDuration = 15 * time.Second
	retryPeriod   = 2 * time.Second
	// maxTakeover bounds the time from the leader's death to the standby's
	// acquisition: the standby may see the last renewal up to one jittered
	// retry late, and look again up to one jittered retry after expiry
	// (2 x 2.2 x retryPeriod), plus 3s of API latency on a loaded machine.
	maxTakeover = leaseDuration + 2*22*retryPeriod/10 + 3*time.Second
	// maxHandover bounds the takeover of a lease released by its leader,
	// from SIGTERM: one jittered retry, plus the same latency.
	maxHandover = 22*retryPeriod/10 + 3*time.Second
)

// TestLeaderElection runs two controller processes (the built command, as
// its ServiceAccount) with leader election on one Lease. The first to start
// leads and migrates; the standby is healthy and does nothing (its
// controller never starts: no reconcile, action or status write in its
// metrics, and the Lease never changes hands). The leader is killed with
// SIGKILL mid-migration; the standby takes the Lease over within
// maxTakeover and finishes every migration with the right bytes, each child
// created once, no retry spent and no transfer restarted. The killed
// process, started again, stays a standby, and takes over at once when the
// new leader is stopped with SIGTERM (which releases the lease, exit 0).
func TestLeaderElection(t *testing.T) {
	s := newStack(t, stackOptions{
		noController: true, cloneBytesPerSecond: 4 << 20, vmiStartDelay: time.Second,
	})
	lease := s.leaderLease(t)
	creations := s.watchCreations(t)
	a, b := s.newElectingProcess(t, lease), s.newElectingProcess(t, lease)
	a.start()
	first := s.waitLeaseHolder(lease, func(l *coordinationv1.Lease) bool { return holder(l) != "" }, time.Minute)
	b.start()
	b.waitHealthy()
	t.Logf("leader %s; standby started", holder(first))

	vms := map[string]*vcsimlocal.VM{}
	var names []string
	for i := range 4 {
		n := fmt.Sprintf("leader-%d", i)
		vms[n] = s.addVM(n, uint64(900+10*i))
		names = append(names, n)
		s.create(s.newMigration(n, n))
	}
	s.waitMidMigration(names)

	atKill := s.lease(lease)
	require.Equal(t, holder(first), holder(atKill), "the lease changed hands while the leader lived: its holder")
	require.Equal(t, ptr.Deref(first.Spec.LeaseTransitions, 0), ptr.Deref(atKill.Spec.LeaseTransitions, 0),
		"the lease changed hands while the leader lived: its transitions (holder %s, first %s)", holder(atKill), holder(first))
	leaderWork, standbyWork := a.work(), b.work()
	t.Logf("before the kill (%s): leader %v, standby %v", s.phases(names), leaderWork, standbyWork)
	assert.NotZero(t, leaderWork.reconciles, "the leader did no work: %v", leaderWork)
	assert.NotZero(t, leaderWork.actions, "the leader did no work: %v", leaderWork)
	assert.NotZero(t, leaderWork.statusWrites, "the leader did no work: %v", leaderWork)
	assert.Equal(t, controllerWork{}, standbyWork, "the standby worked while the leader lived: %v", standbyWork)
	b.expectHealthy("standby")
	a.expectHealthy("leader")

	a.kill()
	killed := time.Now()
	lastRenew := s.lease(lease).Spec.RenewTime.Time
	taken := s.waitLeaseHolder(lease, func(l *coordinationv1.Lease) bool {
		return holder(l) != "" && holder(l) != holder(first)
	}, 2*maxTakeover)
	takeover := time.Since(killed)
	acquired := taken.Spec.AcquireTime.Time
	t.Logf("takeover: %s after SIGKILL; the new leader acquired %s after the old one's last renewal (lease %s)",
		takeover.Round(100*time.Millisecond), acquired.Sub(lastRenew).Round(100*time.Millisecond), leaseDuration)
	assert.LessOrEqual(t, takeover, maxTakeover, "time from the leader's death to the standby's takeover")
	gap := acquired.Sub(lastRenew)
	assert.GreaterOrEqual(t, gap, leaseDuration-time.Second, "the lease was taken %s after its last renewal, before it expired (%s)", gap, leaseDuration)
	b.waitWork(time.Minute)
	t.Logf("the new leader reconciled %s after SIGKILL", time.Since(killed).Round(100*time.Millisecond))
	a.start() // a new process with a new identity: a standby now

	for _, n := range names {
		s.verifyTargetDisks(s.waitPhase(n, v1alpha1.PhaseSucceeded, 4*time.Minute), vms[n])
	}
	a.waitHealthy() // it may still be starting: the migrations can end first
	a.expectHealthy("restarted standby")
	b.expectHealthy("new leader")
	w := a.work()
	assert.Equal(t, controllerWork{}, w, "the restarted process worked as a standby: %v", w)
	assert.Equal(t, holder(taken), holder(s.lease(lease)), "the lease's holder after the takeover by %s: it moved", holder(taken))
	t.Logf("new leader's work: %v", b.work())

	// A leader stopped with SIGTERM stops its loop, releases the lease and
	// exits 0: the standby takes over without waiting for it to expire.
	before := holder(s.lease(lease))
	stopped := time.Now()
	assert.Equal(t, 0, b.terminate(), "exit code of the leader stopped with SIGTERM")
	s.waitLeaseHolder(lease, func(l *coordinationv1.Lease) bool { return holder(l) != "" && holder(l) != before }, 2*maxTakeover)
	handover := time.Since(stopped)
	t.Logf("takeover %s after SIGTERM of the leader (lease released)", handover.Round(100*time.Millisecond))
	assert.LessOrEqual(t, handover, maxHandover, "time from the leader's SIGTERM (lease released) to the standby's takeover")
	a.stop()
	s.verifyNothingRedone(names, vms, creations)
}

// terminate sends SIGTERM to the process and returns its exit code.
func (p *electingProcess) terminate() int {
	p.t.Helper()
	cmd := p.cmd
	require.NoError(p.t, syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM), "sending SIGTERM to the controller")
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		require.FailNow(p.t, fmt.Sprintf("the controller did not exit within 30s of SIGTERM (logs in %s)", p.logDir))
	}
	p.cmd = nil
	return cmd.ProcessState.ExitCode()
}

// leaderLease is a Lease name for t alone, deleted when t ends.
func (s *stack) leaderLease(t *testing.T) string {
	name := "e2e-" + s.ns
	t.Cleanup(func() {
		_ = s.kube.CoordinationV1().Leases(controllerNamespace).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// lease reads the leader election Lease.
func (s *stack) lease(name string) *coordinationv1.Lease {
	s.t.Helper()
	l, err := s.kube.CoordinationV1().Leases(controllerNamespace).Get(s.ctx, name, metav1.GetOptions{})
	require.NoError(s.t, err, "reading lease %s", name)
	return l
}

// holder is a Lease's holder identity.
func holder(l *coordinationv1.Lease) string { return ptr.Deref(l.Spec.HolderIdentity, "") }

// waitLeaseHolder polls the Lease every 100ms until cond holds.
func (s *stack) waitLeaseHolder(name string, cond func(*coordinationv1.Lease) bool, timeout time.Duration) *coordinationv1.Lease {
	s.t.Helper()
	var last *coordinationv1.Lease
	err := wait.PollUntilContextTimeout(s.ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		l, err := s.kube.CoordinationV1().Leases(controllerNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = l
		return cond(l), nil
	})
	require.NoError(s.t, err, "lease %s: holder not as wanted within %s (last: %v)", name, timeout, last)
	return last
}

// waitMidMigration waits until a migration is past stopping its source and
// none has finished: the leader has committed work that others must finish.
func (s *stack) waitMidMigration(names []string) {
	s.t.Helper()
	mid := map[v1alpha1.Phase]bool{v1alpha1.PhaseTransferringDisks: true, v1alpha1.PhaseConverting: true, v1alpha1.PhaseImporting: true}
	err := wait.PollUntilContextTimeout(s.ctx, 100*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		found := false
		for _, n := range names {
			m, err := s.mig.MigrationV1alpha1().VirtualMachineMigrations(s.ns).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			if m.Status.Phase == v1alpha1.PhaseSucceeded {
				return false, fmt.Errorf("%s succeeded before the leader was killed", n)
			}
			found = found || mid[m.Status.Phase]
		}
		return found, nil
	})
	if err != nil {
		// Read the phases only on failure: they cost a request each.
		require.FailNow(s.t, fmt.Sprintf("waiting for a migration in flight: %v (%s)", err, s.phases(names)))
	}
}

// electingProcess is a controller process with leader election, metrics
// and probes on ports of its own.
type electingProcess struct {
	*controllerProcess
	metricsURL, healthURL string
}

// newElectingProcess is a controller process electing on lease.
func (s *stack) newElectingProcess(t *testing.T, lease string) *electingProcess {
	t.Helper()
	metrics, health := freeAddr(t), freeAddr(t)
	p := s.newControllerProcess(t, "--leader-elect=true", "--leader-election-namespace="+controllerNamespace,
		"--leader-election-id="+lease, "--metrics-bind-address="+metrics, "--health-probe-bind-address="+health)
	return &electingProcess{controllerProcess: p, metricsURL: "http://" + metrics + "/metrics", healthURL: "http://" + health}
}

// freeAddr is a loopback address with a port free now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err, "listening on a free loopback port")
	defer l.Close()
	return l.Addr().String()
}

// controllerWork is what a controller process did, from its metrics.
type controllerWork struct{ reconciles, actions, statusWrites float64 }

func (w controllerWork) String() string {
	return fmt.Sprintf("%.0f reconciles, %.0f actions, %.0f status writes", w.reconciles, w.actions, w.statusWrites)
}

// work scrapes the process's metrics. A process whose controller never
// started has none of the controller's series: zero work. The page must
// hold the Go runtime's series, so that an empty answer is not read as
// no work.
func (p *electingProcess) work() controllerWork {
	p.t.Helper()
	sums, err := scrapeSums(p.metricsURL)
	require.NoError(p.t, err, "scraping %s", p.metricsURL)
	_, ok := sums["go_goroutines"]
	require.True(p.t, ok, "%s has no go_goroutines: not the controller's metrics", p.metricsURL)
	return controllerWork{
		reconciles:   sums["vm_migration_reconcile_total"],
		actions:      sums["vm_migration_actions_total"],
		statusWrites: sums["vm_migration_status_writes_total"],
	}
}

// waitWork waits until the process reconciled at least once.
func (p *electingProcess) waitWork(timeout time.Duration) {
	p.t.Helper()
	err := wait.PollUntilContextTimeout(p.s.ctx, 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		sums, err := scrapeSums(p.metricsURL)
		return err == nil && sums["vm_migration_reconcile_total"] > 0, nil
	})
	require.NoError(p.t, err, "the new leader did not reconcile within %s", timeout)
}

// scrapeSums sums each metric's samples over their labels.
func scrapeSums(url string) (map[string]float64, error) {
	families, err := readMetrics(url)
	if err != nil {
		return nil, err
	}
	sums := map[string]float64{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			switch {
			case m.Counter != nil:
				sums[name] += m.GetCounter().GetValue()
			case m.Gauge != nil:
				sums[name] += m.GetGauge().GetValue()
			case m.Untyped != nil:
				sums[name] += m.GetUntyped().GetValue()
			}
		}
	}
	return sums, nil
}

// waitHealthy waits until the process serves /healthz.
func (p *electingProcess) waitHealthy() {
	p.t.Helper()
	err := wait.PollUntilContextTimeout(p.s.ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return p.healthz() == http.StatusOK, nil
	})
	require.NoError(p.t, err, "%s/healthz not ok within a minute", p.healthURL)
}

// expectHealthy checks /healthz and /readyz and that the process runs.
func (p *electingProcess) expectHealthy(role string) {
	p.t.Helper()
	select {
	case <-p.done:
		assert.Fail(p.t, fmt.Sprintf("the %s exited (see %s)", role, p.logDir))
		return
	default:
	}
	assert.Equal(p.t, http.StatusOK, p.healthz(), "the %s's answer to /healthz", role)
	resp, err := http.Get(p.healthURL + "/readyz")
	if !assert.NoError(p.t, err, "the %s: /readyz", role) {
		return
	}
	resp.Body.Close()
	assert.Equal(p.t, http.StatusOK, resp.StatusCode, "the %s's answer to /readyz", role)
}

// healthz is the status /healthz answers (0 when it does not answer).
func (p *electingProcess) healthz() int {
	resp, err := http.Get(p.healthURL + "/healthz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
