package statemachine

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand"
	"os"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/test/builders"
)

// Property tests: a seeded generator of inputs over every phase and every
// shape of observation. A failure prints the seed and case number; the
// generator is deterministic, so the case replays.

const propertyCases = 4000

// propertySeed is fixed so that runs are reproducible; set
// STATEMACHINE_PROPERTY_SEED to explore other inputs.
var propertySeed = func() int64 {
	if s, err := strconv.ParseInt(os.Getenv("STATEMACHINE_PROPERTY_SEED"), 10, 64); err == nil {
		return s
	}
	return 20250301
}()

var allPhases = []v1alpha1.Phase{
	"", v1alpha1.PhasePending, v1alpha1.PhaseValidating, v1alpha1.PhaseAwaitingApproval, v1alpha1.PhaseQueued,
	v1alpha1.PhaseStoppingSource, v1alpha1.PhaseTransferringDisks, v1alpha1.PhaseConverting, v1alpha1.PhaseImporting,
	v1alpha1.PhaseCreatingVM, v1alpha1.PhaseStarting, v1alpha1.PhaseCleaningUp, v1alpha1.PhaseRollingBack,
	v1alpha1.PhaseCancelling, v1alpha1.PhaseSucceeded, v1alpha1.PhaseFailed,
}

type gen struct{ r *rand.Rand }

func (g gen) chance(p float64) bool { return g.r.Float64() < p }

func pick[T any](g gen, xs ...T) T { return xs[g.r.Intn(len(xs))] }

// dur is a random duration in [0, max).
func (g gen) dur(max time.Duration) time.Duration { return time.Duration(g.r.Int63n(int64(max))) }

// optTime is nil or a time up to max before t0.
func (g gen) optTime(max time.Duration) *metav1.Time {
	if g.chance(0.4) {
		return nil
	}
	return builders.TP(-g.dur(max))
}

func (g gen) migration() *v1alpha1.VirtualMachineMigration {
	var before, afterOpts []builders.MigrationMod
	for _, o := range []struct {
		p   float64
		opt builders.MigrationMod
	}{
		{0.2, builders.RequireApproval}, {0.3, builders.Approved}, {0.2, builders.Insecure}, {0.2, builders.SkipConversion}, {0.2, builders.Retain},
		{0.15, builders.NoStart}, {0.2, builders.WaitForAgent}, {0.3, builders.PowerOffMode}, {0.2, builders.TargetName("web-new")},
	} {
		if g.chance(o.p) {
			before = append(before, o.opt)
		}
	}
	limit := int32(g.r.Intn(5))
	if g.chance(0.8) {
		before = append(before, builders.RetryLimit(limit))
	} else {
		limit = v1alpha1.DefaultRetryLimit
	}
	if g.chance(0.2) {
		before = append(before, builders.RetryDeadline(time.Duration(1+g.r.Intn(48))*time.Hour))
	}
	if g.chance(0.2) {
		before = append(before, func(m *v1alpha1.VirtualMachineMigration) {
			m.Spec.Policy.StallTimeout = &v1alpha1.Duration{Duration: time.Duration(1+g.r.Intn(60)) * time.Minute}
		})
	}
	phase := pick(g, allPhases...)
	before = append(before, builders.Reached(phase))
	if phase == "" {
		before = append(before, builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
			*s = v1alpha1.VirtualMachineMigrationStatus{}
		}))
	}
	for _, o := range []struct {
		p   float64
		opt builders.MigrationMod
	}{
		{0.1, builders.WithoutFinalizer}, {0.15, builders.Deleted}, {0.1, builders.Paused}, {0.15, builders.WithGeneration(2)},
		{0.1, builders.WithSpec(func(s *v1alpha1.VirtualMachineMigrationSpec) { s.Target.Name = "changed" })},
		{0.1, builders.WithSpec(func(s *v1alpha1.VirtualMachineMigrationSpec) { s.Policy.Approved = !s.Policy.Approved })},
		{0.3, builders.WithRetries(int32(g.r.Intn(int(limit) + 2)))},
		{0.3, builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
			s.PhaseStartTime, s.LastProgressTime = g.optTime(time.Hour), g.optTime(time.Hour)
		})},
		{0.2, builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) { s.StartTime = g.optTime(30 * time.Hour) })},
		{0.15, builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
			s.StartTime = builders.TP(-v1alpha1.DefaultRetryDeadline + g.dur(time.Minute))
		})},
		{0.3, builders.WithSourceControl(func(sc *v1alpha1.SourceControlStatus) {
			sc.OriginalPowerState = pick(g, "", PowerStateOn, PowerStateOff, PowerStateSuspended)
			sc.ShutdownRequestedAt = g.optTime(10 * time.Minute)
			sc.PowerOffRequestedAt = g.optTime(time.Minute)
			sc.RestoreRequestedAt = g.optTime(time.Minute)
			sc.RestoredAt = g.optTime(time.Minute)
		})},
		{0.15, withSnapshot},
		{0.1, builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) { s.Disks = nil })},
		{0.1, builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) { s.Target = nil })},
		{0.1, builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) { s.Source = nil })},
		{0.1, builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
			a := int32(1 + g.r.Intn(3))
			s.Transfer = &v1alpha1.JobStatus{JobName: naming.TransferJob(builders.Name, a), Attempt: a}
		})},
		{0.1, builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) { s.Conversion = conversionAttempt(builders.Name, 1) })},
		{0.1, builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
			for i := range s.Disks {
				s.Disks[i].DataVolume = dvNames()[i]
				s.Disks[i].ImportPhase = pick(g, "", DataVolumeFailed, "ImportInProgress")
			}
		})},
		// A refusal before the stop, as it leaves a Failed status.
		{0.3, builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
			if s.Phase != v1alpha1.PhaseFailed || s.LastError == nil {
				return
			}
			s.LastError.Phase = pick(g, v1alpha1.PhaseValidating, v1alpha1.PhaseAwaitingApproval, v1alpha1.PhaseQueued)
			s.AppliedSpec, s.SourceControl, s.Transfer, s.Conversion, s.Disks = nil, nil, nil, nil, nil
			s.Target = &v1alpha1.TargetStatus{Name: builders.DefaultTarget}
		})},
	} {
		if g.chance(o.p) {
			afterOpts = append(afterOpts, o.opt)
		}
	}
	return newMigration(append(before, afterOpts...)...)
}

func (g gen) job(name string) *JobObservation {
	if g.chance(0.3) {
		return nil
	}
	j := &JobObservation{Name: name}
	switch g.r.Intn(4) {
	case 0:
		j.Failed, j.Message = true, "boom"
		j.Reason = pick(g, "", ConversionInspectionFailed, ConversionUnsupportedGuest)
	case 1:
		j.Succeeded, j.OperatingSystem = true, "rhel 9.4"
		j.Results = goodResults()
		if g.chance(0.3) {
			j.Results = j.Results[:g.r.Intn(2)]
		} else if g.chance(0.2) {
			j.Results[1].SHA256 = ""
		}
	default:
		if g.chance(0.7) {
			j.Progress = []DiskProgress{
				{Key: builders.DiskKey0, BytesDone: g.r.Int63n(builders.DiskCap0 + 1), RateBytesPerSecond: g.r.Int63n(200 << 20)},
				{Key: builders.DiskKey1, BytesDone: g.r.Int63n(builders.DiskCap1 + 1), RateBytesPerSecond: g.r.Int63n(200 << 20)},
			}
		}
	}
	return j
}

func (g gen) observation(m *v1alpha1.VirtualMachineMigration) Observation {
	var o Observation
	switch g.r.Intn(6) {
	case 0:
	case 1:
		o.Source.Error = &ObservedError{Class: pick(g, ErrorTransient, ErrorNeedsUser, ErrorPermanent), Reason: "SourceTrouble", Message: "trouble"}
	case 2:
		sourceInventory(&o)
	default:
		o.Source.Observed = true
		o.Source.PowerState = pick(g, PowerStateOn, PowerStateOff, PowerStateSuspended)
		o.Source.ToolsRunning = g.chance(0.5)
	}
	if o.Source.Observed && g.chance(0.3) {
		o.Source.Snapshots = []string{snapName}
	}
	if o.Source.Observed && g.chance(0.3) {
		for i := range 1 + g.r.Intn(2) {
			task := TaskObservation{Ref: fmt.Sprintf("task-%d", i), State: pick(g, "", TaskQueued, TaskRunning, TaskSucceeded, TaskFailed)}
			if task.State == TaskFailed {
				task.Error = &ObservedError{Class: pick(g, ErrorTransient, ErrorPermanent), Reason: "SourceError", Message: "task failed"}
			}
			o.Source.PowerOffTasks = append(o.Source.PowerOffTasks, task)
		}
	}
	for range g.r.Intn(3) {
		o.Preflight = append(o.Preflight, v1alpha1.PreflightFinding{Reason: "Rule", Severity: pick(g, v1alpha1.SeverityWarning, v1alpha1.SeverityBlocking), Message: "found"})
	}
	o.TransferSlot.Available = g.chance(0.6)
	cl := stagingClaims()
	o.Children.StagingClaims = refs(KindPersistentVolumeClaim, cl[:g.r.Intn(len(cl)+1)]...)
	if g.chance(0.3) {
		o.Children.Jobs = refs(KindJob, naming.TransferJob(builders.Name, 1))
	}
	if g.chance(0.2) {
		o.Children.ConfigMaps = refs(KindConfigMap, naming.ConversionConfigMap(builders.Name, 1))
	}
	if g.chance(0.2) {
		o.Children.DataVolumes = refs(KindDataVolume, dvNames()[:1]...)
	}
	if v := m.Status.Verification; v != nil && g.chance(0.5) {
		o.VerificationJob = g.job(v.JobName)
		if o.VerificationJob != nil && o.VerificationJob.Succeeded {
			o.VerificationJob.Checksums = targetSums(convertedSums())
			if g.chance(0.3) {
				o.VerificationJob.Checksums[0].SHA256 = "corrupted"
			}
		}
	}
	tname, cname := naming.TransferJob(builders.Name, 1), naming.ConversionJob(builders.Name, 1)
	if t := m.Status.Transfer; t != nil {
		tname = t.JobName
	}
	if c := m.Status.Conversion; c != nil && c.JobName != "" {
		cname = c.JobName
	}
	o.TransferJob, o.ConversionJob = g.job(tname), g.job(cname)
	if g.chance(0.7) {
		o.DataVolumes = map[string]DataVolumeObservation{}
		for _, n := range dvNames()[:1+g.r.Intn(2)] {
			o.DataVolumes[n] = DataVolumeObservation{
				Ref:       ref(KindDataVolume, n),
				Phase:     pick(g, "", "ImportScheduled", "ImportInProgress", DataVolumeSucceeded, DataVolumeFailed),
				Progress:  pick(g, "", "N/A", "12.50%", "100.0%", "junk"),
				OwnedByVM: g.chance(0.5),
				Claim:     pick(g, adoptedClaim(n), nil, &ClaimState{UID: "blank-by-cdi", Bound: true, ControllerUID: ref(KindDataVolume, n).UID}, &ClaimState{UID: types.UID("uid-" + n)}),
			}
		}
	}
	if g.chance(0.6) {
		o.VM = &VMObservation{Ours: g.chance(0.8), UID: builders.TargetUID, RunStrategy: pick(g, RunStrategyAlways, RunStrategyHalted, "")}
	}
	if g.chance(0.5) {
		o.VMI = &VMIObservation{Phase: pick(g, "Scheduling", VMIRunning, VMIFailed), AgentConnected: g.chance(0.5)}
	}
	return o
}

func (g gen) input() Input {
	m := g.migration()
	return Input{Migration: m, Observation: g.observation(m), Now: builders.At(g.dur(time.Minute))}
}

// forEachInput runs f on propertyCases generated inputs.
func forEachInput(t *testing.T, f func(t *testing.T, i int, in Input)) {
	g := gen{rand.New(rand.NewSource(propertySeed))}
	for i := range propertyCases {
		in := g.input()
		f(t, i, in)
		if t.Failed() {
			require.FailNow(t, "stopped at the first failing case", "failed on case %d (seed %d): phase %q, deleted %v, paused %v", i, propertySeed,
				in.Migration.Status.Phase, in.Migration.DeletionTimestamp != nil, in.Migration.Spec.Policy.Paused)
		}
	}
}

func cloneInput(in Input) Input {
	in.Migration = in.Migration.DeepCopy()
	return in
}

// snapshot is the whole input as JSON: every slice, map and pointer the
// migration and the observation reach, so that a mutation through any of
// them (shared with the caller) shows as a difference.
func snapshot(t *testing.T, in Input) string {
	t.Helper()
	data, err := json.Marshal(struct {
		M *v1alpha1.VirtualMachineMigration
		O Observation
	}{in.Migration, in.Observation})
	require.NoError(t, err, "encoding the input")
	return string(data)
}

// (a) Deciding twice on the same input gives the same decision, and the
// input is never mutated, down to the observation's slices and maps.
func TestPropertyDeterministic(t *testing.T) {
	forEachInput(t, func(t *testing.T, i int, in Input) {
		before := snapshot(t, in)
		d1 := Decide(cloneInput(in))
		d2 := Decide(in)
		assert.Equal(t, d1, d2, "two decisions on the same input differ")
		assert.Equal(t, before, snapshot(t, in), "Decide mutated its input")
	})
}

// TestSnapshotSeesNestedMutations: the mutation check of
// TestPropertyDeterministic fails when anything the input reaches changes,
// the observation's nested slices and maps included.
func TestSnapshotSeesNestedMutations(t *testing.T) {
	base := func() Input {
		return Input{Migration: newMigration(builders.Reached(v1alpha1.PhaseImporting)), Observation: newObs(
			claims(stagingClaims()...), transferJob(JobObservation{Name: "j", Results: goodResults()}),
			dataVolumes(DataVolumeSucceeded, "100.0%", false), sourceSnapshots("s1"))}
	}
	for name, mutate := range map[string]func(*Input){
		"a child ref":            func(in *Input) { in.Observation.Children.StagingClaims[0].Name = "x" },
		"a job result":           func(in *Input) { in.Observation.TransferJob.Results[0].SHA256 = "x" },
		"a data volume":          func(in *Input) { in.Observation.DataVolumes[dvNames()[0]] = DataVolumeObservation{} },
		"a snapshot name":        func(in *Input) { in.Observation.Source.Snapshots[0] = "x" },
		"a disk of the status":   func(in *Input) { in.Migration.Status.Disks[0].SHA256 = "x" },
		"the inventory's name":   func(in *Input) { in.Migration.Status.Source.Name = "x" },
		"an evidence entry text": func(in *Input) { in.Migration.Status.Evidence[0].Observed = "x" },
	} {
		in := base()
		before := snapshot(t, in)
		mutate(&in)
		assert.NotEqual(t, before, snapshot(t, in), "%s: the snapshot did not change", name)
	}
}

// allowedNext lists, per phase, where a decision may move it without
// deletion (besides staying, and RollingBack from any phase that works).
var allowedNext = map[v1alpha1.Phase][]v1alpha1.Phase{
	v1alpha1.PhasePending:           {v1alpha1.PhaseValidating},
	v1alpha1.PhaseValidating:        {v1alpha1.PhaseAwaitingApproval, v1alpha1.PhaseQueued},
	v1alpha1.PhaseAwaitingApproval:  {v1alpha1.PhaseQueued, v1alpha1.PhaseValidating},
	v1alpha1.PhaseQueued:            {v1alpha1.PhaseStoppingSource, v1alpha1.PhaseValidating, v1alpha1.PhaseAwaitingApproval},
	v1alpha1.PhaseStoppingSource:    {v1alpha1.PhaseTransferringDisks},
	v1alpha1.PhaseTransferringDisks: {v1alpha1.PhaseConverting},
	v1alpha1.PhaseConverting:        {v1alpha1.PhaseImporting, v1alpha1.PhaseTransferringDisks},
	v1alpha1.PhaseImporting:         {v1alpha1.PhaseCreatingVM},
	v1alpha1.PhaseCreatingVM:        {v1alpha1.PhaseStarting},
	v1alpha1.PhaseStarting:          {v1alpha1.PhaseCleaningUp},
	v1alpha1.PhaseCleaningUp:        {v1alpha1.PhaseSucceeded},
	v1alpha1.PhaseRollingBack:       {v1alpha1.PhaseFailed},
	v1alpha1.PhaseCancelling:        {},
	v1alpha1.PhaseSucceeded:         {},
	v1alpha1.PhaseFailed:            {},
}

// forward reports whether to is the next checkpoint after from on the way
// to success: the move that must record from's evidence.
func forward(from, to v1alpha1.Phase) bool {
	switch {
	case from == v1alpha1.PhaseValidating && to == v1alpha1.PhaseAwaitingApproval,
		from == v1alpha1.PhaseAwaitingApproval && to == v1alpha1.PhaseQueued:
		return true
	case from == v1alpha1.PhaseAwaitingApproval:
		return false
	}
	i := phaseIndex(from)
	return i >= 0 && i+1 < len(builders.Happy) && builders.Happy[i+1] == to
}

// (b) No decision skips a checkpoint, and every forward move records the
// evidence of the checkpoint it leaves.
func TestPropertyNoCheckpointSkipped(t *testing.T) {
	forEachInput(t, func(t *testing.T, i int, in Input) {
		from := in.Migration.Status.Phase
		if from == "" {
			from = v1alpha1.PhasePending
		}
		d := Decide(in)
		to := d.Status.Phase
		if to == from {
			return
		}
		deleting := in.Migration.DeletionTimestamp != nil
		switch {
		case deleting:
			assert.Equal(t, v1alpha1.PhaseCancelling, to, "deletion moved %s to %s, want Cancelling", from, to)
			assert.False(t, IsTerminal(from), "deletion moved terminal %s to %s", from, to)
		case to == v1alpha1.PhaseRollingBack:
			assert.False(t, IsTerminal(from), "terminal %s moved to RollingBack", from)
			assert.NotEqual(t, v1alpha1.PhaseCancelling, from, "%s moved to RollingBack", from)
		case from == v1alpha1.PhaseFailed:
			// Only a refusal before the stop, its spec changed, moves on.
			assert.Equal(t, v1alpha1.PhaseValidating, to, "Failed moved to %s", to)
			assert.True(t, RefusedBeforeCutover(&in.Migration.Status), "Failed moved to %s though not refused before the stop", to)
			assert.NotEqual(t, in.Migration.Generation, in.Migration.Status.ObservedGeneration, "Failed moved to %s with no new spec", to)
		case to == v1alpha1.PhaseFailed && from != v1alpha1.PhaseRollingBack:
			// Refused before the stop: nothing to roll back.
			assert.True(t, beforeTheStop(from), "%s moved to Failed without a rollback", from)
			assert.True(t, SourceUntouched(&in.Migration.Status), "%s moved to Failed without a rollback, its source touched: %+v", from, in.Migration.Status.SourceControl)
			assert.NotNil(t, d.Status.LastError, "%s -> Failed without lastError", from)
		default:
			assert.Contains(t, allowedNext[from], to, "%s moved to %s, not a phase allowed next", from, to)
		}
		if forward(from, to) {
			ev := evidenceFor(d.Status, from)
			if assert.NotNil(t, ev, "%s -> %s without evidence for %s", from, to, from) {
				assertTime(t, in.Now, &ev.ReachedAt, "%s -> %s: evidence for %s not recorded now: %+v", from, to, from, ev)
				assert.NotEmpty(t, ev.Observed, "%s -> %s: evidence for %s does not say what was observed: %+v", from, to, from, ev)
			}
		}
		if to == v1alpha1.PhaseRollingBack {
			assert.NotNil(t, d.Status.LastError, "%s -> RollingBack without lastError", from)
		}
		assertTime(t, in.Now, d.Status.PhaseStartTime, "%s -> %s: phaseStartTime %v, want now", from, to, d.Status.PhaseStartTime)
	})
}

// (c) Terminal phases stay terminal: without deletion nothing changes phase
// and no action is asked for; with deletion only cleanup actions. The one
// exception: a migration refused before its source was touched validates
// again when its spec changes.
func TestPropertyTerminalStaysTerminal(t *testing.T) {
	forEachInput(t, func(t *testing.T, i int, in Input) {
		from := in.Migration.Status.Phase
		if !IsTerminal(from) {
			return
		}
		d := Decide(in)
		refused := in.Migration.DeletionTimestamp == nil && RefusedBeforeCutover(&in.Migration.Status) &&
			in.Migration.Generation != in.Migration.Status.ObservedGeneration
		if refused {
			// Refused before the stop, its spec changed: validated again,
			// nothing asked of the world yet.
			assert.Equal(t, v1alpha1.PhaseValidating, d.Status.Phase, "refused %s with a new spec", from)
			assert.Equal(t, ActionNone, d.Action.Type, "refused %s with a new spec asked for %+v", from, d.Action)
			return
		}
		assert.Equal(t, from, d.Status.Phase, "terminal %s moved", from)
		if in.Migration.DeletionTimestamp == nil {
			assert.Equal(t, ActionNone, d.Action.Type, "terminal %s asked for %+v", from, d.Action)
			return
		}
		allowed := []ActionType{ActionNone, ActionDeleteStaging, ActionReleaseTarget, ActionRemoveFinalizer}
		if from == v1alpha1.PhaseFailed {
			// The unfinished target VM of a failed migration goes with it,
			// unless it ran: then it is halted and kept.
			allowed = append(allowed, ActionDeleteVM, ActionDeleteChildren, ActionHaltVM)
		}
		assert.Contains(t, allowed, d.Action.Type, "deleting a %s migration asked for %+v", from, d.Action)
	})
}

// (e) An unchanged sync writes no status. From any input, deciding again
// and again on the same observation at the same instant reaches a status
// that the next decision leaves unchanged (no ping-pong); deciding on that
// status later, before the decision's own RequeueAfter, with the same
// observation, still changes nothing. Changes once RequeueAfter passed are
// by design: timers (guest-shutdown and start timeouts, stall timeout,
// re-requested power operations, throttled progress) fire then.
func TestPropertyUnchangedSyncWritesNoStatus(t *testing.T) {
	forEachInput(t, func(t *testing.T, i int, in Input) {
		m := in.Migration
		var d Decision
		for step := 0; ; step++ {
			require.Less(t, step, 100, "no fixpoint after 100 decisions on the same observation; phase %s", d.Status.Phase)
			d = Decide(Input{Migration: m, Observation: in.Observation, Now: in.Now})
			if semanticEqual(d.Status, m.Status) {
				break
			}
			m = after(m, d)
		}
		horizon := d.RequeueAfter
		if horizon == 0 {
			horizon = 24 * time.Hour
		}
		later := metav1.NewTime(in.Now.Add(1 + time.Duration(rand.New(rand.NewSource(int64(i))).Int63n(int64(horizon)-1))))
		d2 := Decide(Input{Migration: m, Observation: in.Observation, Now: later})
		assertSemanticEqual(t, m.Status, d2.Status, "phase %s: deciding %s later (requeueAfter %s) rewrote the status:\nwas %s\nnow %s", m.Status.Phase,
			later.Sub(in.Now.Time), d.RequeueAfter, statusDiff(m.Status, d2.Status), statusDiff(d2.Status, m.Status))
	})
}

// statusDiff names the top-level status fields of a that differ from b.
func statusDiff(a, b v1alpha1.VirtualMachineMigrationStatus) string {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	out := ""
	for i := range va.NumField() {
		if !semanticEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			out += fmt.Sprintf("%s=%+v ", va.Type().Field(i).Name, ptrDeref(va.Field(i)))
		}
	}
	return out
}

func ptrDeref(v reflect.Value) any {
	if v.Kind() == reflect.Pointer && !v.IsNil() {
		return v.Elem().Interface()
	}
	return v.Interface()
}

// world plays vSphere and Kubernetes for a migration driven through
// repeated decisions: each action takes effect at once.
type world struct {
	finalizer     bool
	sourceOn      bool
	claims        bool
	jobs          map[string]bool // created Jobs, by name
	transferFails bool
	corruptTarget bool // the verification reads other bytes than converted
	dvs           bool
	vm            *VMObservation
	deletedStage  bool
	created       []string // transfer Jobs, in creation order
}

func (w *world) observe(m *v1alpha1.VirtualMachineMigration) Observation {
	o := newObs(sourceInventory, slot(true))
	if !w.sourceOn {
		o.Source.PowerState, o.Source.ToolsRunning = PowerStateOff, false
	}
	if w.claims {
		observeClaims(m, &o)
	}
	o.Children.Jobs = refs(KindJob, slices.Sorted(maps.Keys(w.jobs))...)
	if t := m.Status.Transfer; t != nil && w.jobs[t.JobName] {
		o.TransferJob = &JobObservation{Name: t.JobName, Succeeded: !w.transferFails, Failed: w.transferFails, Message: "stream reset", Results: goodResults()}
	}
	if c := m.Status.Conversion; c != nil && w.jobs[c.JobName] {
		o.ConversionJob = &JobObservation{Name: c.JobName, Succeeded: true, OperatingSystem: "rhel 9.4", Checksums: convertedSums()}
	}
	if v := m.Status.Verification; v != nil && w.jobs[v.JobName] {
		o.VerificationJob = &JobObservation{Name: v.JobName, Ref: ref(KindJob, v.JobName), Succeeded: true, Checksums: targetSums(convertedSums())}
		if w.corruptTarget {
			o.VerificationJob.Checksums[0].SHA256 = "corrupted"
		}
	}
	if w.dvs {
		o.DataVolumes = map[string]DataVolumeObservation{}
		for _, n := range dvNames() {
			o.DataVolumes[n] = DataVolumeObservation{Ref: ref(KindDataVolume, n), Phase: DataVolumeSucceeded, Progress: "100.0%", OwnedByVM: w.vm != nil, Claim: adoptedClaim(n)}
		}
	}
	o.VM = w.vm
	if w.vm != nil && w.vm.RunStrategy == RunStrategyAlways {
		o.VMI = &VMIObservation{Phase: VMIRunning}
	}
	readLive(m, &o, o.VMI)
	return o
}

func (w *world) apply(m *v1alpha1.VirtualMachineMigration, a Action) {
	switch a.Type {
	case ActionAddFinalizer:
		m.Finalizers = append(m.Finalizers, v1alpha1.FinalizerName)
	case ActionShutdownGuest, ActionPowerOffSource:
		w.sourceOn = false
	case ActionPowerOnSource:
		w.sourceOn = true
	case ActionCreateStagingClaims:
		w.claims = true
	case ActionCreateTransferJob:
		w.jobs[a.Name] = true
		w.created = append(w.created, a.Name)
	case ActionCreateConversionJob, ActionCreateVerificationJob:
		w.jobs[a.Name] = true
	case ActionDeleteJob:
		delete(w.jobs, a.Name)
	case ActionCreateDataVolumes:
		w.dvs = true
	case ActionCreateVM:
		w.vm = &VMObservation{Ours: true, UID: builders.TargetUID, RunStrategy: RunStrategyHalted}
	case ActionStartVM:
		w.vm.RunStrategy = RunStrategyAlways
	case ActionDeleteStaging:
		w.claims, w.jobs = false, map[string]bool{}
	case ActionNone, ActionAdoptDataVolumes:
	default:
		panic("the world does not play " + string(a.Type))
	}
}

// drive decides, executes and feeds the status back until a terminal phase.
func drive(t *testing.T, m *v1alpha1.VirtualMachineMigration, w *world) *v1alpha1.VirtualMachineMigration {
	t.Helper()
	return driveFrom(t, m, w, 0)
}

// driveFrom is drive with the first decision at now.
func driveFrom(t *testing.T, m *v1alpha1.VirtualMachineMigration, w *world, now time.Duration) *v1alpha1.VirtualMachineMigration {
	t.Helper()
	for step := 0; step < 500; step++ {
		d := decideAt(m, w.observe(m), now)
		m = after(m, d)
		w.apply(m, d.Action)
		if IsTerminal(m.Status.Phase) {
			return m
		}
		now += max(d.RequeueAfter, time.Second)
	}
	require.FailNow(t, "no terminal phase after 500 decisions", "phase %s", m.Status.Phase)
	return nil
}

// (d) A migration whose transfer Job always fails ends Failed, in
// TransferringDisks with TransferFailed, after exactly limit retries, with
// one Job per attempt, and its source powered on again.
func TestPropertyAlwaysFailingTransferFailsAfterTheBudget(t *testing.T) {
	for limit := int32(0); limit <= 5; limit++ {
		t.Run(fmt.Sprintf("limit %d", limit), func(t *testing.T) {
			m := newMigration(builders.WithoutFinalizer, builders.RetryLimit(limit))
			w := &world{sourceOn: true, jobs: map[string]bool{}, transferFails: true}
			m = drive(t, m, w)
			s := m.Status
			require.Equal(t, v1alpha1.PhaseFailed, s.Phase, "want Failed after %d retries (retries %d)", limit, s.Retries)
			require.Equal(t, limit, s.Retries, "want Failed after %d retries", limit)
			wantLastError(t, Decision{Status: s}, v1alpha1.PhaseTransferringDisks, ReasonTransferFailed)
			assert.Len(t, w.created, int(limit)+1, "transfer jobs created, want one per attempt")
			for i, name := range w.created {
				assert.Equal(t, naming.TransferJob(builders.Name, int32(i+1)), name, "job %d, want named after its attempt", i)
			}
			assert.True(t, w.sourceOn, "source not powered on again: %+v", s.SourceControl)
			assert.NotNil(t, s.SourceControl.RestoredAt, "source not recorded restored: on=%v, %+v", w.sourceOn, s.SourceControl)
		})
	}
}

// The happy path, driven the same way, reaches Succeeded through every
// checkpoint with its evidence.
func TestDriveToSuccess(t *testing.T) {
	m := newMigration(builders.WithoutFinalizer, func(m *v1alpha1.VirtualMachineMigration) { m.Spec.Target.PreserveMACAddresses = ptr.To(true) })
	w := &world{sourceOn: true, jobs: map[string]bool{}}
	m = drive(t, m, w)
	require.Equal(t, v1alpha1.PhaseSucceeded, m.Status.Phase, "want Succeeded (lastError %+v)", m.Status.LastError)
	for _, p := range builders.Happy[:len(builders.Happy)-1] {
		assert.NotNil(t, evidenceFor(m.Status, p), "want evidence for %s", p)
	}
	assert.False(t, w.claims, "world after success: staging claims left: %+v", w)
	assert.Empty(t, w.jobs, "world after success: jobs left: %+v", w)
	assert.NotNil(t, w.vm, "world after success: no target VM: %+v", w)
	assert.False(t, w.sourceOn, "world after success: the source is on: %+v", w)
	assert.Zero(t, m.Status.Retries, "status: retries, want none spent")
	assert.Equal(t, "100%", m.Status.Progress, "status: progress")
	require.NotNil(t, m.Status.Target, "status: target, want the VM")
	assert.Equal(t, types.UID(builders.TargetUID), m.Status.Target.UID, "status: target %+v, want the VM's uid", m.Status.Target)
}

// NeedsSource covers what Decide reads: with what it says is not needed
// taken out of the observation, the decision is the same.
func TestPropertyNeedsSourceCoversDecide(t *testing.T) {
	forEachInput(t, func(t *testing.T, i int, in Input) {
		need := NeedsSource(in.Migration)
		stripped := cloneInput(in)
		switch need {
		case SourceNeedInventory:
			return
		case SourceNeedState:
			stripped.Observation.Source.Inventory = nil
			if !WatchesPowerOffTasks(in.Migration) {
				stripped.Observation.Source.PowerOffTasks = nil
			}
		case SourceNeedNothing:
			stripped.Observation.Source = SourceObservation{}
		}
		stripped.Observation.Preflight = nil
		assert.Equal(t, Decide(in), Decide(stripped), "NeedsSource = %d for phase %q, but Decide read more of the source", need, in.Migration.Status.Phase)
	})
}

func TestNeedsSource(t *testing.T) {
	touched := builders.WithSourceControl(func(sc *v1alpha1.SourceControlStatus) { sc.RestoredAt = nil })
	for name, tc := range map[string]struct {
		m    *v1alpha1.VirtualMachineMigration
		want SourceNeed
	}{
		"Pending":                           {newMigration(), SourceNeedNothing},
		"Validating":                        {newMigration(builders.Reached(v1alpha1.PhaseValidating)), SourceNeedInventory},
		"Queued":                            {newMigration(builders.Reached(v1alpha1.PhaseQueued)), SourceNeedState},
		"StoppingSource":                    {newMigration(builders.Reached(v1alpha1.PhaseStoppingSource)), SourceNeedState},
		"TransferringDisks":                 {newMigration(builders.Reached(v1alpha1.PhaseTransferringDisks)), SourceNeedNothing},
		"RollingBack, source to restore":    {newMigration(builders.Reached(v1alpha1.PhaseRollingBack)), SourceNeedState},
		"RollingBack, source was off":       {newMigration(builders.Reached(v1alpha1.PhaseRollingBack), builders.WithSourceControl(func(sc *v1alpha1.SourceControlStatus) { sc.OriginalPowerState = PowerStateOff })), SourceNeedNothing},
		"CleaningUp with a snapshot":        {newMigration(builders.Reached(v1alpha1.PhaseCleaningUp), withSnapshot), SourceNeedState},
		"CleaningUp, source was off":        {newMigration(builders.Reached(v1alpha1.PhaseCleaningUp), builders.WithSourceControl(func(sc *v1alpha1.SourceControlStatus) { sc.OriginalPowerState = PowerStateOff })), SourceNeedNothing},
		"paused":                            {newMigration(builders.Reached(v1alpha1.PhaseValidating), builders.Paused), SourceNeedNothing},
		"Failed":                            {newMigration(builders.Reached(v1alpha1.PhaseFailed)), SourceNeedNothing},
		"deleted, source to restore":        {newMigration(builders.Reached(v1alpha1.PhaseCancelling), builders.Deleted, touched), SourceNeedState},
		"deleted, nothing touched":          {newMigration(builders.Reached(v1alpha1.PhaseValidating), builders.Deleted), SourceNeedNothing},
		"deleted after success, a snapshot": {newMigration(builders.Reached(v1alpha1.PhaseSucceeded), builders.Deleted, withSnapshot), SourceNeedNothing},
	} {
		assert.Equal(t, tc.want, NeedsSource(tc.m), "%s: NeedsSource", name)
	}
}
