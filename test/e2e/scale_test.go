//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/test/vcsimlocal"
)

// TestTwentyAtOnceWithTransferLimit starts twenty migrations from one ESXi
// host with MaxTransfersPerHost=4. The downloads are held at first, so the
// first four transfers stay in flight while the others queue; a watch on
// the pods samples how many transfer pods run at once: never more than 4,
// and 4 reached. Then everything completes with the right bytes.
func TestTwentyAtOnceWithTransferLimit(t *testing.T) {
	const n, limit = 20, 4
	// Conversions do not pace the stops here: the test counts transfers
	// in flight, and this node's conversion slots (--max-conversions=auto)
	// would hold the stops below the transfer limit.
	s := newStack(t, stackOptions{maxTransfersPerHost: limit, extraControllerArgs: []string{"--max-conversions=0"}})
	vms := map[string]*vcsimlocal.VM{}
	var releases []func()
	for i := range n {
		name := fmt.Sprintf("vm-%02d", i)
		vm, err := s.vc.AddVM(s.ctx, vcsimlocal.SmallVM(name, uint64(100+i)))
		require.NoError(t, err, "adding VM %s to vcsim", name)
		vms[name] = vm
		releases = append(releases, s.vc.HoldExtentReads(name))
	}
	releaseAll := func() {
		for _, r := range releases {
			r()
		}
	}
	t.Cleanup(releaseAll)

	counter := s.watchRunningTransfers(t)
	for name := range vms {
		s.create(s.newMigration(name, name))
	}

	// The first transfers hold their slots; the others wait for one.
	s.waitFor("vm-00", 2*time.Minute, "4 transfers in flight", func(*v1alpha1.VirtualMachineMigration) bool {
		return counter.current() == limit
	})
	// The others may still be validating on a loaded machine: wait until
	// every migration holds a slot or is queued for one, then let the
	// queued ones try a while.
	slots := func() (holding, queued int, phases map[v1alpha1.Phase]int) {
		list, err := s.mig.MigrationV1alpha1().VirtualMachineMigrations(s.ns).List(s.ctx, metav1.ListOptions{})
		require.NoError(t, err, "listing the migrations")
		phases = map[v1alpha1.Phase]int{}
		for _, m := range list.Items {
			phases[m.Status.Phase]++
			switch m.Status.Phase {
			case v1alpha1.PhaseStoppingSource, v1alpha1.PhaseTransferringDisks:
				holding++
			case v1alpha1.PhaseQueued:
				queued++
			}
		}
		return holding, queued, phases
	}
	var phases map[v1alpha1.Phase]int
	s.eventually(2*time.Minute, "every migration holds a transfer slot or is queued for one", func() bool {
		holding, queued, seen := slots()
		phases = seen
		return holding+queued == n
	}, func() string { return fmt.Sprintf("migrations by phase: %v", phases) })
	time.Sleep(3 * time.Second) // let the queued ones try
	holding, queued, phases := slots()
	assert.Equal(t, limit, holding, "migrations holding a transfer slot (%d queued; by phase: %v)", queued, phases)
	assert.Equal(t, n-limit, queued, "migrations queued for a transfer slot (%d holding one)", holding)

	releaseAll()
	for name, vm := range vms {
		m := s.waitPhase(name, v1alpha1.PhaseSucceeded, 4*time.Minute)
		if assert.Len(t, m.Status.Disks, 1, "%s: disks in status, want the source's one", name) {
			assert.Equal(t, vm.Disks[0].SHA256, m.Status.Disks[0].SHA256, "%s: sha256 of the transferred disk, want the source's", name)
		}
	}
	assert.Equal(t, limit, counter.max(), "transfer pods running at once at most, want exactly the limit")
	t.Logf("%d migrations succeeded; at most %d transfer pods ran at once (%d pod updates seen)", n, counter.max(), counter.events())
}

// transferCounter follows the running transfer pods of a namespace.
type transferCounter struct {
	mu      sync.Mutex
	running map[string]bool
	peak    int
	seen    int
}

func (c *transferCounter) current() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.running)
}

func (c *transferCounter) max() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.peak
}

func (c *transferCounter) events() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen
}

// watchRunningTransfers watches the transfer pods of the namespace and
// counts those Running, at every change.
func (s *stack) watchRunningTransfers(t *testing.T) *transferCounter {
	t.Helper()
	c := &transferCounter{running: map[string]bool{}}
	w, err := s.kube.CoreV1().Pods(s.ns).Watch(s.ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelComponent + "=transfer"})
	require.NoError(t, err, "watching the transfer pods")
	ctx, cancel := context.WithCancel(s.ctx)
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		w.Stop()
		<-done
	})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				pod, isPod := ev.Object.(*corev1.Pod)
				if !isPod {
					continue
				}
				c.mu.Lock()
				c.seen++
				if ev.Type != watch.Deleted && pod.Status.Phase == corev1.PodRunning && pod.DeletionTimestamp == nil {
					c.running[pod.Name] = true
				} else {
					delete(c.running, pod.Name)
				}
				c.peak = max(c.peak, len(c.running))
				c.mu.Unlock()
			}
		}
	}()
	return c
}
