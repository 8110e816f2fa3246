package statemachine

import (
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/test/builders"
)

// The source-off umbrella, as a property: a migration whose source is
// stopped, in any phase, fed any sequence of observations a hostile but
// physically possible world can give (Jobs that hang until their active
// deadline, DataVolumes stuck Pending, a target that never runs, an
// instance that never goes, vSphere errors, actions that fail, no transfer
// slot), reaches a terminal phase, or a restore of the source that says in
// a condition what it waits for, within the deadline of the phase it is
// in. No phase of the way forward waits with the source off for longer,
// none waits without asking to be looked at again, and the source is never
// powered on while the target's instance exists.

const (
	sourceOffRuns = 400
	// offRetryDeadline is the runs' retry deadline.
	offRetryDeadline = 2 * time.Hour
	// offConversionTimeout is the conversion Job's active deadline in the
	// world (pipeline.Config.ConversionTimeout): the Job controller fails
	// it then.
	offConversionTimeout = 2 * time.Hour
	// offSlack covers the rollback once forward work ended: halting the
	// target, its instance's grace period, polls.
	offSlack = time.Hour
)

// offBound is when a run must be terminal or restoring with a condition:
// the retry deadline from the start, then the longest deadline a phase
// may still run to after it (the conversion Job's, the stall timeout
// after the last progress, the start timeout after the start request),
// then the rollback.
func offBound() time.Duration {
	start := -time.Hour // builders.Reached: StartTime
	return start + offRetryDeadline + max(offConversionTimeout, v1alpha1.DefaultStallTimeout, v1alpha1.DefaultStartTimeout) + offSlack
}

var sourceOffStarts = []v1alpha1.Phase{
	v1alpha1.PhaseStoppingSource, v1alpha1.PhaseTransferringDisks, v1alpha1.PhaseConverting, v1alpha1.PhaseImporting,
	v1alpha1.PhaseCreatingVM, v1alpha1.PhaseStarting, v1alpha1.PhaseRollingBack, v1alpha1.PhaseCancelling,
}

// offJob is a Job of the world: it hangs (no progress) until it fails or
// succeeds at endsAt, and fails at its active deadline at the latest.
type offJob struct {
	deadline, endsAt time.Duration
	outcome          string // "hang", "fail", "succeed"
}

// offWorld plays vSphere and the cluster for a migration whose source is off.
type offWorld struct {
	r         *rand.Rand
	g         gen
	now       time.Duration
	source    string // off, on, gone
	claims    bool
	jobs      map[string]offJob
	dvs       map[string]string // name -> phase, fixed at creation until it ends
	adopted   bool
	vm        string // run strategy; "" when absent
	vmi       string // phase; "" when absent
	vmiGoneAt time.Duration
	failRate  float64
	slotRate  float64
	errorRate float64
	released  bool
	delete    bool // the user deletes the migration at deleteAt
	deleteAt  time.Duration
	problems  []string
}

func newOffWorld(seed int64, start v1alpha1.Phase) *offWorld {
	r := rand.New(rand.NewSource(seed))
	w := &offWorld{r: r, g: gen{r}, source: PowerStateOff, jobs: map[string]offJob{}, dvs: map[string]string{}, vmiGoneAt: -1,
		failRate: pick(gen{r}, 0, 0.1, 0.5, 1), slotRate: pick(gen{r}, 0, 0.3, 1), errorRate: pick(gen{r}, 0, 0.2, 0.9)}
	w.delete = r.Intn(4) == 0
	w.deleteAt = time.Duration(r.Int63n(int64(4 * time.Hour)))
	idx := slices.Index(builders.Happy, start)
	w.claims = idx >= slices.Index(builders.Happy, v1alpha1.PhaseConverting) || start == v1alpha1.PhaseRollingBack || start == v1alpha1.PhaseCancelling
	if idx >= slices.Index(builders.Happy, v1alpha1.PhaseCreatingVM) {
		for _, n := range dvNames() {
			w.dvs[n] = DataVolumeSucceeded
		}
	}
	if start == v1alpha1.PhaseStarting {
		w.vm, w.adopted = RunStrategyHalted, true
	}
	return w
}

// observe is what the steps would see now.
func (w *offWorld) observe(m *v1alpha1.VirtualMachineMigration) Observation {
	if w.vmi != "" && w.vmiGoneAt >= 0 && w.now >= w.vmiGoneAt {
		w.vmi = ""
	}
	o := Observation{TransferSlot: SlotObservation{Available: w.g.chance(w.slotRate), Message: "host h1 runs 4 of 4 transfers"}}
	switch {
	case w.source == "gone":
		o.Source.Error = &ObservedError{Class: ErrorGone, Reason: ReasonSourceVMNotFound, Message: "gone"}
	case w.g.chance(w.errorRate):
		o.Source.Error = &ObservedError{Class: pick(w.g, ErrorTransient, ErrorNeedsUser), Reason: "VCenterUnreachable", Message: "no route to host"}
	default:
		o.Source = SourceObservation{Observed: true, PowerState: w.source, ToolsRunning: w.source == PowerStateOn && w.g.chance(0.5)}
	}
	if w.claims {
		observeClaims(m, &o)
	}
	o.Children.Jobs = refs(KindJob, slices.Sorted(maps.Keys(w.jobs))...)
	if t := m.Status.Transfer; t != nil {
		o.TransferJob = w.job(t.JobName)
	}
	if c := m.Status.Conversion; c != nil && !c.Skipped {
		o.ConversionJob = w.job(c.JobName)
	}
	for _, n := range slices.Sorted(maps.Keys(w.dvs)) {
		if o.DataVolumes == nil {
			o.DataVolumes = map[string]DataVolumeObservation{}
		}
		o.DataVolumes[n] = DataVolumeObservation{Ref: ref(KindDataVolume, n), Phase: w.dvs[n], Progress: "N/A", OwnedByVM: w.adopted,
			Message: "Bound: PVC " + n + " Pending"}
		if !w.adopted {
			o.Children.DataVolumes = append(o.Children.DataVolumes, ref(KindDataVolume, n))
		}
	}
	var vmi *VMIObservation
	if w.vmi != "" {
		vmi = &VMIObservation{Phase: w.vmi, Deleting: w.vm != RunStrategyAlways}
	}
	if w.vm != "" {
		o.VM = &VMObservation{Ours: true, UID: builders.TargetUID, RunStrategy: w.vm, Ref: ref(KindVirtualMachine, builders.DefaultTarget)}
		if vmi != nil && w.g.chance(0.5) {
			// KubeVirt's report of the instance on the VM, when it is not behind.
			o.VM.Created, o.VM.PrintableStatus = true, "Stopping"
		}
	}
	// The instance cache lags behind the API server now and then.
	if vmi != nil && !w.g.chance(0.3) {
		o.VMI = vmi
	}
	readLive(m, &o, vmi)
	return o
}

// job is what is seen of a Job of the world now.
func (w *offWorld) job(name string) *JobObservation {
	j, ok := w.jobs[name]
	if !ok {
		return nil
	}
	o := &JobObservation{Name: name, Ref: ref(KindJob, name), OperatingSystem: "rhel 9.4", Results: goodResults()}
	switch {
	case w.now >= j.deadline:
		o.Failed, o.Message = true, "Job was active longer than specified deadline"
	case w.now >= j.endsAt && j.outcome == "fail":
		o.Failed, o.Message = true, "exit code 1"
	case w.now >= j.endsAt && j.outcome == "succeed":
		o.Succeeded = true
	}
	return o
}

// apply carries out an action, or fails it.
func (w *offWorld) apply(m *v1alpha1.VirtualMachineMigration, a Action) *ObservedError {
	if a.Type != ActionNone && a.Type != ActionRemoveFinalizer && w.g.chance(w.failRate) {
		return &ObservedError{Class: pick(w.g, ErrorTransient, ErrorNeedsUser, ErrorPermanent), Reason: "Refused", Message: "refused"}
	}
	switch a.Type {
	case ActionRemoveFinalizer:
		m.Finalizers, w.released = nil, true
	case ActionPowerOnSource:
		if w.vmi != "" {
			w.problems = append(w.problems, fmt.Sprintf("at %s: the source powered on beside the target's instance (%s)", w.now, w.vmi))
		}
		if w.source == PowerStateOff {
			w.source = PowerStateOn
		}
	case ActionPowerOffSource, ActionShutdownGuest:
		if w.source == PowerStateOn {
			w.source = PowerStateOff
		}
	case ActionCreateStagingClaims:
		w.claims = true
	case ActionCreateTransferJob, ActionCreateConversionJob:
		w.createJob(a)
	case ActionCreateDataVolumes:
		for _, n := range dvNames() {
			if _, ok := w.dvs[n]; !ok {
				w.dvs[n] = pick(w.g, "Pending", "", "ImportScheduled", "CloneInProgress", DataVolumeSucceeded, DataVolumeFailed)
			}
		}
	default:
		w.applyTarget(a)
	}
	return nil
}

func (w *offWorld) createJob(a Action) {
	if _, ok := w.jobs[a.Name]; ok {
		return
	}
	deadline := offRetryDeadline
	if a.Type == ActionCreateConversionJob {
		deadline = offConversionTimeout
	}
	w.jobs[a.Name] = offJob{deadline: w.now + deadline, endsAt: w.now + time.Duration(w.r.Int63n(int64(3*time.Hour))),
		outcome: pick(w.g, "hang", "hang", "fail", "succeed")}
}

func (w *offWorld) applyTarget(a Action) {
	switch a.Type {
	case ActionCreateVM:
		w.vm = RunStrategyHalted
	case ActionAdoptDataVolumes:
		w.adopted = true
	case ActionStartVM:
		w.vm, w.vmi = RunStrategyAlways, pick(w.g, "Scheduling", "Scheduling", VMIRunning)
	case ActionHaltVM:
		w.vm = RunStrategyHalted
		if w.vmi != "" && w.vmiGoneAt < 0 {
			// KubeVirt's grace period, or a node that never answers.
			w.vmiGoneAt = w.now + time.Duration(w.r.Int63n(int64(5*time.Minute)))
			if w.g.chance(0.1) {
				w.vmiGoneAt = 1 << 62
			}
		}
	case ActionDeleteDataVolume:
		delete(w.dvs, a.Name)
	case ActionReleaseTarget:
		// Handed over: no longer the migration's.
		w.vm = ""
		clear(w.dvs)
	default:
		w.deleteObjects(a.Objects)
	}
}

func (w *offWorld) deleteObjects(objs []ObjectRef) {
	for _, o := range objs {
		switch o.Kind {
		case KindPersistentVolumeClaim:
			w.claims = false
		case KindJob:
			delete(w.jobs, o.Name)
		case KindDataVolume:
			delete(w.dvs, o.Name)
		case KindVirtualMachine:
			w.vm, w.vmi = "", ""
		}
	}
}

// offStart is a migration that reached start with its source stopped,
// ready for the world.
func offStart(start v1alpha1.Phase) *v1alpha1.VirtualMachineMigration {
	mods := []builders.MigrationMod{builders.Reached(start), builders.RetryDeadline(offRetryDeadline)}
	switch start {
	case v1alpha1.PhaseCancelling:
		mods = append(mods, builders.Deleted)
	case v1alpha1.PhaseStoppingSource:
		mods = append(mods, builders.WithSourceControl(func(sc *v1alpha1.SourceControlStatus) {
			sc.ShutdownRequestedAt, sc.PoweredOffAt = builders.TP(-time.Minute), nil
		}))
	case v1alpha1.PhaseConverting:
		mods = append(mods, builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) { s.Conversion = conversionAttempt(builders.Name, 1) }))
	}
	return newMigration(mods...)
}

// forwardOff reports whether a phase works forward with the source off.
func forwardOff(p v1alpha1.Phase) bool {
	switch p {
	case v1alpha1.PhaseStoppingSource, v1alpha1.PhaseTransferringDisks, v1alpha1.PhaseConverting, v1alpha1.PhaseImporting,
		v1alpha1.PhaseCreatingVM, v1alpha1.PhaseStarting:
		return true
	}
	return false
}

// restoreSaysWhy reports whether a migration restoring its source says in
// a condition that it waits, and on what.
func restoreSaysWhy(m *v1alpha1.VirtualMachineMigration) bool {
	if c := meta.FindStatusCondition(m.Status.Conditions, ConditionSourceRestoreFailed); c != nil && c.Status == metav1.ConditionTrue {
		return true
	}
	c := meta.FindStatusCondition(m.Status.Conditions, ConditionProgressing)
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason != "" && c.Message != ""
}

// offRun drives one run past the bound; it returns the final migration,
// the world and the problems seen.
func offRun(seed int64, start v1alpha1.Phase) (*v1alpha1.VirtualMachineMigration, *offWorld, []string) {
	w := newOffWorld(seed, start)
	m := offStart(start)
	var problems []string
	bound := offBound()
	for step := 0; step < 20000 && !w.released && w.now <= bound; step++ {
		if w.delete && m.DeletionTimestamp == nil && w.now >= w.deleteAt {
			m.DeletionTimestamp = builders.TP(w.now)
		}
		d := Decide(Input{Migration: m, Observation: w.observe(m), Now: builders.At(w.now)})
		if forwardOff(d.Status.Phase) && m.DeletionTimestamp == nil && d.Action.Type == ActionNone && d.RequeueAfter <= 0 {
			problems = append(problems, fmt.Sprintf("at %s in %s: a wait that does not ask to be looked at again", w.now, d.Status.Phase))
		}
		m = after(m, d)
		if e := w.apply(m, d.Action); e != nil {
			m = after(m, ActionFailed(Input{Migration: m, Now: builders.At(w.now)}, d.Action, *e))
		}
		if IsTerminal(m.Status.Phase) && m.DeletionTimestamp == nil {
			break
		}
		w.now += time.Duration(w.r.Int63n(int64(2 * DefaultPollInterval)))
		if w.r.Intn(40) == 0 {
			w.now += time.Duration(w.r.Int63n(int64(20 * time.Minute)))
		}
	}
	return m, w, append(problems, w.problems...)
}

// TestPropertySourceOffEndsOrSaysWhy: from every phase in which the
// source is off, every sequence of observations reaches a terminal phase,
// or a restore that says in a condition what it waits for, by the bound;
// the way forward never outlives it.
func TestPropertySourceOffEndsOrSaysWhy(t *testing.T) {
	ends := map[string]int{}
	for i := range sourceOffRuns {
		seed := propertySeed + 200000 + int64(i)
		start := sourceOffStarts[i%len(sourceOffStarts)]
		m, w, problems := offRun(seed, start)
		require.Empty(t, problems, "seed %d from %s", seed, start)
		end := string(m.Status.Phase)
		switch {
		case w.released:
			end = "released"
		case IsTerminal(m.Status.Phase):
		case forwardOff(m.Status.Phase):
			assert.Fail(t, "the way forward outlived its deadline",
				"seed %d from %s: still %s at %s (bound %s), the source %s; status %s", seed, start, m.Status.Phase, w.now, offBound(), w.source, describeStatus(m))
		default:
			end += " waiting"
			assert.True(t, restoreSaysWhy(m), "seed %d from %s: %s at %s without a condition saying what it waits for: %s",
				seed, start, m.Status.Phase, w.now, describeStatus(m))
		}
		ends[end]++
		if t.Failed() {
			return
		}
	}
	t.Logf("ends of %d runs: %v", sourceOffRuns, ends)
	for _, want := range []string{"Failed", "released", "RollingBack waiting"} {
		assert.NotZero(t, ends[want], "no run ended %s: %v", want, ends)
	}
}

// describeStatus is a migration's phase, errors and conditions.
func describeStatus(m *v1alpha1.VirtualMachineMigration) string {
	out := fmt.Sprintf("phase %s, lastError %+v, sourceControl %+v", m.Status.Phase, m.Status.LastError, m.Status.SourceControl)
	for _, c := range m.Status.Conditions {
		out += fmt.Sprintf("; %s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
	}
	return out
}
