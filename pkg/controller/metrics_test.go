package controller

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	miglisters "platform.example/vm-migration/pkg/generated/migration/listers/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/vsphere"
)

var metricsT0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

func metricsTime(offset time.Duration) *metav1.Time {
	t := metav1.NewTime(metricsT0.Add(offset))
	return &t
}

// collectorOver is a controller whose migration cache holds ms, for the
// collectors.
func collectorOver(t *testing.T, ms ...*v1alpha1.VirtualMachineMigration) *Controller {
	t.Helper()
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, m := range ms {
		require.NoError(t, indexer.Add(m), "adding %s to the cache", m.Name)
	}
	return &Controller{migrations: miglisters.NewVirtualMachineMigrationLister(indexer)}
}

func metricsMigration(name string, phase v1alpha1.Phase, mods ...func(*v1alpha1.VirtualMachineMigration)) *v1alpha1.VirtualMachineMigration {
	m := &v1alpha1.VirtualMachineMigration{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "apps", CreationTimestamp: *metricsTime(0)}}
	m.Status.Phase = phase
	if phase != "" {
		m.Status.PhaseStartTime = metricsTime(time.Minute)
	}
	for _, mod := range mods {
		mod(m)
	}
	return m
}

func TestMigrationCollector(t *testing.T) {
	transferring := metricsMigration("transferring", v1alpha1.PhaseTransferringDisks, func(m *v1alpha1.VirtualMachineMigration) {
		m.Status.Disks = []v1alpha1.DiskStatus{
			{Key: 1, CapacityBytes: 1000, BytesTransferred: 1000, RateBytesPerSecond: 50, TransferredAt: metricsTime(2 * time.Minute)},
			{Key: 2, CapacityBytes: 3000, BytesTransferred: 600, RateBytesPerSecond: 200},
		}
		m.Status.Conditions = []metav1.Condition{{Type: statemachine.ConditionStalled, Status: metav1.ConditionTrue}, {Type: statemachine.ConditionPaused, Status: metav1.ConditionFalse}}
	})
	stopped := &v1alpha1.SourceControlStatus{OriginalPowerState: statemachine.PowerStateOn, PowerOffRequestedAt: metricsTime(time.Minute)}
	leftOff := metricsMigration("left-off", v1alpha1.PhaseFailed, func(m *v1alpha1.VirtualMachineMigration) { m.Status.SourceControl = stopped.DeepCopy() })
	restored := metricsMigration("restored", v1alpha1.PhaseFailed, func(m *v1alpha1.VirtualMachineMigration) {
		m.Status.SourceControl = stopped.DeepCopy()
		m.Status.SourceControl.RestoredAt = metricsTime(3 * time.Minute)
	})
	migrated := metricsMigration("migrated", v1alpha1.PhaseSucceeded, func(m *v1alpha1.VirtualMachineMigration) { m.Status.SourceControl = stopped.DeepCopy() })
	fresh := metricsMigration("fresh", "")

	c := collectorOver(t, transferring, leftOff, restored, migrated, fresh)
	start := float64(metricsTime(time.Minute).Unix())
	created := float64(metricsT0.Unix())
	want := fmt.Sprintf(`
# HELP vm_migration_transferred_bytes Bytes of the source disks transferred so far (status.disks).
# TYPE vm_migration_transferred_bytes gauge
vm_migration_transferred_bytes{migration="fresh",namespace="apps"} 0
vm_migration_transferred_bytes{migration="left-off",namespace="apps"} 0
vm_migration_transferred_bytes{migration="migrated",namespace="apps"} 0
vm_migration_transferred_bytes{migration="restored",namespace="apps"} 0
vm_migration_transferred_bytes{migration="transferring",namespace="apps"} 1600
# HELP vm_migration_transfer_throughput_bytes_per_second Current transfer rate: the sum of the rates of the disks still transferring (0 once transferred).
# TYPE vm_migration_transfer_throughput_bytes_per_second gauge
vm_migration_transfer_throughput_bytes_per_second{migration="fresh",namespace="apps"} 0
vm_migration_transfer_throughput_bytes_per_second{migration="left-off",namespace="apps"} 0
vm_migration_transfer_throughput_bytes_per_second{migration="migrated",namespace="apps"} 0
vm_migration_transfer_throughput_bytes_per_second{migration="restored",namespace="apps"} 0
vm_migration_transfer_throughput_bytes_per_second{migration="transferring",namespace="apps"} 200
# HELP vm_migration_phase_start_time_seconds Unix time the migration entered its current phase, labelled with that phase (creation time while Pending).
# TYPE vm_migration_phase_start_time_seconds gauge
vm_migration_phase_start_time_seconds{migration="fresh",namespace="apps",phase="Pending"} %[2]g
vm_migration_phase_start_time_seconds{migration="left-off",namespace="apps",phase="Failed"} %[1]g
vm_migration_phase_start_time_seconds{migration="migrated",namespace="apps",phase="Succeeded"} %[1]g
vm_migration_phase_start_time_seconds{migration="restored",namespace="apps",phase="Failed"} %[1]g
vm_migration_phase_start_time_seconds{migration="transferring",namespace="apps",phase="TransferringDisks"} %[1]g
# HELP vm_migration_condition 1 when a condition of the migration is True, 0 when False (Stalled, Paused, ApprovalRequired...).
# TYPE vm_migration_condition gauge
vm_migration_condition{condition="Paused",migration="transferring",namespace="apps"} 0
vm_migration_condition{condition="Stalled",migration="transferring",namespace="apps"} 1
# HELP vm_migration_source_left_off 1 when the migration ended other than Succeeded and the source VM it powered off (found powered on) was not seen powered on again.
# TYPE vm_migration_source_left_off gauge
vm_migration_source_left_off{migration="fresh",namespace="apps"} 0
vm_migration_source_left_off{migration="left-off",namespace="apps"} 1
vm_migration_source_left_off{migration="migrated",namespace="apps"} 0
vm_migration_source_left_off{migration="restored",namespace="apps"} 0
vm_migration_source_left_off{migration="transferring",namespace="apps"} 0
`, start, created)
	names := []string{"vm_migration_transferred_bytes", "vm_migration_transfer_throughput_bytes_per_second",
		"vm_migration_phase_start_time_seconds", "vm_migration_condition", "vm_migration_source_left_off"}
	assert.NoError(t, testutil.CollectAndCompare(migrationCollector{c}, strings.NewReader(want), names...), "the per-migration metrics")
	wantPhases := `
# HELP vm_migration_migrations VirtualMachineMigrations by phase, from the informer cache; every phase has a series (0 when none is in it).
# TYPE vm_migration_migrations gauge
vm_migration_migrations{phase="AwaitingApproval"} 0
vm_migration_migrations{phase="Cancelling"} 0
vm_migration_migrations{phase="CleaningUp"} 0
vm_migration_migrations{phase="Converting"} 0
vm_migration_migrations{phase="CreatingVM"} 0
vm_migration_migrations{phase="Failed"} 2
vm_migration_migrations{phase="Importing"} 0
vm_migration_migrations{phase="Pending"} 1
vm_migration_migrations{phase="Planned"} 0
vm_migration_migrations{phase="Queued"} 0
vm_migration_migrations{phase="RollingBack"} 0
vm_migration_migrations{phase="Starting"} 0
vm_migration_migrations{phase="StoppingSource"} 0
vm_migration_migrations{phase="Succeeded"} 1
vm_migration_migrations{phase="TransferringDisks"} 1
vm_migration_migrations{phase="Validating"} 0
`
	assert.NoError(t, testutil.CollectAndCompare(phaseCollector{c}, strings.NewReader(wantPhases)),
		"the migrations by phase, every phase with a series (0 when none is in it: a rate or a sum over phases needs them)")
}

func TestObservePhaseExit(t *testing.T) {
	phaseDuration.Reset()
	cases := []struct {
		name string
		old  *v1alpha1.VirtualMachineMigration
		next v1alpha1.VirtualMachineMigrationStatus
	}{
		{name: "transfer took 90s", old: metricsMigration("a", v1alpha1.PhaseTransferringDisks),
			next: v1alpha1.VirtualMachineMigrationStatus{Phase: v1alpha1.PhaseConverting, PhaseStartTime: metricsTime(150 * time.Second)}},
		{name: "entering pending is no exit", old: metricsMigration("b", ""),
			next: v1alpha1.VirtualMachineMigrationStatus{Phase: v1alpha1.PhasePending, StartTime: metricsTime(time.Second)}},
		{name: "pending counts from the start", old: metricsMigration("b", v1alpha1.PhasePending, func(m *v1alpha1.VirtualMachineMigration) {
			m.Status.PhaseStartTime, m.Status.StartTime = nil, metricsTime(time.Second)
		}), next: v1alpha1.VirtualMachineMigrationStatus{Phase: v1alpha1.PhaseValidating, PhaseStartTime: metricsTime(3 * time.Second)}},
		{name: "same phase is no exit", old: metricsMigration("c", v1alpha1.PhaseConverting),
			next: v1alpha1.VirtualMachineMigrationStatus{Phase: v1alpha1.PhaseConverting, PhaseStartTime: metricsTime(time.Hour)}},
	}
	for _, tc := range cases {
		observePhaseExit(tc.old, &tc.next)
	}
	want := map[string]struct {
		count uint64
		sum   float64
	}{"TransferringDisks": {1, 90}, "Pending": {1, 2}}
	assert.Equal(t, len(want), testutil.CollectAndCount(phaseDuration), "phases observed")
	for phase, w := range want {
		h := histogramOf(t, phaseDuration, phase)
		assert.Equal(t, w.count, h.GetSampleCount(), "%s: samples", phase)
		assert.Equal(t, w.sum, h.GetSampleSum(), "%s: the sum of the samples, in seconds", phase)
	}
}

func TestObserveDowntime(t *testing.T) {
	downtime.Reset()
	ended := func(seconds int64, running bool) *v1alpha1.DowntimeStatus {
		dt := &v1alpha1.DowntimeStatus{SourceStoppedAt: *metricsTime(0), Seconds: &seconds}
		if running {
			dt.TargetRunningAt = metricsTime(time.Duration(seconds) * time.Second)
		} else {
			dt.SourceRestoredAt = metricsTime(time.Duration(seconds) * time.Second)
		}
		return dt
	}
	open := &v1alpha1.DowntimeStatus{SourceStoppedAt: *metricsTime(0)}
	cases := []struct {
		name     string
		old, new *v1alpha1.DowntimeStatus
	}{
		{name: "the target runs after 31s", old: open, new: ended(31, true)},
		{name: "the target runs after 90s", old: open, new: ended(90, true)},
		{name: "the source back on after 120s", old: open, new: ended(120, false)},
		{name: "ended before: not again", old: ended(31, true), new: ended(31, true)},
		{name: "still going on", old: nil, new: open},
		{name: "never stopped", old: nil, new: nil},
	}
	for i, tc := range cases {
		old := metricsMigration(fmt.Sprint("m", i), v1alpha1.PhaseStarting)
		old.Status.Downtime = tc.old
		observeDowntime(old, &v1alpha1.VirtualMachineMigrationStatus{Downtime: tc.new})
	}
	running, restored := histogramOf(t, downtime, "target_running"), histogramOf(t, downtime, "source_restored")
	assert.Equal(t, uint64(2), running.GetSampleCount())
	assert.Equal(t, float64(121), running.GetSampleSum())
	assert.Equal(t, uint64(1), restored.GetSampleCount())
	assert.Equal(t, float64(120), restored.GetSampleSum())
}

// validatingSince is a migration in Validating since t after its
// creation, entered as the state machine enters it: from Pending (its
// Pending checkpoint reached then) or again later (after a refusal or a
// spec change: its phase start is later than that checkpoint).
func validatingSince(name string, entered, pendingReached time.Duration) *v1alpha1.VirtualMachineMigration {
	return metricsMigration(name, v1alpha1.PhaseValidating, func(m *v1alpha1.VirtualMachineMigration) {
		m.Status.StartTime = metricsTime(0)
		m.Status.PhaseStartTime = metricsTime(entered)
		m.Status.Evidence = []v1alpha1.CheckpointEvidence{{Phase: v1alpha1.PhasePending, ReachedAt: *metricsTime(pendingReached)}}
	})
}

func TestObserveValidationWait(t *testing.T) {
	validationWait.Reset()
	passedBefore := validatingSince("passed-before", 20*time.Minute, time.Second)
	passedBefore.Status.Evidence = append(passedBefore.Status.Evidence, v1alpha1.CheckpointEvidence{Phase: v1alpha1.PhaseValidating, ReachedAt: *metricsTime(time.Minute)})
	cases := []struct {
		name string
		old  *v1alpha1.VirtualMachineMigration
		next v1alpha1.VirtualMachineMigrationStatus
	}{
		{name: "validated in 2m", old: validatingSince("a", time.Second, time.Second),
			next: v1alpha1.VirtualMachineMigrationStatus{Phase: v1alpha1.PhaseQueued, PhaseStartTime: metricsTime(2 * time.Minute)}},
		{name: "validated in 10m", old: validatingSince("b", time.Second, time.Second),
			next: v1alpha1.VirtualMachineMigrationStatus{Phase: v1alpha1.PhaseQueued, PhaseStartTime: metricsTime(10 * time.Minute)}},
		{name: "refused after 5m", old: validatingSince("c", time.Second, time.Second),
			next: v1alpha1.VirtualMachineMigrationStatus{Phase: v1alpha1.PhaseFailed, PhaseStartTime: metricsTime(5 * time.Minute)}},
		{name: "still validating", old: validatingSince("d", time.Second, time.Second),
			next: v1alpha1.VirtualMachineMigrationStatus{Phase: v1alpha1.PhaseValidating, PhaseStartTime: metricsTime(time.Second)}},
		{name: "leaving another phase", old: metricsMigration("e", v1alpha1.PhaseQueued),
			next: v1alpha1.VirtualMachineMigrationStatus{Phase: v1alpha1.PhaseStoppingSource, PhaseStartTime: metricsTime(time.Hour)}},
		{name: "validating again after a refusal: once per migration", old: validatingSince("f", 30*time.Minute, time.Second),
			next: v1alpha1.VirtualMachineMigrationStatus{Phase: v1alpha1.PhaseQueued, PhaseStartTime: metricsTime(31 * time.Minute)}},
		{name: "validating again after it passed once", old: passedBefore,
			next: v1alpha1.VirtualMachineMigrationStatus{Phase: v1alpha1.PhaseAwaitingApproval, PhaseStartTime: metricsTime(21 * time.Minute)}},
	}
	for _, tc := range cases {
		observeValidationWait(tc.old, &tc.next)
	}
	want := map[string]struct {
		count uint64
		sum   float64
	}{"Queued": {2, 720}, "Failed": {1, 300}}
	assert.Equal(t, len(want), testutil.CollectAndCount(validationWait), "outcomes observed")
	for outcome, w := range want {
		var m dto.Metric
		obs, err := validationWait.GetMetricWithLabelValues(outcome)
		require.NoError(t, err, "the validation wait of outcome %s", outcome)
		require.NoError(t, obs.(prometheus.Metric).Write(&m), "reading the validation wait of outcome %s", outcome)
		assert.Equal(t, w.count, m.GetHistogram().GetSampleCount(), "%s: samples", outcome)
		assert.Equal(t, w.sum, m.GetHistogram().GetSampleSum(), "%s: the sum of the samples, in seconds (from the creation)", outcome)
	}
}

func TestRecordAction(t *testing.T) {
	actionErrors.Reset()
	sourcePowerOperations.Reset()
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "jobs"}, "x", errors.New("no"))
	recordAction(statemachine.ActionPowerOffSource, nil)
	recordAction(statemachine.ActionPowerOffSource, nil)
	recordAction(statemachine.ActionPowerOnSource, fmt.Errorf("power-on: %w", vsphere.ErrSessionClosed))
	recordAction(statemachine.ActionCreateTransferJob, fmt.Errorf("creating job: %w", forbidden))
	recordAction(statemachine.ActionCreateVM, errors.New("boom"))
	recordAction(statemachine.ActionCreateVM, nil)
	cases := []struct {
		got  float64
		want float64
		what string
	}{
		{testutil.ToFloat64(sourcePowerOperations.WithLabelValues("PowerOffSource", "success")), 2, "power-off successes"},
		{testutil.ToFloat64(sourcePowerOperations.WithLabelValues("PowerOnSource", "error")), 1, "power-on errors"},
		{testutil.ToFloat64(actionErrors.WithLabelValues("PowerOnSource", "Transient")), 1, "power-on errors by vSphere class"},
		{testutil.ToFloat64(actionErrors.WithLabelValues("CreateTransferJob", "Forbidden")), 1, "job errors by API reason"},
		{testutil.ToFloat64(actionErrors.WithLabelValues("CreateVM", "Other")), 1, "other errors"},
		{float64(testutil.CollectAndCount(sourcePowerOperations)), 2, "power operation series (no CreateVM)"},
		{float64(testutil.CollectAndCount(actionErrors)), 3, "error series (none for successes)"},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, tc.got, tc.what)
	}
}

// histogramOf reads the phase duration histogram of one phase.
func histogramOf(t *testing.T, vec *prometheus.HistogramVec, label string) *dto.Histogram {
	t.Helper()
	var m dto.Metric
	obs, err := vec.GetMetricWithLabelValues(label)
	require.NoError(t, err, "the histogram of %s", label)
	require.NoError(t, obs.(prometheus.Metric).Write(&m), "reading the histogram of %s", label)
	return m.GetHistogram()
}

// TestMonitoringUsesExportedMetrics keeps the dashboard and the alerts in
// manifests/monitoring in step with the metrics: every vm_migration_ name
// they use is one the controller registers.
func TestMonitoringUsesExportedMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, collectorOver(t).RegisterMetrics(reg), "registering the metrics")
	exported := map[string]bool{}
	descs := make(chan *prometheus.Desc, 64)
	go func() {
		for _, col := range []prometheus.Collector{reconcileTotal, reconcilePanics, reconcileDuration, phaseDuration, validationWait, actionsTotal, actionErrors,
			sourcePowerOperations, statusWrites, phaseCollector{}, migrationCollector{}, newAbandonedSources(nil)} {
			col.Describe(descs)
		}
		close(descs)
	}()
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range descs {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			exported[m[1]] = true
		}
	}
	used := regexp.MustCompile(`vm_migration_[a-z_]+`)
	for _, file := range []string{"vm-migration-dashboard.json", "prometheusrule.yaml", "alerts_test.yaml"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "manifests", "monitoring", file))
		require.NoError(t, err, "reading manifests/monitoring/%s", file)
		names := used.FindAllString(string(data), -1)
		assert.NotEmpty(t, names, "%s uses no vm_migration_ metric", file)
		for _, name := range names {
			base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
			assert.True(t, exported[name] || exported[base], "%s uses %s, which the controller does not export", file, name)
		}

	}
}
