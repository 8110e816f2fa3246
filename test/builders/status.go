package builders

import (
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
)

// Happy is the happy path's phases, in order.
var Happy = []v1alpha1.Phase{
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

// SHA is the fixture checksum of a disk.
func SHA(key int32) string { return "sha256-of-disk-" + string(rune('0'+key%10)) }

// Disks is status.disks as TransferringDisks first fills it from inv, for
// the migration named migration.
func Disks(migration string, inv *v1alpha1.SourceInventory) []v1alpha1.DiskStatus {
	var out []v1alpha1.DiskStatus
	for i, d := range inv.Disks {
		out = append(out, v1alpha1.DiskStatus{
			Key: d.Key, Name: naming.DiskName(i), StagingClaim: naming.StagingClaim(migration, d.Key), CapacityBytes: d.CapacityBytes,
		})
	}
	return out
}

// DisksInPlace is status.disks as TransferringDisks first fills it from
// inv for the target VM named target: each disk written in place, into
// the claim named as its DataVolume.
func DisksInPlace(target string, inv *v1alpha1.SourceInventory) []v1alpha1.DiskStatus {
	var out []v1alpha1.DiskStatus
	for i, d := range inv.Disks {
		dv := naming.DataVolume(target, i)
		out = append(out, v1alpha1.DiskStatus{
			Key: d.Key, Name: naming.DiskName(i), StagingClaim: dv, DataVolume: dv, CapacityBytes: d.CapacityBytes,
		})
	}
	return out
}

// InPlace gives a migration that reached TransferringDisks or later the
// disks of the one-pass path (DisksInPlace) instead of the clone path's
// staging claims, keeping what the disks recorded.
func InPlace(m *v1alpha1.VirtualMachineMigration) {
	target := DefaultTarget
	if m.Status.Target != nil {
		target = m.Status.Target.Name
	}
	for i := range m.Status.Disks {
		d := &m.Status.Disks[i]
		d.DataVolume = naming.DataVolume(target, i)
		d.StagingClaim = d.DataVolume
		d.TargetClaimUID = types.UID("uid-" + d.StagingClaim)
	}
}

// Reached gives the migration the status it has when it legitimately
// entered phase p one minute before T0 on the happy path, with inv (nil:
// Inventory()) as its source: a source that was powered on and shut down
// by its guest, every checkpoint before p with its evidence. RollingBack,
// Failed and Cancelling get the status of a migration that failed (or was
// deleted) while transferring disks. Use it before modifiers that change
// the status further.
func Reached(p v1alpha1.Phase, inv ...*v1alpha1.SourceInventory) MigrationMod {
	return func(m *v1alpha1.VirtualMachineMigration) {
		source := Inventory()
		if len(inv) > 0 {
			source = inv[0].DeepCopy()
		}
		s := &m.Status
		s.Phase = p
		s.ObservedGeneration = m.Generation
		s.StartTime = TP(-time.Hour)
		s.PhaseStartTime = TP(-time.Minute)
		s.LastProgressTime = TP(-time.Minute)
		upTo := reachedIndex(p)
		for _, q := range Happy[:upTo] {
			s.Evidence = append(s.Evidence, v1alpha1.CheckpointEvidence{Phase: q, ReachedAt: At(-time.Hour), Observed: "fixture"})
		}
		for _, step := range reachedSteps {
			if slices.Index(Happy, step.after) < upTo {
				step.apply(m, source)
			}
		}
		failed(m, p)
	}
}

// reachedIndex is how many happy-path checkpoints p comes after.
func reachedIndex(p v1alpha1.Phase) int {
	switch i := slices.Index(Happy, p); {
	case p == v1alpha1.PhaseAwaitingApproval:
		return slices.Index(Happy, v1alpha1.PhaseQueued)
	case i < 0: // failure or cancellation while transferring
		return slices.Index(Happy, v1alpha1.PhaseTransferringDisks)
	default:
		return i
	}
}

// reachedSteps is what each checkpoint of the happy path leaves in status
// (status.progress as the controller writes it: statemachine.Progress).
var reachedSteps = []struct {
	after v1alpha1.Phase
	apply func(m *v1alpha1.VirtualMachineMigration, inv *v1alpha1.SourceInventory)
}{
	{v1alpha1.PhaseValidating, func(m *v1alpha1.VirtualMachineMigration, inv *v1alpha1.SourceInventory) {
		m.Status.Source = inv
		m.Status.SourceName = naming.Shorten(inv.Name, naming.MaxDisplayName)
		target := m.Spec.Target.Name
		if target == "" {
			target = naming.TargetName(inv.Name)
		}
		m.Status.Target = &v1alpha1.TargetStatus{Name: target}
	}},
	{v1alpha1.PhaseQueued, func(m *v1alpha1.VirtualMachineMigration, _ *v1alpha1.SourceInventory) {
		m.Status.AppliedSpec = m.Spec.DeepCopy()
		m.Status.SourceControl = &v1alpha1.SourceControlStatus{OriginalPowerState: "poweredOn"}
	}},
	{v1alpha1.PhaseStoppingSource, func(m *v1alpha1.VirtualMachineMigration, inv *v1alpha1.SourceInventory) {
		m.Status.SourceControl.ShutdownRequestedAt = TP(-50 * time.Minute)
		m.Status.SourceControl.PoweredOffAt = TP(-49 * time.Minute)
		m.Status.Disks = Disks(m.Name, inv)
	}},
	{v1alpha1.PhaseTransferringDisks, func(m *v1alpha1.VirtualMachineMigration, _ *v1alpha1.SourceInventory) {
		s := &m.Status
		s.Transfer = &v1alpha1.JobStatus{JobName: naming.TransferJob(m.Name, 1), Attempt: 1, CompletedAt: TP(-30 * time.Minute)}
		for i := range s.Disks {
			s.Disks[i].BytesTransferred = s.Disks[i].CapacityBytes
			s.Disks[i].SHA256 = SHA(s.Disks[i].Key)
			s.Disks[i].TransferredAt = TP(-30 * time.Minute)
		}
		s.Progress = "70%" // statemachine.ProgressTransferred
	}},
	{v1alpha1.PhaseConverting, func(m *v1alpha1.VirtualMachineMigration, _ *v1alpha1.SourceInventory) {
		m.Status.Conversion = &v1alpha1.ConversionStatus{
			JobStatus:       v1alpha1.JobStatus{JobName: naming.ConversionJob(m.Name, 1), Attempt: 1, CompletedAt: TP(-20 * time.Minute)},
			ConfigMapName:   naming.ConversionConfigMap(m.Name, 1),
			OperatingSystem: "rhel 9.4",
		}
		m.Status.Progress = "80%" // statemachine.ProgressConverted
	}},
	{v1alpha1.PhaseImporting, func(m *v1alpha1.VirtualMachineMigration, _ *v1alpha1.SourceInventory) {
		for i := range m.Status.Disks {
			d := &m.Status.Disks[i]
			d.DataVolume = naming.DataVolume(m.Status.Target.Name, i)
			d.ImportPhase, d.ImportProgress = "Succeeded", "100.0%"
		}
		m.Status.Progress = "95%" // statemachine.ProgressImported
	}},
	{v1alpha1.PhaseCreatingVM, func(m *v1alpha1.VirtualMachineMigration, _ *v1alpha1.SourceInventory) {
		m.Status.Target.UID = TargetUID
	}},
	{v1alpha1.PhaseStarting, func(m *v1alpha1.VirtualMachineMigration, _ *v1alpha1.SourceInventory) {
		m.Status.Target.VMIPhase = "Running"
		m.Status.Progress = "100%"
	}},
}

// TargetUID is the fixture target VM's UID.
const TargetUID = "0b7e7f14-5d56-4a43-9a4b-3d1f63f1c0de"

// failed adds what a failure while transferring leaves in status.
func failed(m *v1alpha1.VirtualMachineMigration, p v1alpha1.Phase) {
	s := &m.Status
	switch p {
	case v1alpha1.PhaseRollingBack, v1alpha1.PhaseFailed:
		s.LastError = &v1alpha1.MigrationError{Phase: v1alpha1.PhaseTransferringDisks, Reason: "TransferFailed",
			Message: "transfer job failed", Time: At(-time.Minute)}
		s.Transfer = &v1alpha1.JobStatus{JobName: naming.TransferJob(m.Name, 1), Attempt: 1}
	}
	if p == v1alpha1.PhaseFailed {
		s.SourceControl.RestoreRequestedAt = TP(-3 * time.Minute)
		s.SourceControl.RestoredAt = TP(-2 * time.Minute)
	}
	if p == v1alpha1.PhaseSucceeded || p == v1alpha1.PhaseFailed {
		s.CompletionTime = TP(-time.Minute)
	}
}
