package statemachine

import (
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/test/builders"
)

// Fixtures: the migrations, inventories and statuses come from the shared
// builders (test/builders); this file adds the observations, which only
// this package's tests build.

// newMigration is a migration as the API server returns it once the
// finalizer is set, changed by opts in order.
func newMigration(opts ...builders.MigrationMod) *v1alpha1.VirtualMachineMigration {
	return builders.Migration(append([]builders.MigrationMod{builders.WithFinalizer}, opts...)...)
}

// phaseIndex is p's position on the happy path, -1 off it.
func phaseIndex(p v1alpha1.Phase) int { return slices.Index(builders.Happy, p) }

// initialDisks is status.disks as TransferringDisks first fills it.
func initialDisks() []v1alpha1.DiskStatus {
	return builders.DisksInPlace(builders.DefaultTarget, builders.Inventory())
}

func stagingClaims() []string {
	return []string{naming.StagingClaim(builders.Name, builders.DiskKey0), naming.StagingClaim(builders.Name, builders.DiskKey1)}
}

// observeClaims lists the claims the transfer writes into, as the
// observer does: the target claims of disks written in place, the
// staging claims of the others (a status of the clone path).
func observeClaims(m *v1alpha1.VirtualMachineMigration, o *Observation) {
	for _, d := range m.Status.Disks {
		if d.WrittenInPlace() {
			o.Children.TargetClaims = append(o.Children.TargetClaims, ref(KindPersistentVolumeClaim, d.StagingClaim))
		} else if d.StagingClaim != "" {
			o.Children.StagingClaims = append(o.Children.StagingClaims, ref(KindPersistentVolumeClaim, d.StagingClaim))
		}
	}
}

func dvNames() []string {
	return []string{naming.DataVolume(builders.DefaultTarget, 0), naming.DataVolume(builders.DefaultTarget, 1)}
}

type obsOpt = func(*Observation)

// newObs is an observation of nothing, changed by opts.
func newObs(opts ...obsOpt) Observation {
	var o Observation
	for _, f := range opts {
		f(&o)
	}
	return o
}

func sourceOn(tools bool) obsOpt {
	return func(o *Observation) {
		o.Source.Observed, o.Source.PowerState, o.Source.ToolsRunning = true, PowerStateOn, tools
	}
}

func sourceOff(o *Observation) {
	o.Source.Observed, o.Source.PowerState, o.Source.ToolsRunning = true, PowerStateOff, false
}

func sourceSnapshots(names ...string) obsOpt {
	return func(o *Observation) { o.Source.Snapshots = names }
}

func sourceError(class ErrorClass, reason string) obsOpt {
	return func(o *Observation) {
		o.Source = SourceObservation{Error: &ObservedError{Class: class, Reason: reason, Message: reason + " happened"}}
	}
}

func sourceInventory(o *Observation) {
	o.Source.Observed, o.Source.PowerState, o.Source.ToolsRunning = true, PowerStateOn, true
	o.Source.Inventory = builders.Inventory()
}

func preflight(sev v1alpha1.Severity, reason string) obsOpt {
	return func(o *Observation) {
		o.Preflight = append(o.Preflight, v1alpha1.PreflightFinding{Reason: reason, Severity: sev, Message: reason + " found"})
	}
}

func slot(available bool) obsOpt {
	return func(o *Observation) {
		o.TransferSlot = SlotObservation{Available: available}
		if !available {
			o.TransferSlot.Message = "host esxi-01.example.com runs 2 of 2 transfers"
		}
	}
}

// ref is an observed object of this migration.
func ref(kind, name string) ObjectRef {
	return ObjectRef{Kind: kind, Name: name, UID: types.UID("uid-" + name), MigrationUID: builders.UID}
}

// refs are observed objects of one kind of this migration.
func refs(kind string, names ...string) []ObjectRef {
	var out []ObjectRef
	for _, n := range names {
		out = append(out, ref(kind, n))
	}
	return out
}

func claims(names ...string) obsOpt {
	return func(o *Observation) { o.Children.StagingClaims = refs(KindPersistentVolumeClaim, names...) }
}

func jobs(names ...string) obsOpt {
	return func(o *Observation) { o.Children.Jobs = refs(KindJob, names...) }
}

func configMaps(names ...string) obsOpt {
	return func(o *Observation) { o.Children.ConfigMaps = refs(KindConfigMap, names...) }
}

func childDVs(names ...string) obsOpt {
	return func(o *Observation) { o.Children.DataVolumes = refs(KindDataVolume, names...) }
}

func transferJob(j JobObservation) obsOpt {
	j.Ref = ref(KindJob, j.Name)
	return func(o *Observation) { o.TransferJob = &j }
}

func conversionJob(j JobObservation) obsOpt {
	j.Ref = ref(KindJob, j.Name)
	return func(o *Observation) { o.ConversionJob = &j }
}

// goodResults are the results of a transfer that wrote every disk whole.
// convertedSums are what the conversion reports of the fixture's disks.
func convertedSums() []ImageChecksum {
	return []ImageChecksum{
		{Disk: "disk-0", Bytes: builders.DiskCap0, Size: builders.DiskCap0, SHA256: "converted-" + builders.SHA(builders.DiskKey0)},
		{Disk: "disk-1", Bytes: builders.DiskCap1, Size: builders.DiskCap1, SHA256: "converted-" + builders.SHA(builders.DiskKey1)},
	}
}

// targetSums are what a verification reads of targets holding sums.
func targetSums(sums []ImageChecksum) []ImageChecksum {
	out := slices.Clone(sums)
	for i := range out {
		out[i].Staged, out[i].Size = false, out[i].Bytes+(1<<20)
	}
	return out
}

func goodResults() []DiskResult {
	return []DiskResult{{Key: builders.DiskKey0, Bytes: builders.DiskCap0, SHA256: builders.SHA(builders.DiskKey0)}, {Key: builders.DiskKey1, Bytes: builders.DiskCap1, SHA256: builders.SHA(builders.DiskKey1)}}
}

func dataVolumes(phase, progress string, ownedByVM bool) obsOpt {
	return func(o *Observation) {
		o.DataVolumes = map[string]DataVolumeObservation{}
		for _, n := range dvNames() {
			o.DataVolumes[n] = DataVolumeObservation{Ref: ref(KindDataVolume, n), Phase: phase, Progress: progress, OwnedByVM: ownedByVM, Claim: adoptedClaim(n)}
		}
	}
}

// adoptedClaim is the claim of the target DataVolume name: the one the
// transfer wrote (builders.InPlace records its UID), bound under the
// DataVolume.
func adoptedClaim(name string) *ClaimState {
	return &ClaimState{UID: types.UID("uid-" + name), Bound: true, ControllerUID: ref(KindDataVolume, name).UID}
}

func dataVolume(name, phase, progress string) obsOpt {
	return func(o *Observation) {
		if o.DataVolumes == nil {
			o.DataVolumes = map[string]DataVolumeObservation{}
		}
		o.DataVolumes[name] = DataVolumeObservation{Ref: ref(KindDataVolume, name), Phase: phase, Progress: progress, Claim: adoptedClaim(name)}
	}
}

func targetVM(ours bool, runStrategy string) obsOpt {
	vm := VMObservation{Ours: ours, UID: builders.TargetUID, RunStrategy: runStrategy,
		Ref: ObjectRef{Kind: KindVirtualMachine, Name: builders.DefaultTarget, UID: builders.TargetUID}}
	if ours {
		vm.Ref.MigrationUID = builders.UID
	}
	return func(o *Observation) { o.VM = &vm }
}

func targetVMI(phase string, agent bool) obsOpt {
	return func(o *Observation) { o.VMI = &VMIObservation{Phase: phase, AgentConnected: agent} }
}

// decideAt decides for m and o at t0+d with the default configuration.
func decideAt(m *v1alpha1.VirtualMachineMigration, o Observation, d time.Duration) Decision {
	return Decide(Input{Migration: m, Observation: o, Now: builders.At(d)})
}

func decide(m *v1alpha1.VirtualMachineMigration, o Observation) Decision {
	return decideAt(m, o, 0)
}

// evidenceFor returns the evidence recorded for a phase, or nil.
func evidenceFor(s v1alpha1.VirtualMachineMigrationStatus, p v1alpha1.Phase) *v1alpha1.CheckpointEvidence {
	for i := range s.Evidence {
		if s.Evidence[i].Phase == p {
			return &s.Evidence[i]
		}
	}
	return nil
}

// eventReasons are the reasons of the decision's events, in order.
func eventReasons(d Decision) []string {
	var out []string
	for _, e := range d.Events {
		out = append(out, e.Reason)
	}
	return out
}

// after returns m with the decision's status, as the controller writes it.
func after(m *v1alpha1.VirtualMachineMigration, d Decision) *v1alpha1.VirtualMachineMigration {
	n := m.DeepCopy()
	n.Status = *d.Status.DeepCopy()
	return n
}
