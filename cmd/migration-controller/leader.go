package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// Leader election timings. A standby takes the lease over once it saw no
// renewal for leaseDuration (it looks every retryPeriod, with jitter); a
// leader that could not renew within renewDeadline stops and exits.
const (
	leaseDuration = 15 * time.Second
	renewDeadline = 10 * time.Second
	retryPeriod   = 2 * time.Second
	// watchdogTimeout is how long past its lease a leader that stopped
	// renewing (a stuck elector) stays healthy before /healthz fails.
	watchdogTimeout = 20 * time.Second
)

// errLeadershipLost ends a leader that could not renew its lease: another
// replica may lead from now on, so this one must stop acting at once.
var errLeadershipLost = errors.New("leader election lost: the lease could not be renewed")

// health is what /healthz reports: a standby that is not leading is
// healthy, a leader is healthy while its controller loop runs and its
// elector renews the lease.
type health struct {
	// loopEnded is set once the controller loop returned or was stopped.
	loopEnded atomic.Bool
	// watchdog fails a leader that stopped renewing; nil without election.
	watchdog *leaderelection.HealthzAdaptor
}

// check returns why the process is not healthy, or nil.
func (h *health) check(r *http.Request) error {
	if h.loopEnded.Load() {
		return errors.New("the controller loop ended")
	}
	if h.watchdog != nil {
		if err := h.watchdog.Check(r); err != nil {
			return fmt.Errorf("leader election: %w", err)
		}
	}
	return nil
}

// serveHTTP answers /healthz.
func (h *health) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if err := h.check(r); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	_, _ = w.Write([]byte("ok"))
}

// electionConfig is the leader election of f's Lease for this process.
// The identity is the host name plus a random suffix, unique per process:
// a restarted process, or a second one on the same host, never mistakes
// the lease of another for its own.
func electionConfig(f *flags, kube kubernetes.Interface, h *health) (leaderelection.LeaderElectionConfig, error) {
	host, err := os.Hostname()
	if err != nil {
		return leaderelection.LeaderElectionConfig{}, fmt.Errorf("reading hostname for the leader election identity: %w", err)
	}
	h.watchdog = leaderelection.NewLeaderHealthzAdaptor(watchdogTimeout)
	return leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: f.leaseNamespace, Name: f.leaseName},
			Client:     kube.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: host + "_" + string(uuid.NewUUID())},
		},
		Name:          f.leaseNamespace + "/" + f.leaseName,
		LeaseDuration: leaseDuration,
		RenewDeadline: renewDeadline,
		RetryPeriod:   retryPeriod,
		WatchDog:      h.watchdog,
	}, nil
}

// runElected waits to lead, then runs loop until ctx ends. It returns nil
// when ctx ended (the loop stopped first, then the lease was released) and
// an error when the loop returned while leading (the lease is released so
// that a standby takes over at once) or when the lease could not be
// renewed (then at once, without waiting for the loop or releasing the
// lease: another replica may lead). Either error must end the process: a
// replica that renews a lease while its loop is dead, or acts without the
// lease, is what election prevents.
//
// The elector never releases the lease itself (client-go's ReleaseOnCancel
// releases it when renewal fails before it cancels the leader's context,
// and a standby could then act beside workers still running): its context
// ends only when this function says so, and releaseLease gives the lease
// up after the loop returned.
func runElected(ctx context.Context, ec leaderelection.LeaderElectionConfig, loop func(context.Context) error, h *health) error {
	logger := klog.FromContext(ctx).WithValues("identity", ec.Lock.Identity())
	electCtx, stopElecting := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElecting()
	leading := make(chan context.Context, 1)
	ec.ReleaseOnCancel = false
	ec.Callbacks = leaderelection.LeaderCallbacks{
		OnStartedLeading: func(lctx context.Context) { leading <- lctx },
		OnStoppedLeading: func() {},
	}
	le, err := leaderelection.NewLeaderElector(ec)
	if err != nil {
		return fmt.Errorf("configuring leader election: %w", err)
	}
	if ec.WatchDog != nil {
		ec.WatchDog.SetLeaderElection(le)
	}
	electing := make(chan struct{})
	go func() {
		defer close(electing)
		le.Run(electCtx)
	}()
	release := func() {
		stopElecting()
		<-electing
		if err := releaseLease(ec.Lock, ec.RenewDeadline); err != nil {
			logger.Error(err, "the lease expires by itself")
		}
	}
	logger.Info("waiting to lead", "lease", ec.Name)
	var lctx context.Context
	select {
	case <-ctx.Done():
		release() // in case it was acquired just now
		return nil
	case <-electing:
		return errLeadershipLost
	case lctx = <-leading:
	}
	logger.Info("leading: starting the controller loop")
	err = lead(ctx, lctx, loop, electing, h)
	switch {
	case errors.Is(err, errLeadershipLost):
		logger.Info("leadership lost: exiting without waiting for the workers")
		return err
	case ctx.Err() != nil:
		logger.Info("shutting down: the controller loop stopped, releasing the lease")
	default:
		logger.Error(err, "releasing the lease")
	}
	release()
	return err
}

// releaseLease gives the lease up if this process still holds it, so that
// a standby takes over without waiting for it to expire: no holder, and a
// one-second duration. Call it only once the elector stopped renewing and
// the loop the lease guards has returned. The update is conditional on the
// version read, so a lease another replica took meanwhile stays theirs.
func releaseLease(lock resourcelock.Interface, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	current, _, err := lock.Get(ctx)
	if err != nil {
		return fmt.Errorf("reading the lease to release it: %w", err)
	}
	if current.HolderIdentity != lock.Identity() {
		return nil
	}
	now := metav1.Now()
	released := resourcelock.LeaderElectionRecord{
		LeaseDurationSeconds: 1, AcquireTime: now, RenewTime: now, LeaderTransitions: current.LeaderTransitions,
	}
	if err := lock.Update(ctx, released); err != nil {
		return fmt.Errorf("releasing the lease: %w", err)
	}
	return nil
}

// runAlone runs loop without leader election until ctx ends. A loop that
// returns while ctx is live is an error, as it is for a leader.
func runAlone(ctx context.Context, loop func(context.Context) error, h *health) error {
	err := loop(ctx)
	h.loopEnded.Store(true)
	if err == nil && ctx.Err() == nil {
		return errors.New("controller loop ended: it returned without an error")
	}
	return err
}

// lead runs loop while this process leads: until ctx ends (nil, or the
// loop's error), the loop returns while leading (an error wrapping its
// result), or electing ends because the lease could not be renewed
// (errLeadershipLost, at once). h records that the loop ended.
func lead(ctx, lctx context.Context, loop func(context.Context) error, electing <-chan struct{}, h *health) error {
	loopCtx, stopLoop := context.WithCancel(lctx)
	defer stopLoop()
	stopOnSignal := context.AfterFunc(ctx, stopLoop)
	defer stopOnSignal()
	loopDone := make(chan error, 1)
	go func() { loopDone <- loop(loopCtx) }()
	select {
	case <-electing:
		h.loopEnded.Store(true)
		return errLeadershipLost
	case err := <-loopDone:
		h.loopEnded.Store(true)
		switch {
		case ctx.Err() != nil:
			return err
		case lctx.Err() != nil:
			return errLeadershipLost
		case err == nil:
			return errors.New("controller loop ended while leading: it returned without an error")
		default:
			return fmt.Errorf("controller loop ended while leading: %w", err)
		}
	}
}
