package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"platform.example/vm-migration/pkg/statemachine"
)

// conflictRequeue is when a reconcile that met a write conflict looks
// again, in case the informer event that resolves it was already handled.
const conflictRequeue = time.Second

// sync reconciles one migration: read, observe, decide, write status if it
// changed, act once. It returns when to look again while waiting.
func (c *Controller) sync(ctx context.Context, key cache.ObjectName) (time.Duration, error) {
	cached, err := c.migrations.VirtualMachineMigrations(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		c.slots.settle(key, "")
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading migration from cache: %w", err)
	}
	m := cached.DeepCopy()
	logger := klog.FromContext(ctx).WithValues("migration", key.String(), "phase", m.Status.Phase)
	ctx = klog.NewContext(ctx, logger)

	obs, err := c.gather(ctx, m)
	if err != nil {
		return 0, fmt.Errorf("observing: %w", err)
	}
	dec := statemachine.Decide(statemachine.Input{
		Migration:   m,
		Observation: obs,
		Now:         metav1.NewTime(c.clock.Now()).Rfc3339Copy(),
		Config:      c.cfg.Decisions,
	})
	c.slots.settle(key, dec.Status.Phase)

	cur := m
	if !equality.Semantic.DeepEqual(dec.Status, m.Status) {
		upd := m.DeepCopy()
		upd.Status = dec.Status
		cur, err = c.clients.Migration.MigrationV1alpha1().VirtualMachineMigrations(m.Namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			return 0, nil
		}
		if apierrors.IsConflict(err) {
			// The cache is behind the server: the informer brings the newer
			// object and a new reconcile; nothing was done on stale data.
			return conflictRequeue, nil
		}
		if err != nil {
			return 0, fmt.Errorf("writing status: %w", err)
		}
		statusWrites.Inc()
		if dec.Status.Phase != m.Status.Phase {
			logger.Info("phase changed", "to", dec.Status.Phase)
			observePhaseExit(m, &dec.Status)
		}
	}
	for _, e := range dec.Events {
		eventType := corev1.EventTypeNormal
		if e.Warning {
			eventType = corev1.EventTypeWarning
		}
		c.recorder.Event(cur, eventType, e.Reason, e.Message)
	}
	if dec.Action.Type != statemachine.ActionNone {
		logger.V(2).Info("acting", "action", dec.Action.Type, "name", dec.Action.Name, "attempt", dec.Action.Attempt)
		err := c.execute(ctx, cur, dec.Action)
		recordAction(dec.Action.Type, err)
		if apierrors.IsConflict(err) {
			return conflictRequeue, nil
		}
		if err != nil {
			c.recorder.Eventf(cur, corev1.EventTypeWarning, statemachine.ReasonActionFailed, "%s failed: %v", dec.Action.Type, err)
			return 0, fmt.Errorf("%s: %w", dec.Action.Type, err)
		}
		actionsTotal.WithLabelValues(string(dec.Action.Type)).Inc()
	}
	return dec.RequeueAfter, nil
}
