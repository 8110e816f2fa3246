package statemachine

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
)

// Fixtures: builders with modifier functions. Every fixture starts from a
// realistic object and each modifier changes one thing, so that a table
// row reads as the difference it tests.

const (
	testName      = "web01-mig"
	testNamespace = "apps"
	testUID       = types.UID("7c0a4a52-0d6e-4bb4-9d0c-6f5a3b1e2a10")
	sourceVMName  = "Web_01 (prod)"
	// defaultTarget is the DNS-1123 form of sourceVMName.
	defaultTarget = "web-01-prod"
	targetUID     = "0b7e7f14-5d56-4a43-9a4b-3d1f63f1c0de"

	diskKey0 = int32(2000)
	diskKey1 = int32(2001)
	diskCap0 = int64(10 << 30)
	diskCap1 = int64(20 << 30)
)

// t0 is "now" in every table; times in fixtures are relative to it.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// at is t0 shifted by d, as a metav1.Time.
func at(d time.Duration) metav1.Time { return metav1.NewTime(t0.Add(d)) }

// tp is a pointer to at(d).
func tp(d time.Duration) *metav1.Time { t := at(d); return &t }

type migrationOpt = func(*v1alpha1.VirtualMachineMigration)

// newMigration is a migration as the API server returns it right after
// creation (generation 1, the finalizer already set, empty status), changed
// by opts in order.
func newMigration(opts ...migrationOpt) *v1alpha1.VirtualMachineMigration {
	m := &v1alpha1.VirtualMachineMigration{
		ObjectMeta: metav1.ObjectMeta{
			Name:       testName,
			Namespace:  testNamespace,
			UID:        testUID,
			Generation: 1,
			Finalizers: []string{v1alpha1.FinalizerName},
		},
		Spec: v1alpha1.VirtualMachineMigrationSpec{
			Source: v1alpha1.SourceSpec{
				URL:                  "https://vcenter.example.com/sdk",
				CredentialsSecretRef: v1alpha1.SecretReference{Name: "vcenter-creds"},
				VM:                   v1alpha1.VMSelector{Name: sourceVMName},
			},
		},
	}
	for _, o := range opts {
		o(m)
	}
	return m
}

func withoutFinalizer(m *v1alpha1.VirtualMachineMigration) { m.Finalizers = nil }

func deleted(m *v1alpha1.VirtualMachineMigration) { m.DeletionTimestamp = tp(-time.Second) }

func paused(m *v1alpha1.VirtualMachineMigration) { m.Spec.Policy.Paused = true }

func requireApproval(m *v1alpha1.VirtualMachineMigration) { m.Spec.Policy.RequireApproval = true }

func approved(m *v1alpha1.VirtualMachineMigration) { m.Spec.Policy.Approved = true }

func insecure(m *v1alpha1.VirtualMachineMigration) { m.Spec.Source.InsecureSkipVerify = true }

func skipConversion(m *v1alpha1.VirtualMachineMigration) { m.Spec.Conversion.Skip = true }

func retain(m *v1alpha1.VirtualMachineMigration) {
	m.Spec.Policy.Cleanup = v1alpha1.CleanupPolicyRetain
}

func noStart(m *v1alpha1.VirtualMachineMigration) { m.Spec.Target.Start = ptr.To(false) }

func waitForAgent(m *v1alpha1.VirtualMachineMigration) { m.Spec.Target.WaitForGuestAgent = true }

func powerOffMode(m *v1alpha1.VirtualMachineMigration) {
	m.Spec.Policy.Shutdown.Mode = v1alpha1.ShutdownModePowerOff
}

func withGeneration(g int64) migrationOpt {
	return func(m *v1alpha1.VirtualMachineMigration) { m.Generation = g }
}

func withTargetName(name string) migrationOpt {
	return func(m *v1alpha1.VirtualMachineMigration) { m.Spec.Target.Name = name }
}

func withRetryLimit(n int32) migrationOpt {
	return func(m *v1alpha1.VirtualMachineMigration) { m.Spec.Policy.Retry.Limit = ptr.To(n) }
}

func withRetryDeadline(d time.Duration) migrationOpt {
	return func(m *v1alpha1.VirtualMachineMigration) {
		m.Spec.Policy.Retry.Deadline = &metav1.Duration{Duration: d}
	}
}

// withStatus changes the status directly.
func withStatus(f func(*v1alpha1.VirtualMachineMigrationStatus)) migrationOpt {
	return func(m *v1alpha1.VirtualMachineMigration) { f(&m.Status) }
}

// withSpec changes the spec after the other fixtures ran (after reached(),
// so that it differs from status.appliedSpec).
func withSpec(f func(*v1alpha1.VirtualMachineMigrationSpec)) migrationOpt {
	return func(m *v1alpha1.VirtualMachineMigration) { f(&m.Spec) }
}

func withRetries(n int32) migrationOpt {
	return withStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) { s.Retries = n })
}

func withSourceControl(f func(*v1alpha1.SourceControlStatus)) migrationOpt {
	return withStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
		if s.SourceControl == nil {
			s.SourceControl = &v1alpha1.SourceControlStatus{}
		}
		f(s.SourceControl)
	})
}

// phaseOrder is the happy path, in order.
var phaseOrder = []v1alpha1.Phase{
	v1alpha1.PhasePending,
	v1alpha1.PhaseValidating,
	v1alpha1.PhaseQueued,
	v1alpha1.PhaseStoppingSource,
	v1alpha1.PhaseTransferringDisks,
	v1alpha1.PhaseConverting,
	v1alpha1.PhaseImporting,
	v1alpha1.PhaseCreatingVM,
	v1alpha1.PhaseStarting,
	v1alpha1.PhaseCleaningUp,
	v1alpha1.PhaseSucceeded,
}

func phaseIndex(p v1alpha1.Phase) int {
	for i, q := range phaseOrder {
		if q == p {
			return i
		}
	}
	return -1
}

// reached gives the migration the status it has when it legitimately
// entered phase p one minute before t0 on the happy path (a source that
// was powered on, shut down by its guest; every checkpoint before p with
// its evidence). RollingBack, Failed and Cancelling get the status of a
// migration that failed (or was deleted) while transferring disks.
func reached(p v1alpha1.Phase) migrationOpt {
	return func(m *v1alpha1.VirtualMachineMigration) {
		s := &m.Status
		s.Phase = p
		s.ObservedGeneration = m.Generation
		s.StartTime = tp(-time.Hour)
		s.PhaseStartTime = tp(-time.Minute)
		s.LastProgressTime = tp(-time.Minute)
		upTo := phaseIndex(p)
		switch {
		case p == v1alpha1.PhaseAwaitingApproval:
			upTo = phaseIndex(v1alpha1.PhaseQueued)
		case upTo < 0: // failure or cancellation while transferring
			upTo = phaseIndex(v1alpha1.PhaseTransferringDisks)
		}
		reachedAt := func(q v1alpha1.Phase) bool { return phaseIndex(q) < upTo }
		for _, q := range phaseOrder[:upTo] {
			s.Evidence = append(s.Evidence, v1alpha1.CheckpointEvidence{Phase: q, ReachedAt: at(-time.Hour), Observed: "fixture"})
		}
		if reachedAt(v1alpha1.PhaseValidating) {
			s.Source = inventory()
			s.Target = &v1alpha1.TargetStatus{Name: defaultTarget}
		}
		if reachedAt(v1alpha1.PhaseQueued) {
			s.AppliedSpec = m.Spec.DeepCopy()
			s.SourceControl = &v1alpha1.SourceControlStatus{OriginalPowerState: PowerStateOn}
		}
		if reachedAt(v1alpha1.PhaseStoppingSource) {
			s.SourceControl.ShutdownRequestedAt = tp(-50 * time.Minute)
			s.SourceControl.PoweredOffAt = tp(-49 * time.Minute)
			s.Disks = initialDisks()
		}
		if reachedAt(v1alpha1.PhaseTransferringDisks) {
			s.Transfer = &v1alpha1.JobStatus{JobName: naming.TransferJob(testName, 1), Attempt: 1, CompletedAt: tp(-30 * time.Minute)}
			for i := range s.Disks {
				s.Disks[i].BytesTransferred = s.Disks[i].CapacityBytes
				s.Disks[i].SHA256 = sha(s.Disks[i].Key)
				s.Disks[i].TransferredAt = tp(-30 * time.Minute)
			}
			s.Progress = "100%"
		}
		if reachedAt(v1alpha1.PhaseConverting) {
			c := conversionAttempt(testName, 1)
			c.CompletedAt = tp(-20 * time.Minute)
			c.OperatingSystem = "rhel 9.4"
			s.Conversion = c
		}
		if reachedAt(v1alpha1.PhaseImporting) {
			for i := range s.Disks {
				s.Disks[i].DataVolume = naming.DataVolume(defaultTarget, i)
				s.Disks[i].ImportPhase = DataVolumeSucceeded
				s.Disks[i].ImportProgress = "100.0%"
			}
		}
		if reachedAt(v1alpha1.PhaseCreatingVM) {
			s.Target.UID = targetUID
		}
		if reachedAt(v1alpha1.PhaseStarting) {
			s.Target.VMIPhase = VMIRunning
		}
		switch p {
		case v1alpha1.PhaseRollingBack, v1alpha1.PhaseFailed:
			s.LastError = &v1alpha1.MigrationError{Phase: v1alpha1.PhaseTransferringDisks, Reason: ReasonTransferFailed,
				Message: "transfer job failed", Time: at(-time.Minute)}
			s.Transfer = &v1alpha1.JobStatus{JobName: naming.TransferJob(testName, 1), Attempt: 1}
		}
		if p == v1alpha1.PhaseFailed {
			s.SourceControl.RestoreRequestedAt = tp(-3 * time.Minute)
			s.SourceControl.RestoredAt = tp(-2 * time.Minute)
		}
		if IsTerminal(p) {
			s.CompletionTime = tp(-time.Minute)
		}
	}
}

func sha(key int32) string {
	return "sha256-of-disk-" + string(rune('0'+key%10))
}

// inventory is the source VM: EFI, 2 disks on two datastores, 2 NICs.
func inventory() *v1alpha1.SourceInventory {
	return &v1alpha1.SourceInventory{
		Name:               sourceVMName,
		MoRef:              "vm-42",
		InventoryPath:      "/dc1/vm/prod/" + sourceVMName,
		BIOSUUID:           "4210a6c2-7f0e-4b1a-9b55-0a1b2c3d4e5f",
		Datacenter:         "dc1",
		Host:               "esxi-01.example.com",
		HostMoRef:          "host-7",
		CPU:                v1alpha1.CPUTopology{Sockets: 2, CoresPerSocket: 2},
		MemoryMiB:          8192,
		Firmware:           v1alpha1.FirmwareEFI,
		GuestID:            "rhel9_64Guest",
		ToolsRunningStatus: "guestToolsRunning",
		PowerState:         PowerStateOn,
		Disks: []v1alpha1.SourceDisk{
			{Key: diskKey0, Label: "Hard disk 1", CapacityBytes: diskCap0, FileName: "[ds1] web01/web01.vmdk", Datastore: "ds1", ControllerType: "scsi", ControllerModel: "pvscsi"},
			{Key: diskKey1, Label: "Hard disk 2", CapacityBytes: diskCap1, FileName: "[ds2] web01/web01_1.vmdk", Datastore: "ds2", ControllerType: "scsi", ControllerModel: "pvscsi", UnitNumber: 1},
		},
		NICs: []v1alpha1.SourceNIC{
			{Key: 4000, Label: "Network adapter 1", MAC: "00:50:56:aa:bb:01", Network: "VM Network", AdapterType: "vmxnet3"},
			{Key: 4001, Label: "Network adapter 2", MAC: "00:50:56:aa:bb:02", Network: "backup", AdapterType: "e1000e"},
		},
		InventoriedAt: tp(-time.Hour),
	}
}

// initialDisks is status.disks as TransferringDisks first fills it.
func initialDisks() []v1alpha1.DiskStatus {
	return []v1alpha1.DiskStatus{
		{Key: diskKey0, Name: "disk-0", StagingClaim: naming.StagingClaim(testName, diskKey0), CapacityBytes: diskCap0},
		{Key: diskKey1, Name: "disk-1", StagingClaim: naming.StagingClaim(testName, diskKey1), CapacityBytes: diskCap1},
	}
}

func stagingClaims() []string {
	return []string{naming.StagingClaim(testName, diskKey0), naming.StagingClaim(testName, diskKey1)}
}

func dvNames() []string {
	return []string{naming.DataVolume(defaultTarget, 0), naming.DataVolume(defaultTarget, 1)}
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
	o.Source.Inventory = inventory()
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

func claims(names ...string) obsOpt {
	return func(o *Observation) { o.Children.StagingClaims = names }
}

func jobs(names ...string) obsOpt {
	return func(o *Observation) { o.Children.Jobs = names }
}

func configMaps(names ...string) obsOpt {
	return func(o *Observation) { o.Children.ConfigMaps = names }
}

func childDVs(names ...string) obsOpt {
	return func(o *Observation) { o.Children.DataVolumes = names }
}

func transferJob(j JobObservation) obsOpt {
	return func(o *Observation) { o.TransferJob = &j }
}

func conversionJob(j JobObservation) obsOpt {
	return func(o *Observation) { o.ConversionJob = &j }
}

// goodResults are the results of a transfer that wrote every disk whole.
func goodResults() []DiskResult {
	return []DiskResult{{Key: diskKey0, Bytes: diskCap0, SHA256: sha(diskKey0)}, {Key: diskKey1, Bytes: diskCap1, SHA256: sha(diskKey1)}}
}

func dataVolumes(phase, progress string, ownedByVM bool) obsOpt {
	return func(o *Observation) {
		o.DataVolumes = map[string]DataVolumeObservation{}
		for _, n := range dvNames() {
			o.DataVolumes[n] = DataVolumeObservation{Phase: phase, Progress: progress, OwnedByVM: ownedByVM}
		}
	}
}

func dataVolume(name, phase, progress string) obsOpt {
	return func(o *Observation) {
		if o.DataVolumes == nil {
			o.DataVolumes = map[string]DataVolumeObservation{}
		}
		o.DataVolumes[name] = DataVolumeObservation{Phase: phase, Progress: progress}
	}
}

func targetVM(ours bool, runStrategy string) obsOpt {
	return func(o *Observation) { o.VM = &VMObservation{Ours: ours, UID: targetUID, RunStrategy: runStrategy} }
}

func targetVMI(phase string, agent bool) obsOpt {
	return func(o *Observation) { o.VMI = &VMIObservation{Phase: phase, AgentConnected: agent} }
}

// decideAt decides for m and o at t0+d with the default configuration.
func decideAt(m *v1alpha1.VirtualMachineMigration, o Observation, d time.Duration) Decision {
	return Decide(Input{Migration: m, Observation: o, Now: at(d)})
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

// hasEvent reports whether an event with that reason was recorded.
func hasEvent(d Decision, reason string) bool {
	for _, e := range d.Events {
		if e.Reason == reason {
			return true
		}
	}
	return false
}

// after returns m with the decision's status, as the controller writes it.
func after(m *v1alpha1.VirtualMachineMigration, d Decision) *v1alpha1.VirtualMachineMigration {
	n := m.DeepCopy()
	n.Status = *d.Status.DeepCopy()
	return n
}
