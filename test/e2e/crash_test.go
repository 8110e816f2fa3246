//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/test/vcsimlocal"
)

// minKills is how many times the crash test kills the controller at least.
const minKills = 50

// TestControllerCrashes runs migrations while the controller process (the
// built command, as its ServiceAccount) is killed with SIGKILL and started
// again, at least minKills times: once right after a migration first
// enters each phase (a watch on the migrations triggers it, so every phase
// of a migration's path is hit whatever the machine's speed), and otherwise
// at random instants; a new migration is started whenever all running ones
// finished. Every migration must succeed with the right bytes; a watch on every
// kind of child must see each child created exactly once (a restart
// resumes, it never redoes or duplicates); no retry is spent; vcsim must
// have sent each disk's bytes once (the transfer was never restarted); and
// no snapshot may be left on any source VM.
func TestControllerCrashes(t *testing.T) {
	s := newStack(t, stackOptions{
		noController:        true,
		cloneBytesPerSecond: 4 << 20,
		vmiStartDelay:       time.Second,
	})
	vms := map[string]*vcsimlocal.VM{}
	var names []string
	creations := s.watchCreations(t)
	ctrl := s.newControllerProcess(t)
	ctrl.start()
	startMigration := func() {
		n := fmt.Sprintf("crash-%d", len(names))
		vms[n] = s.addVM(n, uint64(500+10*len(names)))
		names = append(names, n)
		s.create(s.newMigration(n, n))
	}
	for range 3 {
		startMigration()
	}

	seed := uint64(time.Now().UnixNano())
	t.Logf("kill schedule seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	begin := time.Now()
	deadline := begin.Add(8 * time.Minute)
	kills, killsInFlight := 0, 0
	killedIn := map[v1alpha1.Phase]int{}
	killedOnEntry := map[v1alpha1.Phase]bool{}
	entries := s.watchFirstPhaseEntries(t)
	var phasesAtKill []string
	// At least minKills kills, and on until a kill followed a migration's
	// entry into every phase of its path (the real CDI's imports take
	// tens of seconds: 50 kills can all come before the first VM).
	enteredAll := func() bool {
		return !slices.ContainsFunc(migrationPath, func(p v1alpha1.Phase) bool { return !killedOnEntry[p] })
	}
	for (kills < minKills || !enteredAll()) && time.Now().Before(deadline) {
		if s.allSucceeded(names) && len(names) < 12 {
			startMigration()
		}
		trigger := "random"
		select {
		case p := <-entries:
			trigger = "entering " + string(p)
			killedOnEntry[p] = true
		// Up to 3 s between random kills: a restarted controller's first
		// sync in Validating sends the dry run of every object again (its
		// answers live in memory), through CDI's and KubeVirt's webhooks,
		// which take a second or two on a loaded machine; at most 1.5 s
		// between kills, no migration ever left Validating.
		case <-time.After(time.Duration(200+r.IntN(2800)) * time.Millisecond):
		}
		phasesAtKill = append(phasesAtKill, trigger+": "+s.phases(names))
		hit := map[v1alpha1.Phase]bool{}
		for _, n := range names {
			if m, err := s.mig.MigrationV1alpha1().VirtualMachineMigrations(s.ns).Get(s.ctx, n, metav1.GetOptions{}); err == nil {
				hit[m.Status.Phase] = true
			}
		}
		for phase := range hit {
			killedIn[phase]++
		}
		if len(hit) > 1 || len(hit) == 1 && !hit[v1alpha1.PhaseSucceeded] {
			killsInFlight++
		}
		ctrl.kill()
		kills++
		if r.IntN(3) == 0 {
			time.Sleep(time.Duration(r.IntN(1500)) * time.Millisecond) // down a while
		}
		ctrl.start()
	}
	t.Logf("killed the controller %d times; phases at each kill:\n  %s", kills, strings.Join(phasesAtKill, "\n  "))
	t.Logf("kills that found a migration in each phase: %v; %d kills (%d with a migration in flight) in %s",
		killedIn, kills, killsInFlight, time.Since(begin).Round(time.Second))
	require.GreaterOrEqual(t, kills, minKills, "kills of the controller before the deadline")
	for _, phase := range migrationPath {
		assert.True(t, killedOnEntry[phase], "no kill right after a migration entered %s (kills on entry: %v)", phase, killedOnEntry)
	}
	for _, n := range names {
		m := s.waitPhase(n, v1alpha1.PhaseSucceeded, 4*time.Minute)
		s.verifyTargetDisks(m, vms[n])
	}
	ctrl.stop()
	t.Logf("every migration Succeeded %s after the first kill", time.Since(begin).Round(time.Second))

	resent := s.verifyNothingRedone(names, vms, creations)
	t.Logf("crash test: %d migrations, %d kills and restarts, %d bytes re-sent in all, no snapshot left; %s in all",
		len(names), kills, resent, time.Since(begin).Round(time.Second))
}

// verifyNothingRedone checks what a restart must never cost, for named
// migrations that all Succeeded: a watch saw each child created exactly
// once and every expected child created; the transfer ran once with no
// retry spent; vcsim sent each disk's bytes once, plus at most one chunk
// per disk (resumed, not restarted); no snapshot is left on the source;
// and every staging child is gone. It returns the bytes sent again.
func (s *stack) verifyNothingRedone(names []string, vms map[string]*vcsimlocal.VM, creations *creationCounter) int64 {
	t := s.t
	t.Helper()
	var resent int64
	for _, n := range names {
		m := s.get(n)
		require.NotNil(t, m.Status.Transfer, "%s: no transfer status after it succeeded", n)
		require.NotNil(t, m.Status.Conversion, "%s: no conversion status after it succeeded", n)
		want := map[string]int{"VirtualMachine/" + n: 1}
		for _, d := range m.Status.Disks {
			want["PersistentVolumeClaim/"+d.StagingClaim] = 1
			want["DataVolume/"+d.DataVolume] = 1
			want["PersistentVolumeClaim/"+d.DataVolume] = 1 // CDI's target claim
		}
		want["Job/"+m.Status.Transfer.JobName] = 1
		want["Job/"+m.Status.Conversion.JobName] = 1
		// The watches deliver the creations asynchronously: wait until
		// they saw every expected child, then count.
		got := creations.waitSeen(s, string(m.UID), n, want)
		for key, count := range got {
			assert.Equal(t, 1, count, "%s: times %s was created, want once", n, key)
		}
		for key := range want {
			assert.NotZero(t, got[key], "%s: %s never created", n, key)
		}
		assert.Equal(t, int32(1), m.Status.Transfer.Attempt, "%s: transfer attempt (%d retries): a crash cost a retry", n, m.Status.Retries)
		assert.Equal(t, int32(0), m.Status.Retries, "%s: retries (transfer attempt %d): a crash cost a retry", n, m.Status.Transfer.Attempt)
		var total int64
		for _, d := range vms[n].Disks {
			total += d.SizeBytes
		}
		served := s.vc.ExtentBytesServed(n)
		assert.GreaterOrEqual(t, served, total, "%s: bytes vcsim sent for disks of %d bytes, want at least all of them", n, total)
		assert.LessOrEqual(t, served, total+int64(len(vms[n].Disks))*transferChunk,
			"%s: vcsim sent %d bytes for disks of %d bytes: the transfer was restarted, not resumed", n, served, total)
		resent += served - total
		snaps, err := s.vc.Snapshots(s.ctx, n)
		require.NoError(t, err, "%s: listing the source's snapshots", n)
		assert.Empty(t, snaps, "%s: snapshots left on the source", n)
		t.Logf("%s: each of %d children created once; %d bytes served for %d bytes of disks", n, len(got), served, total)
		s.waitNoLeftovers(m, time.Minute)
	}
	return resent
}

// transferChunk is vm-transfer's default chunk: the most a resumed
// transfer may send again per disk.
const transferChunk = 4 << 20

// allSucceeded reports whether every named migration succeeded.
func (s *stack) allSucceeded(names []string) bool {
	for _, n := range names {
		m, err := s.mig.MigrationV1alpha1().VirtualMachineMigrations(s.ns).Get(s.ctx, n, metav1.GetOptions{})
		if err != nil || m.Status.Phase != v1alpha1.PhaseSucceeded {
			return false
		}
	}
	return true
}

// phases is the current phase of each named migration, on one line.
func (s *stack) phases(names []string) string {
	var out []string
	for _, n := range names {
		m, err := s.mig.MigrationV1alpha1().VirtualMachineMigrations(s.ns).Get(s.ctx, n, metav1.GetOptions{})
		if err != nil {
			out = append(out, n+"=?")
			continue
		}
		out = append(out, n+"="+string(m.Status.Phase))
	}
	return strings.Join(out, " ")
}

// creationCounter counts ADDED events per migration UID and kind/name.
type creationCounter struct {
	mu     sync.Mutex
	counts map[string]map[string]int
	// first holds each child as it was created, by migration UID and
	// "Kind/name".
	first map[string]map[string]runtime.Object
}

// created is the child "Kind/name" of the migration uid as it was created.
func (c *creationCounter) created(uid, key string) runtime.Object {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.first[uid][key]
}

// waitSeen waits until the watches saw the creation of every key of want
// for the migration uid (named name), failing after 30s with the keys
// never seen, and returns the counts seen then.
func (c *creationCounter) waitSeen(s *stack, uid, name string, want map[string]int) map[string]int {
	s.t.Helper()
	var got map[string]int
	var missing []string
	s.eventually(30*time.Second, name+": the watches saw every child created", func() bool {
		got, missing = c.of(uid), missing[:0]
		for key := range want {
			if got[key] == 0 {
				missing = append(missing, key)
			}
		}
		return len(missing) == 0
	}, func() string {
		sort.Strings(missing)
		return fmt.Sprintf("never seen created: %v; seen: %v", missing, got)
	})
	return got
}

func (c *creationCounter) of(uid string) map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.counts[uid] {
		out[k] = v
	}
	return out
}

// add counts the creation of an object of kind, keeping the first seen.
func (c *creationCounter) add(kind string, o runtime.Object) {
	obj, ok := o.(metav1.Object)
	if !ok {
		return
	}
	uid := obj.GetLabels()[v1alpha1.LabelMigrationUID]
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts[uid] == nil {
		c.counts[uid] = map[string]int{}
	}
	key := kind + "/" + obj.GetName()
	c.counts[uid][key]++
	if c.first[uid] == nil {
		c.first[uid] = map[string]runtime.Object{}
	}
	if c.first[uid][key] == nil {
		c.first[uid][key] = o.DeepCopyObject()
	}
}

// watchCreations watches every kind of child a migration has, labelled
// with a migration UID, and counts creations.
func (s *stack) watchCreations(t *testing.T) *creationCounter {
	t.Helper()
	c := &creationCounter{counts: map[string]map[string]int{}, first: map[string]map[string]runtime.Object{}}
	opts := metav1.ListOptions{LabelSelector: v1alpha1.LabelMigrationUID}
	type source struct {
		kind  string
		watch func(context.Context, metav1.ListOptions) (watch.Interface, error)
	}
	sources := []source{
		{"PersistentVolumeClaim", s.kube.CoreV1().PersistentVolumeClaims(s.ns).Watch},
		{"ConfigMap", s.kube.CoreV1().ConfigMaps(s.ns).Watch},
		{"Job", s.kube.BatchV1().Jobs(s.ns).Watch},
		{"ServiceAccount", s.kube.CoreV1().ServiceAccounts(s.ns).Watch},
		{"Role", s.kube.RbacV1().Roles(s.ns).Watch},
		{"RoleBinding", s.kube.RbacV1().RoleBindings(s.ns).Watch},
		{"DataVolume", s.cdi.CdiV1beta1().DataVolumes(s.ns).Watch},
		{"VirtualMachine", s.kv.KubevirtV1().VirtualMachines(s.ns).Watch},
	}
	ctx, cancel := context.WithCancel(s.ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	for _, src := range sources {
		w, err := src.watch(ctx, opts)
		require.NoError(t, err, "watching %s", src.kind)
		consumeWatch(t, ctx, &wg, w, src.kind, func(ev watch.Event) {
			if ev.Type == watch.Added {
				c.add(src.kind, ev.Object)
			}
		})
	}
	return c
}

// controllerProcess is the built controller command, run and killed by pid.
type controllerProcess struct {
	t          *testing.T
	s          *stack
	kubeconfig string
	logDir     string
	args       []string
	runs       int
	cmd        *exec.Cmd
	done       chan struct{}
}

// newControllerProcess writes a kubeconfig for the controller's
// ServiceAccount; t's cleanup kills a process still running. The command
// runs without leader election and without metrics or probes; args are
// added after those flags (a repeated flag takes its last value).
func (s *stack) newControllerProcess(t *testing.T, args ...string) *controllerProcess {
	t.Helper()
	dir := t.TempDir()
	rc := s.controllerRC
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = &clientcmdapi.Cluster{Server: rc.Host, CertificateAuthorityData: rc.CAData}
	cfg.AuthInfos["controller"] = &clientcmdapi.AuthInfo{Token: rc.BearerToken}
	cfg.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "controller"}
	cfg.CurrentContext = "e2e"
	path := filepath.Join(dir, "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path), "writing the controller's kubeconfig")
	p := &controllerProcess{t: t, s: s, kubeconfig: path, logDir: dir, args: args}
	t.Cleanup(p.stop)
	return p
}

func (p *controllerProcess) start() {
	p.t.Helper()
	p.runs++
	logFile, err := os.Create(filepath.Join(p.logDir, fmt.Sprintf("controller-%02d.log", p.runs)))
	require.NoError(p.t, err, "creating the controller's log file")
	args := append([]string{
		"--kubeconfig=" + p.kubeconfig, "--namespace=" + p.s.ns, "--workers=4",
		"--transfer-image=" + transferImage, "--conversion-image=" + conversionImage, "--transfer-progress=true",
		"--poll-interval=1s", "--wait-interval=2s", "--leader-elect=false",
		"--metrics-bind-address=", "--health-probe-bind-address=",
	}, p.args...)
	cmd := exec.Command(controllerBinary, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	err = cmd.Start()
	if err != nil {
		logFile.Close()
	}
	require.NoError(p.t, err, "starting the controller")
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(done)
	}()
	p.cmd, p.done = cmd, done
}

// kill sends SIGKILL to the controller's process group and waits for it.
func (p *controllerProcess) kill() {
	if p.cmd == nil {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
	p.cmd = nil
}

// stop ends the controller with SIGTERM (SIGKILL after 10s).
func (p *controllerProcess) stop() {
	if p.cmd == nil {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
	p.cmd = nil
}

// migrationPath is every phase a migration without approval gate or
// failure passes through before Succeeded: the crash test kills the
// controller right after the first migration enters each of them.
var migrationPath = []v1alpha1.Phase{
	v1alpha1.PhaseValidating, v1alpha1.PhaseStoppingSource, v1alpha1.PhaseTransferringDisks,
	v1alpha1.PhaseConverting, v1alpha1.PhaseImporting, v1alpha1.PhaseCreatingVM,
	v1alpha1.PhaseStarting, v1alpha1.PhaseCleaningUp,
}

// watchFirstPhaseEntries watches the namespace's migrations and sends each
// phase of migrationPath once, the first time any migration is seen in it.
// The channel holds every phase, so the watch never blocks on the test.
func (s *stack) watchFirstPhaseEntries(t *testing.T) <-chan v1alpha1.Phase {
	t.Helper()
	out := make(chan v1alpha1.Phase, len(migrationPath))
	want := map[v1alpha1.Phase]bool{}
	for _, p := range migrationPath {
		want[p] = true
	}
	ctx, cancel := context.WithCancel(s.ctx)
	w, err := s.mig.MigrationV1alpha1().VirtualMachineMigrations(s.ns).Watch(ctx, metav1.ListOptions{})
	require.NoError(t, err, "watching the migrations")
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	wg.Go(func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			m, ok := ev.Object.(*v1alpha1.VirtualMachineMigration)
			if !ok || !want[m.Status.Phase] {
				continue
			}
			delete(want, m.Status.Phase)
			out <- m.Status.Phase
		}
	})
	return out
}
