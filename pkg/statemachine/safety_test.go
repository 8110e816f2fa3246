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

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/test/builders"
)

// Safety properties over random runs. A safeWorld plays vSphere and the
// cluster for one migration, with what goes wrong in real ones: actions
// that fail (transiently, for a person, for good), a controller that
// crashes between writing a decision's status and acting on it, a guest
// that takes its time to shut down, a source that disappears, foreign
// objects slipped into the observation, a user who deletes the migration
// at any point, and time that jumps. Every run is checked for:
//
//	(a) whenever the migration is Failed, or its finalizer is released
//	    before it succeeded, the source is in its original power state,
//	    unless the source VM no longer exists;
//	(b) no decision deletes the target VM or a DataVolume once the target
//	    was started or the migration succeeded;
//	(c) a run whose forward actions (creates, deletes, power-offs; not the
//	    power-on that restores the source) always fail ends Failed within
//	    the retry deadline;
//	(d) no delete names an object without this migration's UID.

const safetyRuns = 1500

// safeWorld is the simulated environment of one run.
type safeWorld struct {
	r          *rand.Rand
	now        time.Duration
	source     string        // a PowerState, or "gone"
	offAt      time.Duration // when a requested guest shutdown completes; -1 none
	original   string
	claims     bool
	jobs       map[string]bool // name -> fails when it ends
	doneJobs   map[string]bool
	dvs        map[string]bool // name -> owned by the VM
	vm         string          // run strategy, "" when absent
	started    bool            // the target VM was ever started
	failRate   float64         // chance an action fails
	failAll    bool            // every forward action fails
	crashRate  float64         // chance the action is lost (controller crash after the status write)
	deleteStep int             // step at which the user deletes the migration (-1 never)
	gone       bool            // the migration object is gone
}

func newSafeWorld(seed int64) *safeWorld {
	r := rand.New(rand.NewSource(seed))
	w := &safeWorld{r: r, source: PowerStateOn, offAt: -1, jobs: map[string]bool{}, doneJobs: map[string]bool{},
		dvs: map[string]bool{}, failRate: []float64{0, 0.1, 0.4}[r.Intn(3)], crashRate: []float64{0, 0.1}[r.Intn(2)],
		deleteStep: -1}
	if r.Intn(4) == 0 {
		w.source = PowerStateOff
	}
	w.original = w.source
	if r.Intn(2) == 0 {
		w.deleteStep = r.Intn(60)
	}
	return w
}

// observe is what the steps would see now, with an occasional failure to
// read the source and a foreign object in the children.
func (w *safeWorld) observe(m *v1alpha1.VirtualMachineMigration) Observation {
	w.settle()
	o := newObs(slot(true))
	switch {
	case w.source == "gone":
		o.Source = SourceObservation{Error: &ObservedError{Class: ErrorGone, Reason: ReasonSourceVMNotFound, Message: "gone"}}
	case w.r.Intn(10) == 0:
		o.Source = SourceObservation{Error: &ObservedError{Class: ErrorTransient, Reason: "VCenterBusy", Message: "busy"}}
	default:
		o.Source = SourceObservation{Observed: true, PowerState: w.source, ToolsRunning: true, Inventory: builders.Inventory()}
	}
	if w.claims {
		observeClaims(m, &o)
	}
	o.Children.Jobs = refs(KindJob, slices.Sorted(maps.Keys(w.jobs))...)
	// Something the observer should never have let through: never ours to delete.
	o.Children.ConfigMaps = []ObjectRef{{Kind: KindConfigMap, Name: "foreign", UID: "uid-foreign", MigrationUID: "someone-else"}}
	w.observeJobs(m, &o)
	w.observeTarget(&o)
	return o
}

func (w *safeWorld) observeJobs(m *v1alpha1.VirtualMachineMigration, o *Observation) {
	job := func(name string) *JobObservation {
		if _, ok := w.jobs[name]; !ok {
			return nil
		}
		j := &JobObservation{Name: name, Ref: ref(KindJob, name), OperatingSystem: "rhel 9.4", Results: goodResults()}
		if w.doneJobs[name] {
			j.Failed, j.Succeeded = w.jobs[name], !w.jobs[name]
		}
		return j
	}
	if t := m.Status.Transfer; t != nil {
		o.TransferJob = job(t.JobName)
	}
	if c := m.Status.Conversion; c != nil {
		if o.ConversionJob = job(c.JobName); o.ConversionJob != nil {
			o.ConversionJob.Checksums = convertedSums()
		}
	}
	if v := m.Status.Verification; v != nil {
		if o.VerificationJob = job(v.JobName); o.VerificationJob != nil {
			o.VerificationJob.Checksums = targetSums(convertedSums())
		}
	}
}

func (w *safeWorld) observeTarget(o *Observation) {
	for name, owned := range w.dvs {
		if o.DataVolumes == nil {
			o.DataVolumes = map[string]DataVolumeObservation{}
		}
		o.DataVolumes[name] = DataVolumeObservation{Ref: ref(KindDataVolume, name), Phase: DataVolumeSucceeded, Progress: "100.0%", OwnedByVM: owned, Claim: adoptedClaim(name)}
		if !owned {
			o.Children.DataVolumes = append(o.Children.DataVolumes, ref(KindDataVolume, name))
		}
	}
	slices.SortFunc(o.Children.DataVolumes, func(a, b ObjectRef) int { return compare(a.Name, b.Name) })
	if w.vm != "" {
		o.VM = &VMObservation{Ours: true, UID: builders.TargetUID, RunStrategy: w.vm, Ref: ref(KindVirtualMachine, builders.DefaultTarget)}
		if w.vm == RunStrategyAlways {
			o.VMI = &VMIObservation{Phase: VMIRunning}
		}
	}
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// settle lets time act: a guest shutdown completes, jobs end.
func (w *safeWorld) settle() {
	if w.offAt >= 0 && w.now >= w.offAt && w.source == PowerStateOn {
		w.source, w.offAt = PowerStateOff, -1
	}
	for name := range w.jobs {
		if !w.doneJobs[name] && w.r.Intn(3) == 0 {
			w.doneJobs[name] = true
			w.jobs[name] = w.r.Intn(5) == 0
		}
	}
	if w.r.Intn(200) == 0 && w.source != "gone" {
		w.source = "gone"
	}
}

// forward reports whether an action moves the migration on (as opposed to
// restoring the source, which property (c) lets succeed).
func forwardAction(a ActionType) bool {
	return a != ActionPowerOnSource && a != ActionRemoveFinalizer && a != ActionAddFinalizer
}

// apply carries out an action, or fails it: it returns the failure.
func (w *safeWorld) apply(m *v1alpha1.VirtualMachineMigration, a Action) *ObservedError {
	if (w.failAll && forwardAction(a.Type)) || w.r.Float64() < w.failRate {
		return &ObservedError{Class: pick(gen{w.r}, ErrorTransient, ErrorNeedsUser, ErrorPermanent), Reason: "Refused", Message: "refused"}
	}
	switch a.Type {
	case ActionAddFinalizer:
		m.Finalizers = []string{v1alpha1.FinalizerName}
	case ActionRemoveFinalizer:
		m.Finalizers = nil
	case ActionShutdownGuest:
		// The guest shuts down within the shutdown timeout, or ignores
		// the request (then the controller powers it off at the timeout).
		if w.source == PowerStateOn && w.r.Intn(5) > 0 {
			w.offAt = w.now + time.Duration(w.r.Int63n(int64(5*time.Minute)))
		}
	case ActionPowerOffSource:
		if w.source == PowerStateOn {
			w.source, w.offAt = PowerStateOff, -1
		}
	case ActionPowerOnSource:
		if w.source == "gone" {
			return &ObservedError{Class: ErrorGone, Reason: ReasonSourceVMNotFound, Message: "gone"}
		}
		w.source, w.offAt = PowerStateOn, -1
	default:
		w.applyKube(a)
	}
	return nil
}

func (w *safeWorld) applyKube(a Action) {
	switch a.Type {
	case ActionCreateStagingClaims:
		w.claims = true
	case ActionCreateTransferJob, ActionCreateConversionJob, ActionCreateVerificationJob:
		if _, ok := w.jobs[a.Name]; !ok {
			w.jobs[a.Name] = false
		}
	case ActionCreateDataVolumes:
		for _, n := range dvNames() {
			if _, ok := w.dvs[n]; !ok {
				w.dvs[n] = false
			}
		}
	case ActionCreateVM:
		w.vm = RunStrategyHalted
	case ActionAdoptDataVolumes:
		for n := range w.dvs {
			w.dvs[n] = true
		}
	case ActionStartVM:
		w.vm, w.started = RunStrategyAlways, true
	case ActionHaltVM:
		w.vm = RunStrategyHalted
	default:
		w.delete(a.Objects)
	}
}

// delete removes the named objects; a deleted VM takes the DataVolumes it owns.
func (w *safeWorld) delete(objs []ObjectRef) {
	for _, o := range objs {
		switch o.Kind {
		case KindPersistentVolumeClaim:
			w.claims = false
		case KindJob:
			delete(w.jobs, o.Name)
		case KindDataVolume:
			delete(w.dvs, o.Name)
		case KindVirtualMachine:
			w.vm = ""
			maps.DeleteFunc(w.dvs, func(_ string, owned bool) bool { return owned })
		}
	}
}

// safetyRun drives one migration to its end, checking (b) and (d) at
// every decision; it returns the final migration and the world.
func safetyRun(t *testing.T, seed int64, failAll bool) (*v1alpha1.VirtualMachineMigration, *safeWorld) {
	t.Helper()
	w := newSafeWorld(seed)
	w.failAll = failAll
	m := newMigration(builders.WithoutFinalizer, builders.RetryDeadline(time.Hour), builders.ShutdownTimeout(5*time.Minute))
	for step := 0; step < 3000 && !w.gone; step++ {
		if step == w.deleteStep && m.DeletionTimestamp == nil {
			m.DeletionTimestamp = builders.TP(w.now)
		}
		in := Input{Migration: m, Observation: w.observe(m), Now: builders.At(w.now)}
		d := Decide(in)
		checkDeletes(t, seed, m, w, d.Action)
		m = after(m, d)
		if d.Action.Type != ActionNone && w.r.Float64() >= w.crashRate {
			if e := w.apply(m, d.Action); e != nil {
				m = after(m, ActionFailed(Input{Migration: m, Now: builders.At(w.now)}, d.Action, *e))
			}
		}
		if m.DeletionTimestamp != nil && len(m.Finalizers) == 0 {
			w.gone = true
		}
		if IsTerminal(m.Status.Phase) && m.DeletionTimestamp == nil && d.Action.Type == ActionNone {
			break
		}
		w.now += time.Duration(w.r.Int63n(int64(2 * DefaultPollInterval)))
		if w.r.Intn(100) == 0 {
			w.now += 20 * time.Minute
		}
	}
	return m, w
}

// checkDeletes asserts (b) and (d) on one decision's action.
func checkDeletes(t *testing.T, seed int64, m *v1alpha1.VirtualMachineMigration, w *safeWorld, a Action) {
	t.Helper()
	started := w.started || (m.Status.Target != nil && m.Status.Target.StartRequestedAt != nil)
	for _, o := range a.Objects {
		assert.Equal(t, m.UID, o.MigrationUID, "seed %d: (d) %s deletes %s %s of another migration", seed, a.Type, o.Kind, o.Name)
		assert.NotEmpty(t, o.MigrationUID, "seed %d: (d) %s deletes %s %s of no migration", seed, a.Type, o.Kind, o.Name)
		if started || m.Status.Phase == v1alpha1.PhaseSucceeded {
			assert.NotContains(t, []string{KindDataVolume, KindVirtualMachine}, o.Kind,
				"seed %d: (b) %s deletes %s %s in %s after the target was started or the migration succeeded",
				seed, a.Type, o.Kind, o.Name, m.Status.Phase)
			assert.False(t, o.Kind == KindPersistentVolumeClaim && slices.Contains(dvNames(), o.Name),
				"seed %d: (b) %s deletes the target disk's claim %s in %s after the target was started or the migration succeeded",
				seed, a.Type, o.Name, m.Status.Phase)
		}
	}
}

// TestSafetyProperties runs (a), (b) and (d) over random runs.
func TestSafetyProperties(t *testing.T) {
	ends := map[string]int{}
	for i := range safetyRuns {
		seed := propertySeed + int64(i)
		m, w := safetyRun(t, seed, false)
		released := w.gone && m.Status.Phase != v1alpha1.PhaseSucceeded
		end := fmt.Sprintf("%s deleted=%v", m.Status.Phase, w.gone)
		ends[end]++
		if (m.Status.Phase == v1alpha1.PhaseFailed || released) && w.source != "gone" {
			assert.Equal(t, w.original, w.source, "seed %d: (a) %s, finalizer released %v: want the source in the power state it was found in (sourceControl %+v)",
				seed, m.Status.Phase, w.gone, m.Status.SourceControl)
		}
	}
	t.Logf("ends of %d runs: %v", safetyRuns, ends)
	assert.NotZero(t, ends[fmt.Sprintf("%s deleted=false", v1alpha1.PhaseSucceeded)], "the runs did not reach Succeeded: %v", ends)
	assert.NotZero(t, ends[fmt.Sprintf("%s deleted=false", v1alpha1.PhaseFailed)], "the runs did not reach Failed: %v", ends)
}

// TestSafetyFailingActionsEndFailed checks (c): with every forward action
// failing, each run ends Failed (or released, when deleted) within the
// retry deadline, the source restored.
func TestSafetyFailingActionsEndFailed(t *testing.T) {
	for i := range safetyRuns / 3 {
		seed := propertySeed + 100000 + int64(i)
		m, w := safetyRun(t, seed, true)
		if !w.gone && !assert.Equal(t, v1alpha1.PhaseFailed, m.Status.Phase, "seed %d: (c) every forward action fails, want the run to end Failed (lastError %+v)", seed, m.Status.LastError) {
			continue
		}
		if m.Status.CompletionTime != nil && m.Status.StartTime != nil {
			took := m.Status.CompletionTime.Sub(m.Status.StartTime.Time)
			assert.LessOrEqual(t, took, time.Hour+30*time.Minute, "seed %d: (c) Failed %s after the start, past the retry deadline of 1h", seed, took)
		}
		if w.source != "gone" {
			assert.Equal(t, w.original, w.source, "seed %d: (a) want the source in the power state it was found in", seed)
		}
	}
}

// TestRestoreWaitsForAPendingStop: a guest shutdown requested moments
// before a cancel may still be under way; the source seen on is not yet
// restored, until it was seen off and powered on, or the shutdown timed out.
func TestRestoreWaitsForAPendingStop(t *testing.T) {
	shuttingDown := builders.WithSourceControl(func(sc *v1alpha1.SourceControlStatus) {
		*sc = v1alpha1.SourceControlStatus{OriginalPowerState: PowerStateOn, ShutdownRequestedAt: builders.TP(-30 * time.Second)}
	})
	cancelling := func(mods ...builders.MigrationMod) *v1alpha1.VirtualMachineMigration {
		return newMigration(append([]builders.MigrationMod{builders.Reached(v1alpha1.PhaseStoppingSource), builders.Deleted,
			builders.InPhase(v1alpha1.PhaseCancelling), shuttingDown}, mods...)...)
	}
	runCases(t, map[string]decideCase{
		"still on 30s after the shutdown request: wait, do not count it restored": {
			m: cancelling(), obs: newObs(sourceOn(true)),
			phase: v1alpha1.PhaseCancelling, requeue: DefaultPollInterval,
			check: func(t *testing.T, d Decision) {
				assert.Nil(t, d.Status.SourceControl.RestoredAt, "restored while the guest may still be shutting down")
			},
		},
		"off now: power it on": {
			m: cancelling(), obs: newObs(sourceOff, liveVMI(nil)),
			phase: v1alpha1.PhaseCancelling, action: ActionPowerOnSource,
		},
		"still on after the shutdown timeout: the guest ignored it, restored": {
			m: cancelling(), obs: newObs(sourceOn(true)), now: 5 * time.Minute,
			phase: v1alpha1.PhaseCancelling,
			check: func(t *testing.T, d Decision) {
				wantTime(t, "restoredAt", d.Status.SourceControl.RestoredAt, 5*time.Minute)
			},
		},
		"powered on after it was seen off: restored": {
			m: cancelling(builders.WithSourceControl(func(sc *v1alpha1.SourceControlStatus) {
				sc.PoweredOffAt, sc.RestoreRequestedAt = builders.TP(-20*time.Second), builders.TP(-10*time.Second)
			})),
			obs:   newObs(sourceOn(true)),
			phase: v1alpha1.PhaseCancelling,
			check: func(t *testing.T, d Decision) { wantTime(t, "restoredAt", d.Status.SourceControl.RestoredAt, 0) },
		},
	})
}

// TestActionFailed: a failed action is handled by its class, and never
// ends a restore.
func TestActionFailed(t *testing.T) {
	transferring := newMigration(builders.Reached(v1alpha1.PhaseTransferringDisks), builders.InPhase(v1alpha1.PhaseTransferringDisks))
	restoring := newMigration(builders.Reached(v1alpha1.PhaseRollingBack))
	create := Action{Type: ActionCreateStagingClaims}
	for name, tc := range map[string]struct {
		m       *v1alpha1.VirtualMachineMigration
		a       Action
		e       ObservedError
		now     time.Duration
		phase   v1alpha1.Phase
		cond    string
		reason  string
		requeue time.Duration
	}{
		"transient: wait": {transferring, create, ObservedError{Class: ErrorTransient, Reason: "APIUnavailable"}, 0,
			v1alpha1.PhaseTransferringDisks, ConditionProgressing, "APIUnavailable", DefaultPollInterval},
		"quota: wait for a person": {transferring, create, ObservedError{Class: ErrorNeedsUser, Reason: "QuotaExceeded"}, 0,
			v1alpha1.PhaseTransferringDisks, ConditionProgressing, "QuotaExceeded", DefaultWaitInterval},
		"past the deadline: fail": {transferring, create, ObservedError{Class: ErrorNeedsUser, Reason: "QuotaExceeded"}, 24 * time.Hour,
			v1alpha1.PhaseRollingBack, ConditionReady, "QuotaExceeded", 0},
		"invalid: fail at once": {transferring, create, ObservedError{Class: ErrorPermanent, Reason: "ObjectRejected"}, 0,
			v1alpha1.PhaseRollingBack, ConditionReady, "ObjectRejected", 0},
		"power-on fails while restoring: keep trying, say so": {restoring, Action{Type: ActionPowerOnSource}, ObservedError{Class: ErrorPermanent, Reason: "SourceError"}, 0,
			v1alpha1.PhaseRollingBack, ConditionSourceRestoreFailed, ReasonSourceRestoreFailed, DefaultWaitInterval},
		"a delete fails while rolling back: wait": {restoring, Action{Type: ActionDeleteJob}, ObservedError{Class: ErrorPermanent, Reason: "Forbidden"}, 0,
			v1alpha1.PhaseRollingBack, ConditionProgressing, "Forbidden", DefaultWaitInterval},
	} {
		t.Run(name, func(t *testing.T) {
			tc.e.Message = "it went wrong"
			d := ActionFailed(Input{Migration: tc.m, Now: builders.At(tc.now)}, tc.a, tc.e)
			require.Equal(t, tc.phase, d.Status.Phase, "the phase the failed action leaves the migration in")
			c := cond(t, d, tc.cond)
			assert.Equal(t, tc.reason, c.Reason, "%s reason", tc.cond)
			if tc.requeue > 0 {
				assert.Equal(t, tc.requeue, d.RequeueAfter, "requeueAfter")
			}
			assert.Contains(t, eventReasons(d), ReasonActionFailed, "want an ActionFailed event")
		})
	}
}
