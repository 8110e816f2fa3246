package controller

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/vsphere"
)

var (
	reconcileTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vm_migration_reconcile_total",
		Help: "Reconciles of VirtualMachineMigrations, by result.",
	}, []string{"result"})
	reconcileDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "vm_migration_reconcile_duration_seconds",
		Help:    "Time one reconcile of a VirtualMachineMigration took (observe, decide, write status, act).",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
	})
	reconcileOwnDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "vm_migration_reconcile_own_duration_seconds",
		Help: "A reconcile's own time: its duration (vm_migration_reconcile_duration_seconds) minus the time its API server and vSphere calls took.",
		// Finer than the reconcile's: the goal is a p99 under 20 ms.
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .0075, .01, .015, .02, .03, .05, .1, .25, .5, 1, 2.5, 5, 10},
	})
	phaseDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "vm_migration_phase_duration_seconds",
		Help: "Time migrations spent in a phase, observed when they leave it.",
		// From a second (Pending) to a day (a large transfer, an approval).
		Buckets: prometheus.ExponentialBuckets(1, 4, 9),
	}, []string{"phase"})
	validationWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "vm_migration_validation_wait_seconds",
		Help: "Time from a migration's creation to its first exit from Validating (the next phase's start), once per migration, by outcome: the phase it moved to (Queued, AwaitingApproval, Planned, Failed, Cancelling, or Succeeded for one that found its source already migrated).",
		// From seconds (one migration alone) to hours (a wave of thousands),
		// about 1.5x apart, so a quantile interpolated within a bucket
		// stays within a third of the measured time.
		Buckets: []float64{1, 2, 3, 5, 7.5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 450, 600, 900, 1200, 1800, 2700, 3600, 5400, 7200, 10800, 14400},
	}, []string{"outcome"})
	downtime = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "vm_migration_downtime_seconds",
		Help: "The outage a migration caused (status.downtime.seconds), observed once when it ends, by how: target_running (the migrated VM runs) or source_restored (the source VM back on after a failure or a cancellation).",
		// From seconds (a small disk) to a day (terabytes over a slow
		// link), about 1.5x apart.
		Buckets: []float64{5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 450, 600, 900, 1200, 1800, 2700, 3600, 5400, 7200, 10800, 14400, 21600, 43200, 86400},
	}, []string{"ended"})
	actionsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vm_migration_actions_total",
		Help: "Actions executed, by type.",
	}, []string{"action"})
	actionErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vm_migration_action_errors_total",
		Help: "Actions that failed, by type and reason: the API status reason (Forbidden, Conflict...) or, for actions on the source VM, the vSphere error class (Transient, Permission...).",
	}, []string{"action", "reason"})
	sourcePowerOperations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vm_migration_source_power_operations_total",
		Help: "Power operations on source VMs (ShutdownGuest, PowerOffSource, PowerOnSource), by result (success, error).",
	}, []string{"operation", "result"})
	statusWrites = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "vm_migration_status_writes_total",
		Help: "Status writes of VirtualMachineMigrations (only when the status changed).",
	})
	expiredTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "vm_migration_expired_total",
		Help: "Finished migrations deleted because their time to live ended (spec.ttlSecondsAfterFinished or the controller's default).",
	})
	finishedSkips = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "vm_migration_finished_skips_total",
		Help: "Queued keys of finished migrations (ended, not being deleted, status up to date) dropped without a reconcile: requeues asked for before they ended.",
	})
)

// Per-migration series, read from the informer cache at scrape time.
var (
	phaseDesc = prometheus.NewDesc("vm_migration_migrations",
		"VirtualMachineMigrations by phase, from the informer cache; every phase has a series (0 when none is in it).", []string{"phase"}, nil)
	migrationLabels   = []string{"namespace", "migration"}
	transferredDesc   = prometheus.NewDesc("vm_migration_transferred_bytes", "Bytes of the source disks transferred so far (status.disks).", migrationLabels, nil)
	capacityDesc      = prometheus.NewDesc("vm_migration_capacity_bytes", "Total capacity of the migration's source disks.", migrationLabels, nil)
	throughputDesc    = prometheus.NewDesc("vm_migration_transfer_throughput_bytes_per_second", "Current transfer rate: the sum of the rates of the disks still transferring (0 once transferred).", migrationLabels, nil)
	phaseStartDesc    = prometheus.NewDesc("vm_migration_phase_start_time_seconds", "Unix time the migration entered its current phase, labelled with that phase (creation time while Pending).", append(migrationLabels, "phase"), nil)
	conditionDesc     = prometheus.NewDesc("vm_migration_condition", "1 when a condition of the migration is True, 0 when False (Stalled, Paused, ApprovalRequired...).", append(migrationLabels, "condition"), nil)
	sourceLeftOffDesc = prometheus.NewDesc("vm_migration_source_left_off", "1 when the migration ended other than Succeeded and the source VM it powered off (found powered on) was not seen powered on again.", migrationLabels, nil)
	perMigrationDescs = []*prometheus.Desc{transferredDesc, capacityDesc, throughputDesc, phaseStartDesc, conditionDesc, sourceLeftOffDesc}
)

// powerOperationKind are the actions that change the source VM's power state.
var powerOperationKind = map[statemachine.ActionType]bool{
	statemachine.ActionShutdownGuest: true, statemachine.ActionPowerOffSource: true, statemachine.ActionPowerOnSource: true,
}

// RegisterMetrics registers the controller's metrics, including the
// migrations by phase and the per-migration series read from the informer
// cache at scrape time.
func (c *Controller) RegisterMetrics(reg prometheus.Registerer) error {
	for _, col := range []prometheus.Collector{
		reconcileTotal, reconcilePanics, reconcileDuration, reconcileOwnDuration, phaseDuration, validationWait, downtime, actionsTotal, actionErrors, sourcePowerOperations, statusWrites, finishedSkips, expiredTotal,
		phaseCollector{c}, migrationCollector{c}, conversionCollector{c}, c.abandoned,
	} {
		if err := reg.Register(col); err != nil {
			return err
		}
	}
	return nil
}

// slowOwnTime is the own time above which a reconcile is logged (at -v=2),
// to find where the controller's own time goes.
const slowOwnTime = 100 * time.Millisecond

// observeReconcile records a reconcile's duration and its own time (what
// its calls, timed by clock, did not take); call it deferred with the
// start time.
func observeReconcile(ctx context.Context, key cache.ObjectName, start time.Time, clock *callClock) {
	total := time.Since(start)
	own := clock.ownTime(total)
	reconcileDuration.Observe(total.Seconds())
	reconcileOwnDuration.Observe(own.Seconds())
	if own >= slowOwnTime {
		klog.FromContext(ctx).V(2).Info("slow reconcile: its own time, without its API and vSphere calls", "migration", key.String(),
			"own", own, "total", total)
	}
}

// observePhaseExit records the time a migration spent in the phase it
// leaves: from its phase start (for the first phase, which is entered
// without one, its start or creation) to the new status's phase start.
func observePhaseExit(old *v1alpha1.VirtualMachineMigration, next *v1alpha1.VirtualMachineMigrationStatus) {
	phase := old.Status.Phase
	if phase == "" {
		phase = v1alpha1.PhasePending
	}
	if next.Phase == phase || next.PhaseStartTime == nil {
		return
	}
	entered := old.Status.PhaseStartTime
	for _, t := range []*metav1.Time{old.Status.StartTime, &old.CreationTimestamp} {
		if entered == nil || entered.IsZero() {
			entered = t
		}
	}
	if entered == nil || entered.IsZero() {
		return
	}
	phaseDuration.WithLabelValues(string(phase)).Observe(max(next.PhaseStartTime.Sub(entered.Time).Seconds(), 0))
}

// observeValidationWait records, when a migration leaves Validating for
// the first time, the time from its creation to the next phase's start,
// by that phase. The first time is the stay that began when it left
// Pending: its phase start is its Pending checkpoint's time (both set by
// the same decision), and no Validating checkpoint is on record. A
// migration validating again (after a refusal, a spec change, or
// spec.planOnly turned off) entered later and is not observed again: its
// time from creation would hold the time a person took. It is called once
// the status write that moved the phase succeeded, so a retried or
// conflicting write observes nothing and a restarted controller, which
// reads the new phase, does not observe it twice (one that stops between
// the write and the call loses the sample).
func observeValidationWait(old *v1alpha1.VirtualMachineMigration, next *v1alpha1.VirtualMachineMigrationStatus) {
	st := &old.Status
	if st.Phase != v1alpha1.PhaseValidating || next.Phase == v1alpha1.PhaseValidating || next.PhaseStartTime == nil ||
		st.PhaseStartTime == nil || old.CreationTimestamp.IsZero() {
		return
	}
	var pendingReached *metav1.Time
	for i := range st.Evidence {
		switch st.Evidence[i].Phase {
		case v1alpha1.PhaseValidating:
			return
		case v1alpha1.PhasePending:
			pendingReached = &st.Evidence[i].ReachedAt
		}
	}
	if pendingReached == nil || !pendingReached.Equal(st.PhaseStartTime) {
		return
	}
	validationWait.WithLabelValues(string(next.Phase)).Observe(max(next.PhaseStartTime.Sub(old.CreationTimestamp.Time).Seconds(), 0))
}

// observeDowntime records the outage once, when the status write that
// ended it succeeded: the old status had no total and the new one has.
// A retried or conflicting write observes nothing, and a restarted
// controller reads the total already written.
func observeDowntime(old *v1alpha1.VirtualMachineMigration, next *v1alpha1.VirtualMachineMigrationStatus) {
	dt := next.Downtime
	if dt == nil || dt.Seconds == nil || (old.Status.Downtime != nil && old.Status.Downtime.Seconds != nil) {
		return
	}
	ended := "source_restored"
	if dt.TargetRunningAt != nil {
		ended = "target_running"
	}
	downtime.WithLabelValues(ended).Observe(float64(*dt.Seconds))
}

// recordAction counts an executed action's outcome: errors by reason, and
// power operations on the source by result.
func recordAction(action statemachine.ActionType, err error) {
	if powerOperationKind[action] {
		result := "success"
		if err != nil {
			result = "error"
		}
		sourcePowerOperations.WithLabelValues(string(action), result).Inc()
	}
	if err != nil {
		actionErrors.WithLabelValues(string(action), errorReason(action, err)).Inc()
	}
}

// errorReason names why an action failed, with few distinct values.
func errorReason(action statemachine.ActionType, err error) string {
	if reason := apierrors.ReasonForError(err); reason != metav1.StatusReasonUnknown {
		return string(reason)
	}
	if powerOperationKind[action] || action == statemachine.ActionRemoveSnapshot {
		return string(vsphere.Classify(err))
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "Timeout"
	}
	return "Other"
}

type phaseCollector struct{ c *Controller }

func (p phaseCollector) Describe(ch chan<- *prometheus.Desc) { ch <- phaseDesc }

func (p phaseCollector) Collect(ch chan<- prometheus.Metric) {
	all, err := p.c.migrations.List(labels.Everything())
	if err != nil {
		return
	}
	// Every phase has a series, 0 when no migration is in it: a phase
	// emptied by a wave reads 0, not the last value before it vanished.
	counts := map[v1alpha1.Phase]int{}
	for _, phase := range v1alpha1.Phases() {
		counts[phase] = 0
	}
	for _, m := range all {
		phase := m.Status.Phase
		if phase == "" {
			phase = v1alpha1.PhasePending
		}
		counts[phase]++
	}
	for phase, n := range counts {
		ch <- prometheus.MustNewConstMetric(phaseDesc, prometheus.GaugeValue, float64(n), string(phase))
	}
}

// migrationCollector exports per-migration series from status: bytes
// transferred and throughput, phase start, conditions, a source left off.
type migrationCollector struct{ c *Controller }

func (p migrationCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range perMigrationDescs {
		ch <- d
	}
}

func (p migrationCollector) Collect(ch chan<- prometheus.Metric) {
	all, err := p.c.migrations.List(labels.Everything())
	if err != nil {
		return
	}
	for _, m := range all {
		for _, metric := range migrationMetrics(m) {
			ch <- metric
		}
	}
}

// migrationMetrics are one migration's series.
func migrationMetrics(m *v1alpha1.VirtualMachineMigration) []prometheus.Metric {
	st := &m.Status
	ns, name := m.Namespace, m.Name
	var transferred, capacity, throughput int64
	for _, d := range st.Disks {
		transferred += d.BytesTransferred
		capacity += d.CapacityBytes
		if d.TransferredAt == nil {
			throughput += d.RateBytesPerSecond
		}
	}
	phase, entered := st.Phase, st.PhaseStartTime
	if phase == "" {
		phase = v1alpha1.PhasePending
	}
	if entered == nil {
		entered = &m.CreationTimestamp
	}
	out := []prometheus.Metric{
		prometheus.MustNewConstMetric(transferredDesc, prometheus.GaugeValue, float64(transferred), ns, name),
		prometheus.MustNewConstMetric(capacityDesc, prometheus.GaugeValue, float64(capacity), ns, name),
		prometheus.MustNewConstMetric(throughputDesc, prometheus.GaugeValue, float64(throughput), ns, name),
		prometheus.MustNewConstMetric(phaseStartDesc, prometheus.GaugeValue, float64(entered.Unix()), ns, name, string(phase)),
		prometheus.MustNewConstMetric(sourceLeftOffDesc, prometheus.GaugeValue, boolValue(statemachine.SourceLeftOff(st)), ns, name),
	}
	for _, c := range st.Conditions {
		out = append(out, prometheus.MustNewConstMetric(conditionDesc, prometheus.GaugeValue,
			boolValue(c.Status == metav1.ConditionTrue), ns, name, c.Type))
	}
	return out
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
