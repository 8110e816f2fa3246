package controller

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"platform.example/vm-migration/pkg/untrusted"
)

// ReasonReconcilePanic is the event reason of a reconcile that panicked.
const ReasonReconcilePanic = "ReconcilePanic"

// maxPanicMessage bounds how much of a panic's value an event quotes.
const maxPanicMessage = 512

var reconcilePanics = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "vm_migration_reconcile_panics_total",
	Help: "Reconciles that panicked. Each became that migration's failed reconcile (retried with backoff, a ReconcilePanic event on it, the stack in the controller's log); the process and every other migration went on.",
})

// panicError is a panic recovered from a reconcile: its value and the
// stack where it was raised.
type panicError struct {
	value any
	stack []byte
}

// Error is the panic's value; the stack goes to the log only.
func (e *panicError) Error() string {
	return fmt.Sprintf("reconcile panicked: %v", e.value)
}

// recovering runs work and turns a panic in it into a *panicError, so
// that a panic in one migration's reconcile (a defect, whatever its
// cause: a guest's string, a peer's object) fails that reconcile and
// never ends the process, which serves every other migration.
func recovering(ctx context.Context, key cache.ObjectName, work func(context.Context, cache.ObjectName) (time.Duration, error)) (requeueAfter time.Duration, err error) {
	defer func() {
		if v := recover(); v != nil {
			requeueAfter, err = 0, &panicError{value: v, stack: debug.Stack()}
		}
	}()
	return work(ctx, key)
}

// notePanic records a recovered panic of key's reconcile: the counter,
// the stack in the log and a Warning event on the migration (when the
// cache still holds it). It reports whether err was a panic.
func (c *Controller) notePanic(ctx context.Context, key cache.ObjectName, err error) bool {
	var p *panicError
	if !errors.As(err, &p) {
		return false
	}
	reconcilePanics.Inc()
	klog.FromContext(ctx).Error(err, "reconcile panicked; the migration's reconcile failed and is retried with backoff, the controller goes on",
		"migration", key.String(), "stack", string(p.stack))
	c.recordPanic(key, p)
	return true
}

// recordPanic records the Warning event of p on key's migration, when the
// cache holds it. Best effort: the event's own failure (a panic too, if
// what panicked was the cache) is logged and dropped.
func (c *Controller) recordPanic(key cache.ObjectName, p *panicError) {
	defer func() {
		if v := recover(); v != nil {
			klog.Background().Error(nil, "recording a reconcile's panic panicked", "migration", key.String(), "panic", v)
		}
	}()
	m, err := c.migrations.VirtualMachineMigrations(key.Namespace).Get(key.Name)
	if err != nil {
		return
	}
	c.recorder.Eventf(m, corev1.EventTypeWarning, ReasonReconcilePanic,
		"The controller's reconcile of this migration panicked (%s), a defect of the controller: it retries with backoff, the other migrations are not affected, and the controller's log holds the stack. Please report it.",
		untrusted.Clean(fmt.Sprint(p.value), maxPanicMessage))
}
