package controller

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/steps"
)

// conflictRequeue is when a reconcile that met a write conflict, or lost a
// transfer slot to another worker, looks again, in case the informer event
// that resolves it was already handled.
const conflictRequeue = time.Second

// staleCacheRequeue is when a reconcile that found the cache behind this
// controller's last status write looks again, should the informer event
// that brings the write have been handled before it.
const staleCacheRequeue = 200 * time.Millisecond

// endpointBusyRequeue is when a migration whose vSphere endpoint ran its
// limit of operations looks again: one to three seconds, spread so that
// the waiting migrations do not all come back at once.
func endpointBusyRequeue() time.Duration {
	return time.Second + time.Duration(rand.Int64N(int64(2*time.Second)))
}

// sync reconciles one migration: read it from the cache, observe, decide,
// take the transfer and conversion slots the decision needs, write status
// if it changed, record the events, act once. It returns when to look
// again while waiting.
func (c *Controller) sync(ctx context.Context, key cache.ObjectName) (time.Duration, error) {
	m, err := c.migrations.VirtualMachineMigrations(key.Namespace).Get(key.Name)
	if err == nil && c.decided.stale(key, m.ResourceVersion) {
		// The cache has not seen this controller's last write yet: its
		// informer event brings the migration back.
		return staleCacheRequeue, nil
	}
	if err == nil {
		m, err = c.wholeMigration(ctx, m)
	}
	if apierrors.IsNotFound(err) {
		c.slots.settle(key, "", c.clock.Now())
		c.conversions.settle(key, false)
		c.claims.settle(key, true, c.clock.Now())
		c.decided.forget(key)
		c.forget(key)
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading the migration: %w", err)
	}
	logger := klog.FromContext(ctx).WithValues("migration", key.String(), "phase", m.Status.Phase)
	ctx = klog.NewContext(ctx, logger)
	c.remember(m)

	obs, err := c.observe(ctx, m)
	if err != nil {
		return 0, fmt.Errorf("observing: %w", err)
	}
	if e := obs.Source.Error; e != nil && e.Reason == steps.ReasonEndpointBusy {
		// Nothing was learnt: look again in a moment, deciding nothing.
		return endpointBusyRequeue(), nil
	}
	in := statemachine.Input{Migration: m, Observation: obs, Now: metav1.NewTime(c.clock.Now()).Rfc3339Copy(), Config: c.cfg.Decisions}
	dec := statemachine.Decide(in)
	markDurations(m, &dec, in.Now)
	if !c.reserveSlots(m, dec) || !c.reserveClaims(m, dec) {
		return conflictRequeue, nil
	}
	cur, retry, err := c.writeStatus(ctx, m, dec)
	if cur == nil || err != nil {
		c.dropReservations(m)
		return retry, err
	}
	c.decided.wrote(key, m.ResourceVersion, cur.ResourceVersion)
	c.recordEvents(cur, dec.Events)
	c.noteAbandoned(ctx, cur, dec.Events)
	c.remember(cur)
	if err := c.act(ctx, cur, dec.Action); err != nil {
		return c.actionFailed(ctx, in, cur, dec.Action, err)
	}
	if finished(cur) {
		// It just ended: no look again, whatever the decision asked.
		return 0, nil
	}
	return dec.RequeueAfter, nil
}

// actionFailed hands a failed action to the state machine, classified, and
// writes what it decides: a wait with a condition, or the failure of the
// migration. Only an error writing that status goes back to the queue.
func (c *Controller) actionFailed(ctx context.Context, in statemachine.Input, cur *v1alpha1.VirtualMachineMigration, a statemachine.Action, err error) (time.Duration, error) {
	klog.FromContext(ctx).Info("action failed", "action", a.Type, "error", err.Error())
	in.Migration, in.Observation = cur, statemachine.Observation{}
	dec := statemachine.ActionFailed(in, a, steps.Classify(err))
	markDurations(cur, &dec, in.Now)
	next, retry, err := c.writeStatus(ctx, cur, dec)
	if next == nil || err != nil {
		return retry, err
	}
	c.decided.wrote(cache.MetaObjectToName(cur), cur.ResourceVersion, next.ResourceVersion)
	c.recordEvents(next, dec.Events)
	return dec.RequeueAfter, nil
}

// reserveSlot is the explicit reservation step: a decision that moves the
// migration into a slot-holding phase takes the slot now, and is dropped
// (false) when another worker took the last one since it was observed.
// Any other decision releases a reservation its phase no longer needs.
func (c *Controller) reserveSlot(m *v1alpha1.VirtualMachineMigration, dec statemachine.Decision) bool {
	key, now := cache.MetaObjectToName(m), c.clock.Now()
	if !holdsSlot(dec.Status.Phase) || holdsSlot(m.Status.Phase) {
		c.slots.settle(key, dec.Status.Phase, now)
		return true
	}
	holders, err := c.slotCounted(m)
	if err != nil {
		return false
	}
	return c.slots.reserve(m, holders, c.limits(), now)
}

// reserveSlots takes the transfer slot and the conversion slot a decision
// that stops the source needs, both or neither: it is dropped (false)
// when another worker took the last of either since it was observed.
func (c *Controller) reserveSlots(m *v1alpha1.VirtualMachineMigration, dec statemachine.Decision) bool {
	if !c.reserveSlot(m, dec) {
		return false
	}
	if !c.reserveConversion(m, dec) {
		c.slots.settle(cache.MetaObjectToName(m), m.Status.Phase, c.clock.Now())
		return false
	}
	return true
}

// reserveClaims is the explicit reservation of the claims a decision that
// validated the migration records (its source VM, its target name): it is
// dropped (false) when another worker took one since it was observed. A
// migration that ended releases its claims.
func (c *Controller) reserveClaims(m *v1alpha1.VirtualMachineMigration, dec statemachine.Decision) bool {
	key, now := cache.MetaObjectToName(m), c.clock.Now()
	next := dec.Status.Phase
	validated := m.Status.Phase == v1alpha1.PhaseValidating &&
		(next == v1alpha1.PhaseAwaitingApproval || next == v1alpha1.PhaseQueued)
	if !validated {
		c.claims.settle(key, statemachine.IsTerminal(next), now)
		return true
	}
	want := claimOf(m, &dec.Status)
	holders, err := c.claimHolders(want)
	if err != nil {
		return false
	}
	return c.claims.reserve(m, want, holders, now)
}

// dropReservations forgets the slots and claims reserved for a decision
// whose status was not written: nothing will show them in the cache.
func (c *Controller) dropReservations(m *v1alpha1.VirtualMachineMigration) {
	key := cache.MetaObjectToName(m)
	c.slots.settle(key, m.Status.Phase, c.clock.Now())
	c.conversions.settle(key, statemachine.HoldsConversionSlot(m))
	c.claims.drop(key)
}

// writeStatus writes the decision's status when it differs from m's. It
// returns the object to act on, or nil (with when to look again) when the
// write met a conflict or the migration is gone.
func (c *Controller) writeStatus(ctx context.Context, m *v1alpha1.VirtualMachineMigration, dec statemachine.Decision) (*v1alpha1.VirtualMachineMigration, time.Duration, error) {
	if equality.Semantic.DeepEqual(dec.Status, m.Status) {
		return m, 0, nil
	}
	if isSummary(m) {
		return nil, 0, errSummaryWrite
	}
	upd := m.DeepCopy()
	upd.Status = dec.Status
	cur, err := c.clients.Migration.MigrationV1alpha1().VirtualMachineMigrations(m.Namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, 0, nil
	case apierrors.IsConflict(err):
		// The cache is behind the server: the informer brings the newer
		// object and a new reconcile; nothing was done on stale data.
		return nil, conflictRequeue, nil
	case err != nil:
		return nil, 0, fmt.Errorf("writing status: %w", err)
	}
	statusWrites.Inc()
	if dec.Status.Phase != m.Status.Phase {
		klog.FromContext(ctx).Info("phase changed", "to", dec.Status.Phase)
		observePhaseExit(m, &dec.Status)
		observeValidationWait(m, &dec.Status)
	}
	observeDowntime(m, &dec.Status)
	return cur, 0, nil
}

// recordEvents records the decision's events once its status is written.
func (c *Controller) recordEvents(m *v1alpha1.VirtualMachineMigration, events []statemachine.Event) {
	for _, e := range events {
		eventType := corev1.EventTypeNormal
		if e.Warning {
			eventType = corev1.EventTypeWarning
		}
		c.recorder.Event(m, eventType, e.Reason, e.Message)
	}
}
