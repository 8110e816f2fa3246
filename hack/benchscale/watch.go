package main

import (
	"fmt"
	"maps"
	"reflect"
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
)

// writeKinds counts the status writes the watcher saw, by what changed.
type writeKinds struct {
	// checkpoint writes moved a migration to its next phase.
	checkpoint int
	// progress writes changed only progress (bytes, rates, ETAs, import
	// progress, the overall percentage and the time progress was seen).
	progress int
	// other writes changed something else within a phase (a condition,
	// evidence, a job name...).
	other int
	// otherWhat counts the other writes by phase and what they changed
	// ("Queued: conditions[Progressing] transfer").
	otherWhat map[string]int
}

// watcher follows the benchmark's migrations through an informer: their
// phases, and every status write by kind.
type watcher struct {
	want int

	mu       sync.Mutex
	phase    map[string]v1alpha1.Phase
	ended    map[string]bool
	writes   writeKinds
	failures []string
	done     chan struct{}
}

func newWatcher(want int) *watcher {
	return &watcher{want: want, phase: map[string]v1alpha1.Phase{}, ended: map[string]bool{}, done: make(chan struct{})}
}

// handler is the informer's event handler.
func (w *watcher) handler() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if m, ok := obj.(*v1alpha1.VirtualMachineMigration); ok {
				w.observe(nil, m)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := oldObj.(*v1alpha1.VirtualMachineMigration)
			m, ok2 := newObj.(*v1alpha1.VirtualMachineMigration)
			if ok1 && ok2 {
				w.observe(old, m)
			}
		},
	}
}

func (w *watcher) observe(old, m *v1alpha1.VirtualMachineMigration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	key := m.Namespace + "/" + m.Name
	w.phase[key] = m.Status.Phase
	if old != nil && !equality.Semantic.DeepEqual(old.Status, m.Status) {
		switch {
		case old.Status.Phase != m.Status.Phase:
			w.writes.checkpoint++
		case progressOnly(&old.Status, &m.Status):
			w.writes.progress++
		default:
			w.writes.other++
			if w.writes.otherWhat == nil {
				w.writes.otherWhat = map[string]int{}
			}
			w.writes.otherWhat[string(m.Status.Phase)+": "+strings.Join(changedFields(&old.Status, &m.Status), " ")]++
		}
	}
	if statemachine.IsTerminal(m.Status.Phase) && !w.ended[key] {
		w.ended[key] = true
		if m.Status.Phase == v1alpha1.PhaseFailed {
			msg := ""
			if e := m.Status.LastError; e != nil {
				msg = fmt.Sprintf(" in %s: %s: %s", e.Phase, e.Reason, e.Message)
			}
			w.failures = append(w.failures, key+msg)
		}
		if len(w.ended) == w.want {
			close(w.done)
		}
	}
}

// progressOnly reports whether two statuses differ only in progress.
func progressOnly(a, b *v1alpha1.VirtualMachineMigrationStatus) bool {
	return equality.Semantic.DeepEqual(withoutProgress(a), withoutProgress(b))
}

// withoutProgress is a copy of st with its progress fields cleared.
func withoutProgress(st *v1alpha1.VirtualMachineMigrationStatus) *v1alpha1.VirtualMachineMigrationStatus {
	out := st.DeepCopy()
	out.Progress, out.LastProgressTime = "", nil
	for i := range out.Disks {
		d := &out.Disks[i]
		d.BytesTransferred, d.RateBytesPerSecond, d.ETASeconds = 0, 0, nil
		d.ImportPhase, d.ImportProgress = "", ""
	}
	return out
}

// changedFields names the status fields that differ, conditions by type.
func changedFields(a, b *v1alpha1.VirtualMachineMigrationStatus) []string {
	var out []string
	va, vb := reflect.ValueOf(*a), reflect.ValueOf(*b)
	for i := range va.NumField() {
		name := va.Type().Field(i).Name
		if name == "Conditions" {
			continue
		}
		if !equality.Semantic.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			out = append(out, name)
		}
	}
	for _, c := range b.Conditions {
		old := meta.FindStatusCondition(a.Conditions, c.Type)
		switch {
		case old == nil:
			out = append(out, "+"+c.Type)
		case old.Status != c.Status || old.Reason != c.Reason:
			out = append(out, c.Type+"("+old.Reason+"->"+c.Reason+")")
		case old.Message != c.Message:
			out = append(out, c.Type+"(message)")
		}
	}
	return out
}

// counts returns the migrations by phase, the ended ones, the writes and
// the failures so far.
func (w *watcher) counts() (map[v1alpha1.Phase]int, int, writeKinds, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	byPhase := map[v1alpha1.Phase]int{}
	for _, p := range w.phase {
		if p == "" {
			p = "(new)"
		}
		byPhase[p]++
	}
	writes := w.writes
	writes.otherWhat = maps.Clone(w.writes.otherWhat)
	return byPhase, len(w.ended), writes, append([]string(nil), w.failures...)
}

// phaseLine prints phase counts in phase order.
func phaseLine(byPhase map[v1alpha1.Phase]int) string {
	order := map[v1alpha1.Phase]int{}
	for i, p := range []v1alpha1.Phase{"(new)", v1alpha1.PhasePending, v1alpha1.PhaseValidating, v1alpha1.PhaseAwaitingApproval,
		v1alpha1.PhaseQueued, v1alpha1.PhaseStoppingSource, v1alpha1.PhaseTransferringDisks, v1alpha1.PhaseConverting,
		v1alpha1.PhaseImporting, v1alpha1.PhaseCreatingVM, v1alpha1.PhaseStarting, v1alpha1.PhaseCleaningUp,
		v1alpha1.PhaseRollingBack, v1alpha1.PhaseSucceeded, v1alpha1.PhaseFailed} {
		order[p] = i
	}
	phases := make([]v1alpha1.Phase, 0, len(byPhase))
	for p := range byPhase {
		phases = append(phases, p)
	}
	sort.Slice(phases, func(i, j int) bool { return order[phases[i]] < order[phases[j]] })
	parts := make([]string, 0, len(phases))
	for _, p := range phases {
		parts = append(parts, fmt.Sprintf("%s=%d", p, byPhase[p]))
	}
	return strings.Join(parts, " ")
}
