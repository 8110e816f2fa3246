package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
)

const (
	testLeaseNamespace = "vm-migration-system"
	testLeaseName      = "vm-migration-controller"
	testIdentity       = "me"
	otherIdentity      = "other"
)

// election is one runElected under test: a fake API server holding the
// Lease, and what the controller loop saw.
type election struct {
	t    *testing.T
	kube *fake.Clientset
	// leaseDown makes every Lease request fail (the API server is gone
	// for this replica), so that renewing fails.
	leaseDown atomic.Bool
	// renewalsFail makes every Lease update that names a holder fail,
	// while reads and releases (no holder) go through.
	renewalsFail atomic.Bool
	// loopStarted is closed when the loop starts; loopStopped receives the
	// loop's context error once it ends.
	loopStarted chan struct{}
	loopStopped chan error
	// holderAtStop is the Lease holder the loop saw when its context ended.
	holderAtStop atomic.Value
	h            *health
}

func newElection(t *testing.T, otherHolds bool) *election {
	e := &election{t: t, kube: fake.NewClientset(), loopStarted: make(chan struct{}), loopStopped: make(chan error, 1), h: &health{}}
	e.kube.PrependReactor("*", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if e.leaseDown.Load() {
			return true, nil, errors.New("the API server is unreachable")
		}
		if u, ok := a.(k8stesting.UpdateAction); ok && e.renewalsFail.Load() {
			if l, ok := u.GetObject().(*coordinationv1.Lease); ok && ptr.Deref(l.Spec.HolderIdentity, "") != "" {
				return true, nil, errors.New("renewal rejected")
			}
		}
		return false, nil, nil
	})
	if otherHolds {
		lease := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: testLeaseNamespace, Name: testLeaseName},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity: ptr.To(otherIdentity), LeaseDurationSeconds: ptr.To[int32](3600),
				RenewTime: ptr.To(metav1.NewMicroTime(time.Now())), AcquireTime: ptr.To(metav1.NewMicroTime(time.Now())),
			},
		}
		_, err := e.kube.CoordinationV1().Leases(testLeaseNamespace).Create(context.Background(), lease, metav1.CreateOptions{})
		require.NoError(t, err, "creating the lease the other replica holds")
	}
	return e
}

// config is a fast election, with the watchdog.
func (e *election) config() leaderelection.LeaderElectionConfig {
	e.h.watchdog = leaderelection.NewLeaderHealthzAdaptor(time.Minute)
	return leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: testLeaseNamespace, Name: testLeaseName},
			Client:     e.kube.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: testIdentity},
		},
		Name:          "test",
		LeaseDuration: 2 * time.Second,
		RenewDeadline: time.Second,
		RetryPeriod:   100 * time.Millisecond,
		WatchDog:      e.h.watchdog,
	}
}

// holder is the Lease's holder now ("" when released).
func (e *election) holder() string {
	lease, err := e.kube.CoordinationV1().Leases(testLeaseNamespace).Get(context.Background(), testLeaseName, metav1.GetOptions{})
	require.NoError(e.t, err, "reading the lease")
	return ptr.Deref(lease.Spec.HolderIdentity, "")
}

// loop returns a controller loop that signals its start, then ends with
// result, or when its context ends if block is set.
func (e *election) loop(block bool, result error) func(context.Context) error {
	return func(ctx context.Context) error {
		close(e.loopStarted)
		if block {
			<-ctx.Done()
			if lease, err := e.kube.CoordinationV1().Leases(testLeaseNamespace).Get(context.Background(), testLeaseName, metav1.GetOptions{}); err == nil {
				e.holderAtStop.Store(ptr.Deref(lease.Spec.HolderIdentity, ""))
			}
		}
		e.loopStopped <- ctx.Err()
		return result
	}
}

// healthz is the HTTP status /healthz answers now.
func (e *election) healthz() int {
	rec := httptest.NewRecorder()
	e.h.serveHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	return rec.Code
}

// waitFor waits for ch, failing the test after a generous bound.
func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		require.FailNow(t, "timed out after 30s", "%s did not happen", what)
		var zero T
		return zero
	}
}

// TestRunElected runs the leader path against a fake API server (run it
// with -race: the outcome of the loop crosses goroutines).
func TestRunElected(t *testing.T) {
	boom := errors.New("informer caches never synced")
	tests := []struct {
		name string
		// otherHolds: another replica holds a valid Lease, so this one waits.
		otherHolds bool
		block      bool
		loopResult error
		// act runs while the loop runs (or, for a standby, while it waits).
		act         func(e *election, cancel context.CancelFunc)
		wantErr     string
		wantHealthy bool
		// wantHolder is the Lease's holder once runElected returned.
		wantHolder string
		// wantHeldAtStop: the lease was still ours when the loop stopped.
		wantHeldAtStop bool
		wantLoop       bool
	}{{
		name:       "a loop that fails while leading ends the process with its error and releases the lease",
		loopResult: boom, wantErr: "controller loop ended while leading: informer caches never synced",
		wantHolder: "", wantLoop: true,
	}, {
		name:    "a loop that returns nil while leading is an error too",
		wantErr: "controller loop ended while leading: it returned without an error", wantHolder: "", wantLoop: true,
	}, {
		name:  "shutdown stops the loop first, then releases the lease",
		block: true, act: func(e *election, cancel context.CancelFunc) {
			assert.Equal(e.t, http.StatusOK, e.healthz(), "/healthz of a leader whose loop runs")
			cancel()
		},
		wantHealthy: false, wantHolder: "", wantHeldAtStop: true, wantLoop: true,
	}, {
		name:  "a leader cut off from the API server stops its loop and ends the process",
		block: true, act: func(e *election, _ context.CancelFunc) { e.leaseDown.Store(true) },
		wantErr: errLeadershipLost.Error(), wantHolder: testIdentity, wantLoop: true,
	}, {
		name:  "a leader that cannot renew leaves the lease to expire: never released while its workers may act",
		block: true, act: func(e *election, _ context.CancelFunc) { e.renewalsFail.Store(true) },
		wantErr: errLeadershipLost.Error(), wantHolder: testIdentity, wantHeldAtStop: true, wantLoop: true,
	}, {
		name:       "a standby is healthy, never runs the loop and leaves the lease alone",
		otherHolds: true, act: func(e *election, cancel context.CancelFunc) {
			assert.Equal(e.t, http.StatusOK, e.healthz(), "/healthz of a standby")
			cancel()
		},
		wantHealthy: true, wantHolder: otherIdentity,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newElection(t, tt.otherHolds)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- runElected(ctx, e.config(), e.loop(tt.block, tt.loopResult), e.h) }()
			if tt.otherHolds {
				e.waitForLeaseReads(3)
			} else {
				waitFor(t, e.loopStarted, "the loop's start")
			}
			if tt.act != nil {
				tt.act(e, cancel)
			}
			err := waitFor(t, done, "runElected's return")
			if tt.wantErr == "" {
				require.NoError(t, err, "runElected")
			} else {
				require.ErrorContains(t, err, tt.wantErr, "runElected")
			}
			if tt.wantLoop {
				ctxErr := waitFor(t, e.loopStopped, "the loop's end")
				if tt.block {
					assert.Error(t, ctxErr, "the loop ended without its context being cancelled")
				}
			} else {
				select {
				case <-e.loopStarted:
					assert.Fail(t, "a standby ran the controller loop")
				default:
				}
			}
			if tt.wantHealthy {
				assert.Equal(t, http.StatusOK, e.healthz(), "/healthz after runElected returned, want healthy")
			} else {
				assert.NotEqual(t, http.StatusOK, e.healthz(), "/healthz after runElected returned, want unhealthy")
			}
			e.leaseDown.Store(false)
			assert.Equal(t, tt.wantHolder, e.holder(), "lease holder")
			if tt.wantHeldAtStop {
				held, _ := e.holderAtStop.Load().(string)
				assert.Equal(t, testIdentity, held, "lease holder when the loop stopped (not ours: released before the workers stopped)")
			}
		})
	}
}

// TestRunAlone: without election, a loop that returns while its context
// is live ends the process with an error too.
func TestRunAlone(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context
		result  error
		wantErr string
	}{
		{"loop fails", context.Background(), errors.New("no KubeVirt"), "no KubeVirt"},
		{"loop returns nil while ctx is live", context.Background(), nil, "returned without an error"},
		{"loop stops at shutdown", cancelled, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &health{}
			err := runAlone(tt.ctx, func(context.Context) error { return tt.result }, h)
			if tt.wantErr == "" {
				assert.NoError(t, err, "runAlone")
			} else {
				assert.ErrorContains(t, err, tt.wantErr, "runAlone")
			}
			assert.Error(t, h.check(nil), "healthy after the loop ended")
		})
	}
}

// waitForLeaseReads waits until the candidate read the Lease n times
// (it tried to acquire it n times).
func (e *election) waitForLeaseReads(n int) {
	e.t.Helper()
	require.EventuallyWithT(e.t, func(c *assert.CollectT) {
		gets := 0
		for _, a := range e.kube.Actions() {
			if a.GetResource().Resource == "leases" && a.GetVerb() == "get" {
				gets++
			}
		}
		assert.GreaterOrEqual(c, gets, n, "lease reads")
	}, 30*time.Second, 10*time.Millisecond, "the candidate did not read the lease %d times", n)
}

// TestElectionIdentityIsPerProcess: two processes on one host must not
// share an identity, or each would take the other's lease for its own.
func TestElectionIdentityIsPerProcess(t *testing.T) {
	f := &flags{leaseNamespace: testLeaseNamespace, leaseName: testLeaseName}
	kube := fake.NewClientset()
	a, err := electionConfig(f, kube, &health{})
	require.NoError(t, err, "the first election config")
	b, err := electionConfig(f, kube, &health{})
	require.NoError(t, err, "the second election config")
	assert.NotEqual(t, a.Lock.Identity(), b.Lock.Identity(), "two election configs share an identity")
}

// TestLeaderElectDefault: leader election is on unless turned off.
func TestLeaderElectDefault(t *testing.T) {
	tests := []struct {
		args []string
		want bool
	}{
		{nil, true},
		{[]string{"--leader-elect=false"}, false},
		{[]string{"--leader-elect"}, true},
	}
	for _, tt := range tests {
		f, err := parseFlags(tt.args)
		require.NoError(t, err, "parsing %v", tt.args)
		assert.Equal(t, tt.want, f.leaderElect, "%v: leaderElect", tt.args)

	}
}
