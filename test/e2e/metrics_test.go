//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// TestMetrics scrapes the leading controller pod's /metrics (its pod IP,
// port 8080, as Prometheus would through the metrics Service) during a
// migration (its transfer held) and after it: migrations by phase, bytes transferred
// against capacity, throughput, phase start, conditions, the source not
// left off, phase durations, power operations and reconcile durations.
func TestMetrics(t *testing.T) {
	s := newStack(t, stackOptions{})
	src := s.addVM("web-01", 21)
	var capacity float64
	for _, d := range src.Disks {
		capacity += float64(d.SizeBytes)
	}
	release := s.vc.HoldExtentReads("web-01")
	t.Cleanup(release)
	m := s.create(s.newMigration("web-01", "web-01"))
	s.waitPhase(m.Name, v1alpha1.PhaseTransferringDisks, 2*time.Minute)
	this := map[string]string{"namespace": s.ns, "migration": m.Name}

	during := scrape(t, s.controllerMetricsURL())
	expectMetric(t, during, "vm_migration_migrations", map[string]string{"phase": "TransferringDisks"}, eq(1))
	expectMetric(t, during, "vm_migration_capacity_bytes", this, eq(capacity))
	expectMetric(t, during, "vm_migration_transferred_bytes", this, below(capacity))
	expectMetric(t, during, "vm_migration_phase_start_time_seconds", with(this, "phase", "TransferringDisks"), above(0))
	expectMetric(t, during, "vm_migration_source_power_operations_total", nil, above(0))

	release()
	s.waitPhase(m.Name, v1alpha1.PhaseSucceeded, 3*time.Minute)
	after := scrape(t, s.controllerMetricsURL())
	expectMetric(t, after, "vm_migration_migrations", map[string]string{"phase": "Succeeded"}, eq(1))
	expectMetric(t, after, "vm_migration_transferred_bytes", this, eq(capacity))
	expectMetric(t, after, "vm_migration_transfer_throughput_bytes_per_second", this, eq(0))
	expectMetric(t, after, "vm_migration_phase_start_time_seconds", with(this, "phase", "Succeeded"), above(0))
	expectMetric(t, after, "vm_migration_condition", with(this, "condition", "Ready"), eq(1))
	expectMetric(t, after, "vm_migration_source_left_off", this, eq(0))
	for _, phase := range []string{"Pending", "Validating", "StoppingSource", "TransferringDisks", "Converting", "Importing", "CleaningUp"} {
		expectMetric(t, after, "vm_migration_phase_duration_seconds", map[string]string{"phase": phase}, above(0))
	}
	expectMetric(t, after, "vm_migration_reconcile_duration_seconds", nil, above(0))
}

// scrape reads the controller's /metrics as Prometheus does.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	families, err := readMetrics(url + "/metrics")
	require.NoError(t, err, "scraping %s/metrics", url)
	return families
}

// readMetrics reads and parses the metrics served at url.
func readMetrics(url string) (map[string]*dto.MetricFamily, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", url, err)
	}
	return families, nil
}

type check struct {
	ok   func(float64) bool
	want string
}

func eq(v float64) check {
	return check{func(g float64) bool { return g == v }, fmt.Sprintf("= %g", v)}
}
func below(v float64) check {
	return check{func(g float64) bool { return g < v }, fmt.Sprintf("< %g", v)}
}
func above(v float64) check {
	return check{func(g float64) bool { return g > v }, fmt.Sprintf("> %g", v)}
}

func with(labels map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for key, val := range labels {
		out[key] = val
	}
	return out
}

// expectMetric checks the series of a family whose labels include want:
// its value (a histogram's sample count, a counter's sum over matching
// series) must pass the check.
func expectMetric(t *testing.T, families map[string]*dto.MetricFamily, name string, want map[string]string, c check) {
	t.Helper()
	f := families[name]
	if !assert.NotNil(t, f, "/metrics has no %s", name) {
		return
	}
	found, sum := false, 0.0
	for _, m := range f.Metric {
		if !hasLabels(m, want) {
			continue
		}
		found = true
		switch {
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	if assert.True(t, found, "/metrics has no %s series with the labels %v", name, want) {
		assert.True(t, c.ok(sum), "%s%v = %g, want %s", name, want, sum, c.want)
	}
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	have := map[string]string{}
	for _, l := range m.Label {
		have[l.GetName()] = l.GetValue()
	}
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}
