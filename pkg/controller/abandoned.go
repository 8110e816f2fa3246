package controller

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
)

// A migration whose namespace is being deleted, and whose source it
// stopped, must still power the source on before its finalizer goes. The
// credentials the source step kept in memory normally let it; when none
// are kept (the controller restarted meanwhile), the state machine gives
// the restore up rather than hold the namespace for ever, and the
// controller says so where it outlives the namespace: its log and the
// metric vm_migration_source_restore_abandoned, which the alert
// VMMigrationSourceRestoreAbandoned names the source VM from (the event
// on the migration goes with the namespace, when a Terminating namespace
// takes it at all).

// abandonedRetention is how long a source left powered off stays in the
// metric (the alert fires for its first 24 hours).
const abandonedRetention = 7 * 24 * time.Hour

// abandonedHelp is the help of vm_migration_source_restore_abandoned.
const abandonedHelp = "Unix time the controller gave up powering on again a source VM it had stopped, because the migration's namespace was being deleted and vSphere could no longer be reached for it: the VM was left powered off. Kept in the controller's memory for a week."

var abandonedDesc = prometheus.NewDesc("vm_migration_source_restore_abandoned", abandonedHelp,
	[]string{"namespace", "migration", "source_vm", "endpoint"}, nil)

// abandonedSources remembers the sources left powered off, for the metric.
type abandonedSources struct {
	mu      sync.Mutex
	now     func() time.Time
	entries map[abandonedKey]time.Time
}

type abandonedKey struct{ namespace, migration, vm, endpoint string }

func newAbandonedSources(now func() time.Time) *abandonedSources {
	return &abandonedSources{now: now, entries: map[abandonedKey]time.Time{}}
}

// record notes that m's source was left powered off at.
func (a *abandonedSources) record(m *v1alpha1.VirtualMachineMigration, at time.Time) {
	k := abandonedKey{namespace: m.Namespace, migration: m.Name, endpoint: m.SpecInForce().Source.URL}
	if src := m.Status.Source; src != nil {
		k.vm = src.Name
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.entries[k] = at
}

// Describe implements prometheus.Collector.
func (a *abandonedSources) Describe(ch chan<- *prometheus.Desc) { ch <- abandonedDesc }

// Collect implements prometheus.Collector; it drops entries older than
// abandonedRetention.
func (a *abandonedSources) Collect(ch chan<- prometheus.Metric) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, at := range a.entries {
		if a.now().Sub(at) > abandonedRetention {
			delete(a.entries, k)
			continue
		}
		ch <- prometheus.MustNewConstMetric(abandonedDesc, prometheus.GaugeValue, float64(at.Unix()), k.namespace, k.migration, k.vm, k.endpoint)
	}
}

// noteAbandoned logs and counts a restore the decision just gave up.
func (c *Controller) noteAbandoned(ctx context.Context, m *v1alpha1.VirtualMachineMigration, events []statemachine.Event) {
	i := slices.IndexFunc(events, func(e statemachine.Event) bool { return e.Reason == statemachine.ReasonSourceRestoreAbandoned })
	if i < 0 {
		return
	}
	c.abandoned.record(m, c.clock.Now())
	vm := ""
	if src := m.Status.Source; src != nil {
		vm = src.Name
	}
	klog.FromContext(ctx).Error(nil, "Source VM left powered off: its migration's namespace is being deleted and vSphere cannot be reached for it",
		"sourceVM", vm, "endpoint", m.SpecInForce().Source.URL, "detail", events[i].Message)
}

// namespaceTerminating reports whether the namespace is being deleted (or
// gone). It reads the namespace from the API server: it is asked only for
// a deleted migration whose restore could not read its source, rarely; an
// error (the controller may not read namespaces) counts as not
// terminating, so that the restore keeps waiting as anywhere else.
func (c *Controller) namespaceTerminating(ctx context.Context, name string) bool {
	ns, err := c.clients.Kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return true
	case err != nil:
		klog.FromContext(ctx).V(1).Info("could not read the migration's namespace; taking it as not being deleted", "namespace", name, "err", err.Error())
		return false
	}
	return ns.DeletionTimestamp != nil || ns.Status.Phase == corev1.NamespaceTerminating
}

// credentialKeeper is a source step that keeps credentials in memory for
// the migrations that stopped their source (source.Step): the controller
// shows it every migration it reconciles, and tells it which are gone.
type credentialKeeper interface {
	Remember(m *v1alpha1.VirtualMachineMigration)
	Forget(key cache.ObjectName)
}

// remember shows m to a source step that keeps credentials.
func (c *Controller) remember(m *v1alpha1.VirtualMachineMigration) {
	if k, ok := c.steps.Source.(credentialKeeper); ok {
		k.Remember(m)
	}
}

// forget tells a source step that keeps credentials that key is gone.
func (c *Controller) forget(key cache.ObjectName) {
	if k, ok := c.steps.Source.(credentialKeeper); ok {
		k.Forget(key)
	}
}
