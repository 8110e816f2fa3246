package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/labels"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

var (
	reconcileTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vm_migration_reconcile_total",
		Help: "Reconciles of VirtualMachineMigrations, by result.",
	}, []string{"result"})
	actionsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vm_migration_actions_total",
		Help: "Actions executed, by type.",
	}, []string{"action"})
	statusWrites = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "vm_migration_status_writes_total",
		Help: "Status writes of VirtualMachineMigrations (only when the status changed).",
	})
	phaseDesc = prometheus.NewDesc("vm_migration_migrations",
		"VirtualMachineMigrations by phase, from the informer cache.", []string{"phase"}, nil)
)

// RegisterMetrics registers the controller's metrics, including a gauge of
// migrations by phase read from the informer cache at scrape time.
func (c *Controller) RegisterMetrics(reg prometheus.Registerer) error {
	for _, col := range []prometheus.Collector{reconcileTotal, actionsTotal, statusWrites, phaseCollector{c}} {
		if err := reg.Register(col); err != nil {
			return err
		}
	}
	return nil
}

type phaseCollector struct{ c *Controller }

func (p phaseCollector) Describe(ch chan<- *prometheus.Desc) { ch <- phaseDesc }

func (p phaseCollector) Collect(ch chan<- prometheus.Metric) {
	all, err := p.c.migrations.List(labels.Everything())
	if err != nil {
		return
	}
	counts := map[v1alpha1.Phase]int{}
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
