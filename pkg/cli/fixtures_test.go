package cli

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/pkg/preflight"
	"platform.example/vm-migration/pkg/statemachine"
)

const mib = int64(1) << 20

// t0 is when the fixtures' migrations were created; testNow is when the
// commands look at them.
var (
	t0      = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	testNow = t0.Add(42 * time.Minute)
)

// at is t0 plus an offset, as an API time.
func at(offset time.Duration) metav1.Time { return metav1.NewTime(t0.Add(offset)) }

func atp(offset time.Duration) *metav1.Time { t := at(offset); return &t }

// inventory is the source VM of the fixtures: EFI, two disks, two NICs.
func inventory() *v1alpha1.SourceInventory {
	return &v1alpha1.SourceInventory{
		Name: "web-01", MoRef: "vm-42", InventoryPath: "/DC0/vm/web-01", Host: "esxi-01.example.com",
		CPU: v1alpha1.CPUTopology{Sockets: 2, CoresPerSocket: 2}, MemoryMiB: 2048,
		Firmware: v1alpha1.FirmwareEFI, SecureBoot: true, PowerState: statemachine.PowerStateOn,
		Disks: []v1alpha1.SourceDisk{
			{Key: 2000, Label: "Hard disk 1", CapacityBytes: 8192 * mib, FileName: "[datastore1] web-01/web-01.vmdk", Datastore: "datastore1"},
			{Key: 2001, Label: "Hard disk 2", CapacityBytes: 2048 * mib, FileName: "[datastore1] web-01/web-01_1.vmdk", Datastore: "datastore1"},
		},
		NICs:          []v1alpha1.SourceNIC{{Key: 4000, MAC: "00:50:56:aa:bb:01", Network: "VM Network"}},
		InventoriedAt: atp(5 * time.Second),
	}
}

// newMigration is a migration as created by a user, before the controller
// looked at it, shaped by modifiers.
func newMigration(name string, mods ...func(*v1alpha1.VirtualMachineMigration)) *v1alpha1.VirtualMachineMigration {
	m := &v1alpha1.VirtualMachineMigration{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "apps", UID: types.UID("uid-" + name), Generation: 1, CreationTimestamp: at(0),
		},
		Spec: v1alpha1.VirtualMachineMigrationSpec{
			Source: v1alpha1.SourceSpec{
				URL: "https://vcenter.example.com/sdk", CredentialsSecretRef: v1alpha1.SecretReference{Name: "vcenter"},
				VM: v1alpha1.VMSelector{Name: "web-01"},
			},
			Target: v1alpha1.TargetSpec{Networks: []v1alpha1.NetworkMapping{{Source: "VM Network", Type: v1alpha1.NetworkTypePod}}},
		},
	}
	for _, mod := range mods {
		mod(m)
	}
	return m
}

// checkpoints are the evidence of the happy path, with when each was reached.
var checkpoints = []struct {
	phase    v1alpha1.Phase
	offset   time.Duration
	observed string
}{
	{v1alpha1.PhasePending, 1 * time.Second, "finalizer set and status initialised"},
	{v1alpha1.PhaseValidating, 6 * time.Second, "found web-01 (vm-42): 4 vCPU, 2048 MiB, EFI, 2 disks, 1 NICs, poweredOn; 0 preflight warnings"},
	{v1alpha1.PhaseQueued, 7 * time.Second, "transfer slot available; source poweredOn"},
	{v1alpha1.PhaseStoppingSource, 40 * time.Second, "source shut down by the guest"},
	{v1alpha1.PhaseTransferringDisks, 20 * time.Minute, "job web-01-transfer-1 transferred 2 disks, 10737418240 bytes, each verified by size and sha256"},
	{v1alpha1.PhaseConverting, 26 * time.Minute, "job web-01-convert-1 converted the guest (rhel 9.4)"},
	{v1alpha1.PhaseImporting, 35 * time.Minute, "2 DataVolumes populated"},
	{v1alpha1.PhaseCreatingVM, 35*time.Minute + 2*time.Second, "VirtualMachine web-01 (uid vm-uid) created halted, owning its 2 DataVolumes"},
	{v1alpha1.PhaseStarting, 36 * time.Minute, "VirtualMachineInstance web-01 running"},
	{v1alpha1.PhaseCleaningUp, 36*time.Minute + 5*time.Second, "staging objects deleted"},
}

// inPhase is a migration the controller drove to phase: the evidence of
// every earlier checkpoint, the status each phase leaves behind, and the
// Ready and Progressing conditions of a migration working on phase.
func inPhase(name string, phase v1alpha1.Phase, mods ...func(*v1alpha1.VirtualMachineMigration)) *v1alpha1.VirtualMachineMigration {
	m := newMigration(name)
	st := &m.Status
	st.Phase, st.StartTime, st.ObservedGeneration = phase, atp(time.Second), 1
	st.PhaseStartTime = atp(0)
	reached := checkpointsBefore(phase)
	for _, c := range checkpoints[:reached] {
		st.Evidence = append(st.Evidence, v1alpha1.CheckpointEvidence{Phase: c.phase, ReachedAt: at(c.offset), Observed: c.observed})
		st.PhaseStartTime = atp(c.offset)
	}
	if reached >= 2 {
		st.Source, st.Target = inventory(), &v1alpha1.TargetStatus{Name: "web-01"}
	}
	if reached >= 4 {
		st.AppliedSpec = m.Spec.DeepCopy()
		st.SourceControl = &v1alpha1.SourceControlStatus{OriginalPowerState: statemachine.PowerStateOn, ShutdownRequestedAt: atp(8 * time.Second), PoweredOffAt: atp(40 * time.Second)}
	}
	if reached >= 4 {
		for i, d := range st.Source.Disks {
			st.Disks = append(st.Disks, v1alpha1.DiskStatus{Key: d.Key, Name: naming.DiskName(i), StagingClaim: naming.StagingClaim(name, d.Key), CapacityBytes: d.CapacityBytes})
		}
		st.Transfer = &v1alpha1.JobStatus{JobName: naming.TransferJob(name, 1), Attempt: 1}
	}
	if reached >= 5 {
		transferred(m)
	}
	if reached >= 6 {
		st.Conversion = &v1alpha1.ConversionStatus{JobStatus: v1alpha1.JobStatus{JobName: naming.ConversionJob(name, 1), Attempt: 1, CompletedAt: atp(35 * time.Minute)},
			ConfigMapName: naming.ConversionConfigMap(name, 1), OperatingSystem: "rhel 9.4"}
		imported(m, "Succeeded", "100.0%")
	}
	setCondition(m, statemachine.ConditionReady, metav1.ConditionFalse, string(phase), "working")
	setCondition(m, statemachine.ConditionProgressing, metav1.ConditionTrue, statemachine.ReasonWorking, "working toward "+string(phase))
	for _, mod := range mods {
		mod(m)
	}
	return m
}

// checkpointsBefore is how many checkpoints of the happy path a migration
// in phase reached: those before it, or for a phase off the happy path,
// those its fixture reached (Planned and Failed after validation, RollingBack
// and Cancelling during the transfer).
func checkpointsBefore(phase v1alpha1.Phase) int {
	switch phase {
	case v1alpha1.PhasePlanned, v1alpha1.PhaseFailed, v1alpha1.PhaseAwaitingApproval:
		return 2
	case v1alpha1.PhaseRollingBack, v1alpha1.PhaseCancelling:
		return 4
	case v1alpha1.PhaseSucceeded:
		return len(checkpoints)
	}
	for i, c := range checkpoints {
		if c.phase == phase {
			return i
		}
	}
	return 0
}

// transferred records a verified transfer of every disk.
func transferred(m *v1alpha1.VirtualMachineMigration) {
	st := &m.Status
	st.Transfer.CompletedAt = atp(20 * time.Minute)
	sums := []string{"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752"}
	for i := range st.Disks {
		d := &st.Disks[i]
		d.BytesTransferred, d.SHA256, d.TransferredAt = d.CapacityBytes, sums[i%2], atp(20*time.Minute)
		d.BytesRead = d.CapacityBytes
	}
	// The first disk thin, its allocated areas copied; the second whole.
	d0 := &st.Disks[0]
	d0.AllocatedOnly, d0.AllocatedBytes, d0.BytesRead = true, ptr.To(d0.CapacityBytes/4+3<<20), d0.CapacityBytes/4+3<<20
	if len(st.Disks) > 1 {
		st.Disks[1].FullCopyReason = "vSphere's map of the disk's allocated areas covers 1048576 bytes, less than the 2147483648 bytes the datastore reports in use"
	}
}

// imported records the DataVolumes' phase and progress.
func imported(m *v1alpha1.VirtualMachineMigration, phase, progress string) {
	for i := range m.Status.Disks {
		d := &m.Status.Disks[i]
		d.DataVolume, d.ImportPhase, d.ImportProgress = naming.DataVolume("web-01", i), phase, progress
	}
}

// setCondition sets a condition, its transition 30 seconds before testNow.
func setCondition(m *v1alpha1.VirtualMachineMigration, t string, status metav1.ConditionStatus, reason, message string) {
	c := metav1.Condition{Type: t, Status: status, Reason: reason, Message: message, ObservedGeneration: m.Generation,
		LastTransitionTime: metav1.NewTime(testNow.Add(-30 * time.Second))}
	for i := range m.Status.Conditions {
		if m.Status.Conditions[i].Type == t {
			m.Status.Conditions[i] = c
			return
		}
	}
	m.Status.Conditions = append(m.Status.Conditions, c)
}

// transferring sets the disks' live progress.
func transferring(done0, done1, rate int64) func(*v1alpha1.VirtualMachineMigration) {
	return func(m *v1alpha1.VirtualMachineMigration) {
		for i, done := range []int64{done0, done1} {
			d := &m.Status.Disks[i]
			d.BytesTransferred, d.RateBytesPerSecond = done, rate
			if rate > 0 && done < d.CapacityBytes {
				d.ETASeconds = ptr.To((d.CapacityBytes - done + rate - 1) / rate)
			}
		}
		// As the controller wrote it while transferring (a fixture that
		// failed or is cancelled since keeps it).
		st := m.Status.DeepCopy()
		st.Phase = v1alpha1.PhaseTransferringDisks
		m.Status.Progress = statemachine.Progress(st)
		m.Status.LastProgressTime = atp(41 * time.Minute)
	}
}

// fixtures are migrations in every phase and the notable ways of waiting,
// by name; the golden tests render each.
func fixtures() map[string]*v1alpha1.VirtualMachineMigration {
	waitFor := func(reason, message string) func(*v1alpha1.VirtualMachineMigration) {
		return func(m *v1alpha1.VirtualMachineMigration) {
			setCondition(m, statemachine.ConditionProgressing, metav1.ConditionFalse, reason, message)
		}
	}
	all := map[string]*v1alpha1.VirtualMachineMigration{
		"new":         newMigration("new"),
		"validating":  inPhase("validating", v1alpha1.PhaseValidating),
		"unreachable": inPhase("unreachable", v1alpha1.PhaseValidating, waitFor("SourceUnreachable", "connecting to https://vcenter.example.com/sdk: dial tcp: i/o timeout"), lastError(v1alpha1.PhaseValidating, "SourceUnreachable", "connecting to https://vcenter.example.com/sdk: dial tcp: i/o timeout")),
		"planned":     inPhase("planned", v1alpha1.PhasePlanned, withPlan),
		"approval": inPhase("approval", v1alpha1.PhaseAwaitingApproval, func(m *v1alpha1.VirtualMachineMigration) {
			m.Spec.Policy.RequireApproval = true
			waitFor(statemachine.ReasonAwaitingApproval, "stopping the source VM waits for approval: kubectl patch vmm approval -n apps --type merge -p '{\"spec\":{\"policy\":{\"approved\":true}}}'")(m)
		}),
		"queued":         inPhase("queued", v1alpha1.PhaseQueued, waitFor(statemachine.ReasonWaitingForTransferSlot, "4 of 4 transfers from host esxi-01.example.com run")),
		"stopping":       inPhase("stopping", v1alpha1.PhaseStoppingSource),
		"transfer-early": inPhase("transfer-early", v1alpha1.PhaseTransferringDisks),
		"transferring":   inPhase("transferring", v1alpha1.PhaseTransferringDisks, transferring(4096*mib, 512*mib, 85*mib)),
		"stalled":        inPhase("stalled", v1alpha1.PhaseTransferringDisks, transferring(1024*mib, 0, 0), stalled),
		"converting":     inPhase("converting", v1alpha1.PhaseConverting),
		"paused":         inPhase("paused", v1alpha1.PhaseConverting, paused),
		"importing": inPhase("importing", v1alpha1.PhaseImporting, func(m *v1alpha1.VirtualMachineMigration) {
			imported(m, "CloneInProgress", "37.50%")
		}),
		"starting": inPhase("starting", v1alpha1.PhaseStarting, func(m *v1alpha1.VirtualMachineMigration) {
			m.Status.Target.VMIPhase = "Scheduling"
			m.Status.Target.StartRequestedAt = ptr.To(at(39 * time.Minute))
		}),
		"import-start": inPhase("import-start", v1alpha1.PhaseImporting, func(m *v1alpha1.VirtualMachineMigration) {
			// The Converting -> Importing switch: the DataVolumes are not named yet.
			imported(m, "", "")
			for i := range m.Status.Disks {
				m.Status.Disks[i].DataVolume = ""
			}
		}),
		"long-name": inPhase("long-name", v1alpha1.PhaseTransferringDisks, transferring(4096*mib, 512*mib, 85*mib), func(m *v1alpha1.VirtualMachineMigration) {
			// Selected by moRef: a name the CRD's 80 characters never checked.
			m.Spec.Source.VM = v1alpha1.VMSelector{MoRef: "vm-42"}
			m.Status.Source.Name = longSourceName
			m.Status.Target.Name = naming.TargetName(longSourceName)
		}),
		"succeeded":         inPhase("succeeded", v1alpha1.PhaseSucceeded, succeeded),
		"plan-ran":          inPhase("plan-ran", v1alpha1.PhaseSucceeded, withPlan, planRan, succeeded),
		"failed":            inPhase("failed", v1alpha1.PhaseFailed, failed),
		"failed-converting": inPhase("failed-converting", v1alpha1.PhaseConverting, failedConverting),
		"pull-backoff":      inPhase("pull-backoff", v1alpha1.PhaseTransferringDisks, transferring(0, 0, 0), pullBackOff),
		"refused":           inPhase("refused", v1alpha1.PhaseFailed, refusedByDryRun),
		"rolling-back":      inPhase("rolling-back", v1alpha1.PhaseRollingBack, transferring(1024*mib, 0, 0), lastError(v1alpha1.PhaseTransferringDisks, "TransferFailed", "transfer job rolling-back-transfer-1 failed: BackoffLimitExceeded")),
		"cancelling":        inPhase("cancelling", v1alpha1.PhaseCancelling, transferring(3072*mib, 1024*mib, 0), cancelling),
		"delete-finished":   inPhase("delete-finished", v1alpha1.PhaseSucceeded, succeeded, cancelling),
	}
	for _, m := range all {
		// What the state machine records of the outage and of the
		// progress, as the controller writes them (a failed or cancelled
		// migration's progress is the fixture's own).
		m.Status.Downtime = statemachine.Downtime(&m.Status)
		if p := statemachine.Progress(&m.Status); p != "" {
			m.Status.Progress = p
		}
	}
	return all
}

// longSourceName is a source VM name of 200 characters.
var longSourceName = "app-" + strings.Repeat("very-long-name-", 12) + strings.Repeat("x", 200-4-15*12-7) + "-web-01"

// planRan is a plan-first migration that then ran: spec.planOnly turned
// off, and the cleanup deleted the plan ConfigMap (status.plan no longer
// names it).
func planRan(m *v1alpha1.VirtualMachineMigration) {
	m.Spec.PlanOnly = false
	m.Status.Plan.ConfigMapName = ""
}

// lastError records a failure as the controller does, with its summary.
func lastError(phase v1alpha1.Phase, reason, message string) func(*v1alpha1.VirtualMachineMigration) {
	return func(m *v1alpha1.VirtualMachineMigration) {
		m.Status.LastError = &v1alpha1.MigrationError{Phase: phase, Reason: reason, Message: message,
			Summary: naming.Summarize(message), Time: at(41 * time.Minute)}
	}
}

// failedConverting failed in Converting, after its transfer: an older
// controller left status.progress at the transfer's 100%.
func failedConverting(m *v1alpha1.VirtualMachineMigration) {
	m.Status.Phase, m.Status.Progress = v1alpha1.PhaseFailed, "100%"
	m.Status.Conversion = &v1alpha1.ConversionStatus{JobStatus: v1alpha1.JobStatus{JobName: naming.ConversionJob(m.Name, 1), Attempt: 1},
		ConfigMapName: naming.ConversionConfigMap(m.Name, 1)}
	lastError(v1alpha1.PhaseConverting, statemachine.ReasonConversionFailed, "conversion job failed-converting-convert-1 failed: virt-v2v: inspection could not detect the source guest (InspectionFailed: converting again cannot help)")(m)
	m.Status.CompletionTime = atp(41 * time.Minute)
	ended(m)
}

// pullBackOff is a transfer whose pod has not started for 20 minutes:
// its image cannot be pulled (a controller run with --pod-start-timeout 30m).
func pullBackOff(m *v1alpha1.VirtualMachineMigration) {
	job := m.Status.Transfer.JobName
	m.Status.LastProgressTime = atp(22 * time.Minute)
	m.Status.PodWaiting = &v1alpha1.PodWaiting{Job: job, Reason: "ImagePullBackOff",
		Message: `Back-off pulling image "registry.example/vm-migration-controller:v0.1.1"`, Since: at(22 * time.Minute), AttemptFailsAt: atp(52 * time.Minute)}
	setCondition(m, statemachine.ConditionProgressing, metav1.ConditionTrue, statemachine.ReasonWorking,
		fmt.Sprintf(`transferring disks (job %s, attempt 1); its pod has not started: ImagePullBackOff: Back-off pulling image "registry.example/vm-migration-controller:v0.1.1" (the attempt counts as failed at 2026-11-30T10:52:00Z)`, job))
}

func withPlan(m *v1alpha1.VirtualMachineMigration) {
	m.Spec.PlanOnly = true
	m.Status.Plan = &v1alpha1.PlanStatus{ConfigMapName: naming.PlanConfigMap(m.Name), RenderedAt: ptr.To(at(7 * time.Second)), Objects: []v1alpha1.PlannedObject{
		{APIVersion: "v1", Kind: "PersistentVolumeClaim", Name: naming.DataVolume("web-01", 0)},
		{APIVersion: "v1", Kind: "PersistentVolumeClaim", Name: naming.DataVolume("web-01", 1)},
		{APIVersion: "v1", Kind: "ConfigMap", Name: naming.TransferProgressConfigMap(m.Name, 1)},
		{APIVersion: "v1", Kind: "ServiceAccount", Name: naming.TransferAccess(m.Name, 1)},
		{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role", Name: naming.TransferAccess(m.Name, 1)},
		{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding", Name: naming.TransferAccess(m.Name, 1)},
		{APIVersion: "v1", Kind: "ConfigMap", Name: m.Name + "-transfer-1-spec"},
		{APIVersion: "batch/v1", Kind: "Job", Name: naming.TransferJob(m.Name, 1)},
		{APIVersion: "v1", Kind: "ConfigMap", Name: naming.ConversionConfigMap(m.Name, 1)},
		{APIVersion: "batch/v1", Kind: "Job", Name: naming.ConversionJob(m.Name, 1)},
		{APIVersion: "cdi.kubevirt.io/v1beta1", Kind: "DataVolume", Name: naming.DataVolume("web-01", 0)},
		{APIVersion: "cdi.kubevirt.io/v1beta1", Kind: "DataVolume", Name: naming.DataVolume("web-01", 1)},
		{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine", Name: "web-01"},
	}}
	setCondition(m, statemachine.ConditionProgressing, metav1.ConditionFalse, statemachine.ReasonPlanOnly,
		fmt.Sprintf("the plan of the 13 objects this migration would create is in ConfigMap %s (kubectl vmm plan %s); the source was not touched: set spec.planOnly to false to migrate", m.Status.Plan.ConfigMapName, m.Name))
}

// refusedByDryRun failed in Validating: the API server refused the dry
// run of its staging claims (a quota); its images were proven.
func refusedByDryRun(m *v1alpha1.VirtualMachineMigration) {
	withPlan(m)
	objects := m.Status.Plan.Objects
	m.Spec.PlanOnly, m.Status.Plan, m.Status.SourceControl = false, nil, nil
	dr := &v1alpha1.DryRunStatus{ObservedGeneration: 1, Phase: v1alpha1.PhaseValidating, CheckedAt: at(8 * time.Second)}
	for _, o := range objects {
		answer := v1alpha1.DryRunObject{APIVersion: o.APIVersion, Kind: o.Kind, Name: o.Name, Outcome: v1alpha1.DryRunAccepted}
		switch o.Kind {
		case "PersistentVolumeClaim":
			answer.Outcome = v1alpha1.DryRunRefused
			answer.Message = fmt.Sprintf(`persistentvolumeclaims "%s" is forbidden: exceeded quota: no-claims, requested: persistentvolumeclaims=1, used: persistentvolumeclaims=0, limited: persistentvolumeclaims=0`, o.Name)
			dr.Refused++
		case "RoleBinding":
			answer.Outcome = v1alpha1.DryRunUnchecked
			answer.Message = fmt.Sprintf("it binds Role %s, which the migration creates just before it and a dry run does not create (Role %s's own dry run checked its rules)", o.Name, o.Name)
		}
		dr.Objects = append(dr.Objects, answer)
	}
	m.Status.DryRun = dr
	m.Status.Preflight = preflight.DryRunFindings(dr)
	m.Status.ImageProofs = []v1alpha1.ImageProof{
		{Component: "conversion", Image: "registry.example/virt-v2v:2.2", Result: v1alpha1.ProofPassed, CheckedAt: at(9 * time.Second),
			Output: `{"virtV2V":"2.2.0","virtioWin":{"path":"/usr/share/virtio-win","present":false},"ok":true,"problems":[]}`},
		{Component: "transfer", Image: "registry.example/vm-migration-controller:v0.1.0", Result: v1alpha1.ProofPassed, CheckedAt: at(9 * time.Second),
			Output: `{"command":"vm-transfer","version":"v0.1.0","goVersion":"go1.26.8","specVersion":"v1"}`},
	}
	lastError(v1alpha1.PhaseValidating, statemachine.ReasonPreflightFailed, "DryRunRefused: the API server refused the dry run of PersistentVolumeClaim refused-staging-2000, which the migration creates: persistentvolumeclaims \"refused-staging-2000\" is forbidden: exceeded quota: no-claims")(m)
	m.Status.CompletionTime = atp(41 * time.Minute)
	ended(m)
}

func stalled(m *v1alpha1.VirtualMachineMigration) {
	m.Status.LastProgressTime = atp(5 * time.Minute)
	setCondition(m, statemachine.ConditionStalled, metav1.ConditionTrue, statemachine.ReasonNoProgress, "no progress in TransferringDisks since 2026-11-30T10:05:00Z")
}

func paused(m *v1alpha1.VirtualMachineMigration) {
	m.Spec.Policy.Paused = true
	setCondition(m, statemachine.ConditionProgressing, metav1.ConditionFalse, statemachine.ReasonPaused, "held by spec.policy.paused")
	setCondition(m, statemachine.ConditionPaused, metav1.ConditionTrue, statemachine.ReasonPaused, "held at Converting by spec.policy.paused; running jobs are not interrupted")
}

func succeeded(m *v1alpha1.VirtualMachineMigration) {
	m.Status.Target.UID, m.Status.Target.VMIPhase = "vm-uid", "Running"
	m.Status.Target.StartRequestedAt = atp(35*time.Minute + 30*time.Second)
	m.Status.Conversion.Warnings = []string{"could not determine a way to update the configuration of Grub2"}
	m.Status.CompletionTime = atp(36*time.Minute + 5*time.Second)
	m.Status.Progress = statemachine.Progress(&m.Status)
	ended(m)
}

func failed(m *v1alpha1.VirtualMachineMigration) {
	lastError(v1alpha1.PhaseValidating, statemachine.ReasonPreflightFailed, "RDMDisk: disk 2001 is a raw device mapping, which cannot be copied")(m)
	m.Status.CompletionTime = atp(41 * time.Minute)
	ended(m)
}

// ended gives a migration that ended the conditions the controller sets
// (the state machine's own), 30 seconds before testNow.
func ended(m *v1alpha1.VirtualMachineMigration) {
	m.Status.Conditions = nil
	d := statemachine.Decide(statemachine.Input{Migration: m, Now: metav1.NewTime(testNow.Add(-30 * time.Second))})
	m.Status.Conditions = d.Status.Conditions
}

func cancelling(m *v1alpha1.VirtualMachineMigration) {
	m.DeletionTimestamp = atp(41 * time.Minute)
	m.Finalizers = []string{v1alpha1.FinalizerName}
	if m.Status.Phase == v1alpha1.PhaseCancelling {
		setCondition(m, statemachine.ConditionProgressing, metav1.ConditionTrue, statemachine.ReasonWorking, "deleting 5 child objects")
	}
}
