package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
)

// ReasonExpired is the reason of the event that records a finished
// migration's evidence just before its time to live ends it.
const ReasonExpired = "Expired"

// A finished migration retires when its time to live ends
// (spec.ttlSecondsAfterFinished, or the controller's default): its key
// comes back to the queue then (scheduleExpiry), and instead of a
// reconcile it is deleted (expire), after its evidence was recorded in an
// event and the log. The deletion is then a deletion like any other: the
// finalizer keeps the migrated VM and its disks.

// scheduleExpiry queues a finished migration's key for when its time to
// live ends, if one applies; the queue keeps the earliest of several.
func (c *Controller) scheduleExpiry(m *v1alpha1.VirtualMachineMigration) {
	at, ok := statemachine.TTLExpiry(m, c.cfg.DefaultTTLAfterFinished)
	if !ok {
		return
	}
	c.queue.AddAfter(cache.MetaObjectToName(m), max(at.Sub(c.clock.Now()), 0))
}

// handleFinished handles the key of a migration the cache holds finished,
// instead of a reconcile: a key queued before it ended is dropped, one
// whose time to live has not ended yet comes back when it does, and one
// whose time to live ended is expired. It reports false when the cache
// does not hold the migration finished (the key is reconciled).
func (c *Controller) handleFinished(ctx context.Context, key cache.ObjectName) bool {
	cached, err := c.migrations.VirtualMachineMigrations(key.Namespace).Get(key.Name)
	if err != nil || !finished(cached) {
		return false
	}
	c.queue.Forget(key)
	at, ok := statemachine.TTLExpiry(cached, c.cfg.DefaultTTLAfterFinished)
	if wait := at.Sub(c.clock.Now()); !ok || wait > 0 {
		if ok {
			c.queue.AddAfter(key, wait)
		}
		finishedSkips.Inc()
		return true
	}
	c.reconcile(ctx, key, c.expire)
	return true
}

// expire deletes a finished migration whose time to live ended. It reads
// the migration whole from the API server (the cache holds a summary) and
// decides again on that: a migration that changed meanwhile is left to
// its informer event, one whose TTL moved comes back later (the returned
// delay). Then it records the evidence in an event and a log line, and
// deletes the migration with preconditions on the UID and the
// resourceVersion it read, so that what goes is what was recorded.
func (c *Controller) expire(ctx context.Context, key cache.ObjectName) (time.Duration, error) {
	api := c.clients.Migration.MigrationV1alpha1().VirtualMachineMigrations(key.Namespace)
	m, err := api.Get(ctx, key.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading the finished migration whole: %w", err)
	}
	if !finished(m) {
		return 0, nil
	}
	at, ok := statemachine.TTLExpiry(m, c.cfg.DefaultTTLAfterFinished)
	if wait := at.Sub(c.clock.Now()); !ok || wait > 0 {
		return max(wait, 0), nil
	}
	record := evidenceRecord(m)
	klog.FromContext(ctx).Info("deleting a finished migration: its time to live ended",
		"migration", key.String(), "uid", m.UID, "phase", m.Status.Phase, "evidence", record)
	c.recorder.Event(m, corev1.EventTypeNormal, ReasonExpired,
		"time to live ended: deleting the migration, keeping what it produced; evidence: "+record)
	err = api.Delete(ctx, m.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &m.UID, ResourceVersion: &m.ResourceVersion}})
	switch {
	case apierrors.IsNotFound(err):
		return 0, nil
	case apierrors.IsConflict(err):
		// It changed since it was read: look again.
		return conflictRequeue, nil
	case err != nil:
		return 0, fmt.Errorf("deleting the finished migration: %w", err)
	}
	expiredTotal.Inc()
	return 0, nil
}
