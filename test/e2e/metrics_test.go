//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

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

	// The controller's metrics come from its caches, which may lag behind
	// what the API shows: each scrape is polled until it holds.
	url := s.controllerMetricsURL()
	s.waitMetrics(url, time.Minute, "the metrics during the transfer",
		metric("vm_migration_migrations", map[string]string{"phase": "TransferringDisks"}, eq(1)),
		metric("vm_migration_capacity_bytes", this, eq(capacity)),
		metric("vm_migration_transferred_bytes", this, below(capacity)),
		metric("vm_migration_phase_start_time_seconds", with(this, "phase", "TransferringDisks"), above(0)),
		metric("vm_migration_source_power_operations_total", nil, above(0)))

	release()
	s.waitPhase(m.Name, v1alpha1.PhaseSucceeded, 3*time.Minute)
	after := []metricWant{
		metric("vm_migration_migrations", map[string]string{"phase": "Succeeded"}, eq(1)),
		metric("vm_migration_transferred_bytes", this, eq(capacity)),
		metric("vm_migration_transfer_throughput_bytes_per_second", this, eq(0)),
		metric("vm_migration_phase_start_time_seconds", with(this, "phase", "Succeeded"), above(0)),
		metric("vm_migration_condition", with(this, "condition", "Ready"), eq(1)),
		metric("vm_migration_source_left_off", this, eq(0)),
	}
	for _, phase := range []string{"Pending", "Validating", "StoppingSource", "TransferringDisks", "Converting", "Importing", "CleaningUp"} {
		after = append(after, metric("vm_migration_phase_duration_seconds", map[string]string{"phase": phase}, above(0)))
	}
	after = append(after, metric("vm_migration_reconcile_duration_seconds", nil, above(0)))
	s.waitMetrics(url, time.Minute, "the metrics after the migration succeeded", after...)
}

// waitMetrics scrapes url's /metrics until every want holds, and fails
// the test after timeout with what the last scrape showed of each want
// that did not hold.
func (s *stack) waitMetrics(url string, timeout time.Duration, what string, wants ...metricWant) {
	s.t.Helper()
	var problems []string
	s.eventually(timeout, what, func() bool {
		problems = problems[:0]
		families, err := readMetrics(url + "/metrics")
		if err != nil {
			problems = append(problems, "scraping: "+err.Error())
			return false
		}
		for _, w := range wants {
			if p := w.problem(families); p != "" {
				problems = append(problems, p)
			}
		}
		return len(problems) == 0
	}, func() string { return "the last scrape of " + url + "/metrics:\n  " + strings.Join(problems, "\n  ") })
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

// metricWant is a series /metrics must hold: the family's name, labels
// the series include (nil: every series of the family) and the check of
// its value (a histogram's sample count, a sum over matching series).
type metricWant struct {
	name   string
	labels map[string]string
	check  check
}

func metric(name string, labels map[string]string, c check) metricWant {
	return metricWant{name: name, labels: labels, check: c}
}

// problem says how families fail the want, naming the value seen; "" when
// they meet it.
func (w metricWant) problem(families map[string]*dto.MetricFamily) string {
	f := families[w.name]
	if f == nil {
		return "/metrics has no " + w.name
	}
	found, sum := false, 0.0
	for _, m := range f.Metric {
		if !hasLabels(m, w.labels) {
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
	if !found {
		return fmt.Sprintf("/metrics has no %s series with the labels %v", w.name, w.labels)
	}
	if !w.check.ok(sum) {
		return fmt.Sprintf("%s%v = %g, want %s", w.name, w.labels, sum, w.check.want)
	}
	return ""
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
