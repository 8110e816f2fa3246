package main

import (
	"fmt"
	"maps"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
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
// phases, every status write by kind, and how long each took from its
// creation to leaving Validating; and, through another, the proof Jobs.
type watcher struct {
	want int
	// now is the clock the validation waits are timed by.
	now func() time.Time

	mu       sync.Mutex
	phase    map[string]v1alpha1.Phase
	ended    map[string]bool
	writes   writeKinds
	failures []string
	done     chan struct{}
	// firstSeen is when each migration not yet seen past Validating was
	// first seen (its creation's watch event); passed holds those seen
	// past it, whose time from creation is in waits (seconds).
	firstSeen map[string]time.Time
	passed    map[string]bool
	waits     []float64
	// proofJobs are the proof Jobs seen, by UID: each created once.
	proofJobs map[types.UID]bool
	// The outage: off holds the migrations whose source is off (their
	// status.downtime begun, not ended), waiting those waiting in Queued
	// for conversion capacity, podWaited those whose conversion pod was
	// seen waiting Unschedulable (status.podWaiting); maxOff and
	// maxWaiting are the most at once; outages are the ended outages of
	// the migrations that succeeded (status.downtime.seconds).
	off, waiting, podWaited map[string]bool
	maxOff, maxWaiting      int
	outages                 []float64
}

func newWatcher(want int) *watcher {
	return &watcher{want: want, now: time.Now, phase: map[string]v1alpha1.Phase{}, ended: map[string]bool{}, done: make(chan struct{}),
		firstSeen: map[string]time.Time{}, passed: map[string]bool{}, proofJobs: map[types.UID]bool{},
		off: map[string]bool{}, waiting: map[string]bool{}, podWaited: map[string]bool{}}
}

// noteOutage follows m's outage and its wait before the stop. Call with
// w.mu held.
func (w *watcher) noteOutage(key string, m *v1alpha1.VirtualMachineMigration) {
	dt := m.Status.Downtime
	setIf(w.off, key, dt != nil && dt.Seconds == nil)
	c := meta.FindStatusCondition(m.Status.Conditions, statemachine.ConditionProgressing)
	setIf(w.waiting, key, m.Status.Phase == v1alpha1.PhaseQueued && c != nil && c.Reason == statemachine.ReasonWaitingForConversionCapacity)
	if pw := m.Status.PodWaiting; pw != nil && m.Status.Phase == v1alpha1.PhaseConverting && pw.Reason == "Unschedulable" {
		w.podWaited[key] = true
	}
	w.maxOff, w.maxWaiting = max(w.maxOff, len(w.off)), max(w.maxWaiting, len(w.waiting))
	if m.Status.Phase == v1alpha1.PhaseSucceeded && !w.ended[key] && dt != nil && dt.Seconds != nil {
		w.outages = append(w.outages, float64(*dt.Seconds))
	}
}

// setIf puts key in set when in, and takes it out otherwise.
func setIf(set map[string]bool, key string, in bool) {
	if in {
		set[key] = true
	} else {
		delete(set, key)
	}
}

// sourcesOff is how many sources are off now.
func (w *watcher) sourcesOff() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.off)
}

// waitingBeforeStop is how many migrations wait in Queued for conversion
// capacity now.
func (w *watcher) waitingBeforeStop() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.waiting)
}

// outageFigures are the outages of the migrations that succeeded, the
// most sources off and migrations waiting for conversion capacity at
// once, and how many migrations' conversion pods waited for a node with
// their source off.
func (w *watcher) outageFigures() outageFigures {
	w.mu.Lock()
	defer w.mu.Unlock()
	return outageFigures{seconds: append([]float64(nil), w.outages...), maxOff: w.maxOff, maxWaiting: w.maxWaiting, podWaited: len(w.podWaited)}
}

// proofJobHandler counts the proof Jobs the informer of Jobs labelled
// component=proof sees, each UID once (a relist or an update adds none, a
// Job created again under the same name counts again).
func (w *watcher) proofJobHandler() cache.ResourceEventHandlerFuncs {
	seen := func(obj any) {
		if j, ok := obj.(*batchv1.Job); ok {
			w.mu.Lock()
			w.proofJobs[j.UID] = true
			w.mu.Unlock()
		}
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: seen, UpdateFunc: func(_, obj any) { seen(obj) }}
}

// proofJobsCreated is how many distinct proof Jobs were seen.
func (w *watcher) proofJobsCreated() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.proofJobs)
}

// validationWaits are the seconds each migration took from its creation
// to leaving Validating, as the watch saw them.
func (w *watcher) validationWaits() []float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]float64(nil), w.waits...)
}

// stillValidating is how many migrations were not seen past Validating.
func (w *watcher) stillValidating() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.firstSeen)
}

// pastValidating reports whether a phase comes after Validating.
func pastValidating(p v1alpha1.Phase) bool {
	return p != "" && p != v1alpha1.PhasePending && p != v1alpha1.PhaseValidating
}

// timeValidation notes when a migration is first seen and, the first
// time it is seen past Validating, how long that took. Call with w.mu held.
func (w *watcher) timeValidation(key string, phase v1alpha1.Phase) {
	if w.passed[key] {
		return
	}
	now := w.now()
	first, ok := w.firstSeen[key]
	if !ok {
		first = now
		w.firstSeen[key] = now
	}
	if pastValidating(phase) {
		w.waits = append(w.waits, now.Sub(first).Seconds())
		w.passed[key] = true
		delete(w.firstSeen, key)
	}
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
	w.timeValidation(key, m.Status.Phase)
	w.noteOutage(key, m)
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
