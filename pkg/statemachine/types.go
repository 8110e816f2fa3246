package statemachine

import (
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// Input is everything a decision depends on.
type Input struct {
	// Migration is the object as read from the cache. Decide never mutates it.
	Migration *v1alpha1.VirtualMachineMigration
	// Observation is what the steps saw of the world for this reconcile.
	Observation Observation
	// Now is the current time, read by the caller.
	Now metav1.Time
	// Config holds controller-wide tunables; zero values take defaults.
	Config Config
}

// Config holds controller-wide tunables of the decisions.
type Config struct {
	// PollInterval is how often vSphere and running Jobs are re-observed.
	PollInterval time.Duration
	// ProgressInterval bounds how often progress is written into status.
	ProgressInterval time.Duration
	// WaitInterval is how often a migration waiting on a person or on a
	// resource that sends no events (a Secret the controller may not
	// watch, a transfer slot) is looked at again.
	WaitInterval time.Duration
	// PodStartTimeout is how long, after the source stopped, a transfer
	// or conversion Job's pod may stay unstarted for a reason a person
	// must fix (an image that cannot be pulled, a refusal by admission,
	// no node to run it, a container it cannot create) before the attempt
	// counts as failed.
	PodStartTimeout time.Duration
	// VerificationMaxAge bounds how long before the target VM is started
	// its disks may have been read back: a start that comes later (the
	// VM's creation held by a quota, a webhook or a slow API, a pause)
	// reads every target disk back again first, so that the chain holds
	// for the bytes the VM starts on.
	VerificationMaxAge time.Duration
}

// Default tunables.
const (
	DefaultPollInterval     = 10 * time.Second
	DefaultProgressInterval = 10 * time.Second
	DefaultWaitInterval     = 30 * time.Second
	DefaultPodStartTimeout  = 5 * time.Minute
	// DefaultVerificationMaxAge is VerificationMaxAge's default.
	DefaultVerificationMaxAge = 10 * time.Minute
)

func (c Config) withDefaults() Config {
	if c.PollInterval <= 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.ProgressInterval <= 0 {
		c.ProgressInterval = DefaultProgressInterval
	}
	if c.WaitInterval <= 0 {
		c.WaitInterval = DefaultWaitInterval
	}
	if c.PodStartTimeout <= 0 {
		c.PodStartTimeout = DefaultPodStartTimeout
	}
	if c.VerificationMaxAge <= 0 {
		c.VerificationMaxAge = DefaultVerificationMaxAge
	}
	return c
}

// ErrorClass tells the state machine how to treat an observed failure.
type ErrorClass string

const (
	// ErrorTransient failures (timeouts, a busy vCenter, API conflicts) are
	// retried with a delay until the retry deadline passes; they do not
	// spend the retry count.
	ErrorTransient ErrorClass = "Transient"
	// ErrorNeedsUser failures (a missing or wrong Secret, a permission
	// denied) wait for a person to fix them, with a condition saying what.
	// They are looked at again periodically until the retry deadline.
	ErrorNeedsUser ErrorClass = "NeedsUser"
	// ErrorPermanent failures cannot heal (the guest cannot be converted,
	// an object is refused as invalid, a name is taken by something that is
	// not this migration's): the migration fails at once.
	ErrorPermanent ErrorClass = "Permanent"
	// ErrorGone says the source VM no longer exists: permanent, and the one
	// failure that ends a restore of the source (there is nothing left to
	// power on).
	ErrorGone ErrorClass = "Gone"
)

// ObservedError is a failure the steps saw, classified.
type ObservedError struct {
	// Class decides retry, wait or fail.
	Class ErrorClass
	// Reason is a CamelCase constant.
	Reason string
	// Message is for a person; it never holds a secret.
	Message string
}

// Error makes an ObservedError an error, so a step's action can return
// its failure already classified.
func (e *ObservedError) Error() string { return e.Message }

// Observation is what the steps saw of the world for one reconcile. Nil
// pointers mean "not observed" or "does not exist", as each field says.
type Observation struct {
	// Source is what was seen of the source VM, when it was looked at.
	Source SourceObservation
	// Preflight holds the findings of the preflight rules (Validating only).
	Preflight []v1alpha1.PreflightFinding
	// TransferSlot says whether the per-host and per-datastore transfer
	// limits leave room for this migration (Queued only).
	TransferSlot SlotObservation
	// ConversionCapacity says whether a conversion will have room once the
	// disks are transferred (Queued only): Full holds the stop back. The
	// zero value holds nothing back (no conversion pacing).
	ConversionCapacity CapacityObservation
	// Claims says which other migration in flight, if any, already
	// migrates the same source VM or creates the same target VM (Validating
	// only, once the inventory is read).
	Claims ClaimObservation
	// SourceCopies are the VirtualMachines other migrations made from the
	// same source VM, in the namespaces the controller watches (Validating
	// only, once the inventory is read): by its instance UUID, or, on a VM
	// handed over by an earlier version, its BIOS UUID and server.
	SourceCopies []v1alpha1.MigratedCopy
	// Children lists the migration's children that exist, by kind.
	Children Children
	// TransferJob is the Job named in status.transfer, nil if absent.
	TransferJob *JobObservation
	// ConversionJob is the Job named in status.conversion, nil if absent.
	ConversionJob *JobObservation
	// VerificationJob is the Job named in status.verification, nil if absent.
	VerificationJob *JobObservation
	// Workers are what may still run of the migration's transfer,
	// conversion and verification attempts (see WorkerObservation), read
	// in the phases that start them; nil when nothing may.
	Workers []WorkerObservation
	// DataVolumes are the target DataVolumes that exist, by name.
	DataVolumes map[string]DataVolumeObservation
	// VM is the target VirtualMachine, nil if absent.
	VM *VMObservation
	// VMI is the target VirtualMachineInstance, nil if absent.
	VMI *VMIObservation
	// LiveVMI is the target's instance read from the API server itself,
	// not the cache, when NeedsLiveTargetInstance says the decision may
	// power the source on again; nil when it was not read.
	LiveVMI *LiveVMIObservation
	// Plan is the stored dry-run plan (ConfigMap), nil if absent.
	Plan *PlanObservation
	// NamespaceTerminating says the migration's namespace is being deleted:
	// no new object (a credentials Secret) can be created in it any more.
	// It is looked at only when a deleted migration could not read its
	// source (see restoreHopeless).
	NamespaceTerminating bool
	// DryRun is the server-side dry run of the objects the migration
	// creates (Validating, and Queued once a transfer slot is free); nil
	// when none was asked for.
	DryRun *DryRunObservation
	// Proofs are the images the migration's pods run that must prove
	// they run in its namespace before the source is touched
	// (Validating); nil when none are asked for.
	Proofs []ProofObservation
}

// DryRunObservation is the outcome of the dry run of the migration's objects.
type DryRunObservation struct {
	// Status is the API server's answer per object; nil with Error.
	Status *v1alpha1.DryRunStatus
	// Error says why the dry run could not be made (the API server could
	// not answer, the objects could not be rendered).
	Error *ObservedError
}

// ProofObservation is what was seen of one image's proof.
type ProofObservation struct {
	// Component is the component whose image is proven (transfer, conversion).
	Component string
	// JobName is the proof Job's name.
	JobName string
	// Result is the proof's outcome once known: from the proof Job, or a
	// recent proof of the same key (same namespace, image and pod shape).
	Result *v1alpha1.ImageProof
	// Running says the proof Job exists (or was just created), without a
	// result yet. The Job is shared by every migration of its namespace
	// and key, owned by none of them: no migration deletes it, its TTL
	// does.
	Running bool
	// Stale is the proof Job that exists but serves no longer: its pass
	// is older than the proof TTL, or its failure came before this
	// validation began (a person fixed the cause and changed the spec).
	// It is deleted (as the proof object it is, with its UID as a
	// precondition) and the image proven again.
	Stale *ObjectRef
	// Waiting says what a running proof's pod waits on.
	Waiting string
	// StartProblem is why a running proof's pod has not started, when
	// for a reason a person must fix that the proof waits out (no node
	// can run it yet); status.podWaiting says so.
	StartProblem *PodStartProblem
	// FailsAt is when the proof fails if its pod has not started by then
	// (the Job's creation and the proof timeout), with StartProblem.
	FailsAt time.Time
	// NotRun says why the proof is not made, when it must not or cannot
	// be: a blocking finding refuses its image (one not allowed, none
	// known), or its pod cannot be rendered. A validation that fails does
	// not wait for it.
	NotRun string
}

// PlanObservation is what was seen of a stored plan.
type PlanObservation struct {
	// Ref is the plan's ConfigMap.
	Ref ObjectRef
	// RenderedAt is when it was stored.
	RenderedAt metav1.Time
	// Objects the plan lists.
	Objects []v1alpha1.PlannedObject
}

// ClaimObservation names the other migrations in flight that hold what
// this one would claim; empty when nothing is held.
type ClaimObservation struct {
	// SourceHeldBy is the namespace/name of a migration in flight of the
	// same source VM (same endpoint and instance UUID), in any namespace.
	SourceHeldBy string
	// TargetHeldBy is the namespace/name of a migration in flight that
	// creates a VirtualMachine of the same name in the same namespace.
	TargetHeldBy string
}

// SourceObservation is what was seen of the source VM.
type SourceObservation struct {
	// Observed is true when the source was read in this reconcile.
	Observed bool
	// Error is set when reading it failed; the other fields are then unset.
	Error *ObservedError
	// Inventory is the full inventory (read in Validating).
	Inventory *v1alpha1.SourceInventory
	// PowerState is poweredOn, poweredOff or suspended.
	PowerState string
	// ToolsRunning says VMware Tools run in the guest (a guest shutdown can work).
	ToolsRunning bool
	// Snapshots lists the names of the snapshots present on the VM.
	Snapshots []string
	// PowerOffTasks are the VM's power-off tasks vSphere knows, oldest
	// first, read while a power-off the controller requested may still
	// run (WatchesPowerOffTasks).
	PowerOffTasks []TaskObservation
}

// TaskObservation is what was seen of a vSphere task.
type TaskObservation struct {
	// Ref is the task's managed object reference.
	Ref string
	// State is one of the Task states; empty for a task vSphere no
	// longer knows (it ended long ago).
	State string
	// Error is the task's failure, classified, when it failed.
	Error *ObservedError
}

// vSphere task states.
const (
	TaskQueued    = "queued"
	TaskRunning   = "running"
	TaskSucceeded = "success"
	TaskFailed    = "error"
)

// Pending reports whether the task may still run.
func (t TaskObservation) Pending() bool { return t.State == TaskQueued || t.State == TaskRunning }

// Source power states, as vSphere names them.
const (
	PowerStateOn        = "poweredOn"
	PowerStateOff       = "poweredOff"
	PowerStateSuspended = "suspended"
)

// SlotObservation says whether a transfer may start now.
type SlotObservation struct {
	// Available is true when starting a transfer keeps every limit.
	Available bool
	// Message says which limit holds the migration back.
	Message string
}

// CapacityObservation says whether a capacity the path after the stop
// needs is free now.
type CapacityObservation struct {
	// Full is true when the capacity is spoken for: the stop waits.
	Full bool
	// Message says what holds the migration back when Full, and how much
	// of the capacity is taken otherwise (empty: nothing to say).
	Message string
}

// Kinds of the objects a migration creates, as ObjectRef.Kind.
const (
	KindPersistentVolumeClaim = "PersistentVolumeClaim"
	KindJob                   = "Job"
	KindConfigMap             = "ConfigMap"
	KindServiceAccount        = "ServiceAccount"
	KindRole                  = "Role"
	KindRoleBinding           = "RoleBinding"
	KindDataVolume            = "DataVolume"
	KindVirtualMachine        = "VirtualMachine"
	KindPod                   = "Pod"
)

// ObjectRef names one observed Kubernetes object in the migration's
// namespace. Delete actions carry the refs of the objects to delete: the
// step deletes an object only when MigrationUID is the migration's own UID,
// with UID as a precondition, so that neither a foreign object nor a
// namesake created since the observation is ever deleted.
type ObjectRef struct {
	// Kind is one of the Kind constants.
	Kind string
	// Name of the object.
	Name string
	// UID of the object as observed.
	UID types.UID
	// MigrationUID is the value of the object's LabelMigrationUID label.
	MigrationUID types.UID
}

// Children lists the migration's children that exist, by kind. The
// observer lists only objects that carry this migration's UID label.
type Children struct {
	// StagingClaims are the staging PersistentVolumeClaims (of a disk
	// imported by a CDI clone).
	StagingClaims []ObjectRef
	// TargetClaims are the claims the transfer writes the VM's disks into
	// (the one-pass path), which the target DataVolumes adopt: the
	// migration's until the VM exists, never deleted by a cleanup (they
	// are not staging) nor once the target is kept.
	TargetClaims []ObjectRef
	// Jobs are the transfer and conversion Jobs.
	Jobs []ObjectRef
	// ConfigMaps are the Jobs' spec, domain and progress ConfigMaps.
	ConfigMaps []ObjectRef
	// DataVolumes lists the target DataVolumes labelled for this migration
	// that the target VM does not own yet.
	DataVolumes []ObjectRef
	// TransferAccess lists the transfer attempts' RoleBindings, Roles and
	// ServiceAccounts, in that order (the order they are deleted in).
	TransferAccess []ObjectRef
}

// Count is the number of children that exist.
func (c Children) Count() int {
	return len(c.Staging()) + len(c.DataVolumes) + len(c.TargetClaims)
}

// Staging is every child but the target DataVolumes and claims: what a
// successful migration's cleanup deletes.
func (c Children) Staging() []ObjectRef {
	return slices.Concat(c.Jobs, c.ConfigMaps, c.TransferAccess, c.StagingClaims)
}

// All is every child, staging objects first, the target claims last
// (after the DataVolumes that may have adopted them).
func (c Children) All() []ObjectRef {
	return slices.Concat(c.Staging(), c.DataVolumes, c.TargetClaims)
}

// ownedBy keeps the children that carry uid: the observer lists no other,
// and the decisions never count or name one that is not the migration's.
func (c Children) ownedBy(uid types.UID) Children {
	keep := func(refs []ObjectRef) []ObjectRef {
		return slices.DeleteFunc(slices.Clone(refs), func(o ObjectRef) bool { return uid == "" || o.MigrationUID != uid })
	}
	return Children{StagingClaims: keep(c.StagingClaims), Jobs: keep(c.Jobs), ConfigMaps: keep(c.ConfigMaps),
		DataVolumes: keep(c.DataVolumes), TransferAccess: keep(c.TransferAccess), TargetClaims: keep(c.TargetClaims)}
}

// Names are the names of refs, in order.
func Names(refs []ObjectRef) []string {
	names := make([]string, 0, len(refs))
	for _, r := range refs {
		names = append(names, r.Name)
	}
	return names
}

// JobObservation is what was seen of a Job and its pod.
type JobObservation struct {
	// Name of the Job.
	Name string
	// Ref is the Job itself.
	Ref ObjectRef
	// Succeeded and Failed are the Job's terminal conditions; neither set
	// means it is still running or pending.
	Succeeded bool
	Failed    bool
	// Message explains a failure (from the Job condition or the pod's
	// termination message).
	Message string
	// Reason classifies a conversion failure (see the Conversion* reasons).
	Reason string
	// Progress is the latest per-disk transfer progress.
	Progress []DiskProgress
	// Results are the per-disk results of a finished transfer.
	Results []DiskResult
	// OperatingSystem is what a conversion inspected.
	OperatingSystem string
	// Warnings are the warnings a conversion's virt-v2v printed.
	Warnings []string
	// Checksums are the SHA-256 of the images a conversion converted, or
	// a verification read, by disk.
	Checksums []ImageChecksum
	// Interfaces is what a conversion found (and pinned) of each NIC in
	// the guest's network configuration.
	Interfaces []v1alpha1.InterfacePin
	// ResultMissing says the Job succeeded but its result (the pod's
	// termination message, or the transfer's ConfigMap) is not in the
	// caches: each resource has its own watch, so the Job's completion can
	// arrive before its pod's last status. See JobResultGrace.
	ResultMissing bool
	// CompletedAt is the Job's completion time (zero when not recorded).
	CompletedAt time.Time
	// CreatedAt is when the Job was created (zero when not known).
	CreatedAt time.Time
	// StartProblem says why the Job's pod has not started, when it is a
	// reason a person must fix; nil once it started, or while it only
	// waits for something that comes by itself (its volumes, its image
	// being pulled).
	StartProblem *PodStartProblem
}

// WorkerObservation is one of the migration's transfer, conversion or
// verification Jobs that has not finished or is being deleted, or one of
// their pods that has not ended (Pending, Running or Unknown, being
// deleted or not): while it exists, a container of its attempt may still
// run (an image pull that succeeds late, a node that comes back) and
// write the claims it mounts. No attempt starts while one of another
// attempt exists: two pods never write the same claim.
type WorkerObservation struct {
	// Ref is the Job or the pod (Kind KindJob or KindPod).
	Ref ObjectRef
	// Job is the name of the Job it is, or whose pod it is.
	Job string
	// Deleting says its deletion was asked for (it runs until it is gone).
	Deleting bool
}

// PodStartProblem is why a pod has not started, in the cluster's words.
type PodStartProblem struct {
	// Reason as the cluster names it: ErrImagePull, ImagePullBackOff,
	// ErrImageNeverPull, InvalidImageName, CreateContainerConfigError,
	// CreateContainerError, Unschedulable, FailedCreate.
	Reason string
	// Message is the kubelet's, the scheduler's or the admission's message.
	Message string
}

// JobResultGrace is how long after a Job's completion a missing result is
// waited for before it counts as no result at all; JobResultPoll is how
// often the migration looks again meanwhile (the pod's update also wakes
// it).
const (
	JobResultGrace = 30 * time.Second
	JobResultPoll  = 2 * time.Second
)

// awaitsResult says whether a succeeded Job's missing result may still
// arrive at now.
func (j *JobObservation) awaitsResult(now time.Time) bool {
	return j.Succeeded && j.ResultMissing && !j.CompletedAt.IsZero() && now.Before(j.CompletedAt.Add(JobResultGrace))
}

// ImageChecksum is the SHA-256 of one disk image a Job read.
type ImageChecksum struct {
	// Disk is the disk's name in the VM (status.disks[].name).
	Disk string
	// Staged says the image is the staging volume's (once converted),
	// not the target claim's (a verification Job reads both kinds).
	Staged bool
	// Bytes is how many bytes of the image were hashed, from its start.
	Bytes int64
	// Size is the image's size (its file's, or its block device's).
	Size int64
	// SHA256 of those bytes, hex: their block-tree root (pkg/blocktree)
	// where the transfer reported that scheme.
	SHA256 string
	// Rehashed is how many bytes of the image a conversion re-hashed: the
	// blocks its overlay touched (the whole image where it had no tree).
	Rehashed int64
	// StoredRoot is the root of the block tree stored beside the image
	// that a verification read compared with (empty when none).
	StoredRoot string
	// FirstDifference is the first byte range where the image read
	// differs from its stored tree, when they differ.
	FirstDifference *ByteRange
	// Error says why the image could not be read (no SHA256 then).
	Error string
}

// ByteRange is a range of an image's bytes.
type ByteRange struct {
	// Offset of the first byte.
	Offset int64
	// Length in bytes.
	Length int64
}

// String is the range as "bytes 1048576-2097151".
func (r ByteRange) String() string {
	return fmt.Sprintf("bytes %d-%d", r.Offset, r.Offset+r.Length-1)
}

// DiskProgress is one disk's progress in a running transfer.
type DiskProgress struct {
	Key                int32
	BytesDone          int64
	BytesTotal         int64
	RateBytesPerSecond int64
}

// DiskResult is one disk's outcome of a finished transfer.
type DiskResult struct {
	Key    int32
	Bytes  int64
	SHA256 string
	// AllocatedOnly, AllocatedBytes, BytesRead and FullCopyReason say how
	// the disk was read (wire.DiskResult).
	AllocatedOnly  bool
	AllocatedBytes *int64
	BytesRead      int64
	FullCopyReason string
	// Scheme is how SHA256 was computed (v1alpha1.DiskStatus.ChecksumScheme).
	Scheme string
}

// DataVolumeObservation is what was seen of a target DataVolume.
type DataVolumeObservation struct {
	// Ref is the DataVolume itself.
	Ref ObjectRef
	// Phase is the DataVolume's status.phase.
	Phase string
	// Progress is the DataVolume's status.progress ("45.20%").
	Progress string
	// OwnedByVM says the target VM is its controller owner.
	OwnedByVM bool
	// Message is what CDI says of it where it is not ready: the messages
	// of its conditions that are not true (a claim that stays Pending, a
	// quota exceeded), joined.
	Message string
	// Claim is the claim of the DataVolume's name (the one it adopted, or
	// one CDI made for it), nil when there is none.
	Claim *ClaimState
}

// ClaimState is what was seen of a target DataVolume's claim.
type ClaimState struct {
	// UID of the claim.
	UID types.UID
	// Bound says its phase is Bound.
	Bound bool
	// ControllerUID is the UID of its controller owner ("" for none): the
	// DataVolume's once CDI adopted it.
	ControllerUID types.UID
}

// DataVolume phases the decisions look at.
const (
	DataVolumeSucceeded = "Succeeded"
	DataVolumeFailed    = "Failed"
)

// dataVolumeWaits reports whether a DataVolume in this phase waits for
// something outside CDI's copy (its claim to bind, a pod to be admitted
// or scheduled) rather than copying: CDI's Pending, Unknown,
// WaitForFirstConsumer, PendingPopulation, the *Scheduled phases, Paused,
// and no phase yet.
func dataVolumeWaits(phase string) bool {
	switch phase {
	case "", "Pending", "Unknown", "WaitForFirstConsumer", "PendingPopulation", "Paused":
		return true
	}
	return strings.HasSuffix(phase, "Scheduled")
}

// VMObservation is what was seen of the target VirtualMachine.
type VMObservation struct {
	// Ours says it carries this migration's UID label: it was created by
	// this migration and is not somebody else's VM.
	Ours bool
	// UID of the VirtualMachine.
	UID string
	// Ref is the VirtualMachine itself.
	Ref ObjectRef
	// RunStrategy is spec.runStrategy.
	RunStrategy string
	// Created is status.created: KubeVirt says the VM's instance exists.
	Created bool
	// PrintableStatus is status.printableStatus (Stopped, Starting,
	// Running, Stopping...).
	PrintableStatus string
}

// KubeVirt run strategies the decisions use.
const (
	RunStrategyAlways = "Always"
	RunStrategyHalted = "Halted"
)

// VMIObservation is what was seen of the target VirtualMachineInstance.
type VMIObservation struct {
	// Phase is status.phase (Pending, Scheduling, Scheduled, Running, Failed...).
	Phase string
	// AgentConnected says the AgentConnected condition is true.
	AgentConnected bool
	// Reason is status.reason: KubeVirt's NodeUnresponsive (VMINodeLost)
	// on a Failed instance says its node was declared lost.
	Reason string
	// NodeName is the node the instance was scheduled to.
	NodeName string
	// Deleting says the instance is being deleted (KubeVirt stops its
	// guest within the termination grace period, then it is gone).
	Deleting bool
	// Interfaces are status.interfaces: per interface, its name (the
	// VM's net-<index>), MAC, name in the guest and addresses, and where
	// KubeVirt took them from (domain, guest-agent).
	Interfaces []v1alpha1.TargetInterface
}

// LiveVMIObservation is the target VirtualMachineInstance as the API
// server itself answered for it, right before the source may be powered
// on again: an instance cache can lag behind KubeVirt.
type LiveVMIObservation struct {
	// VMI is the instance; nil when the API server has none (or only
	// one that provably belongs to something else).
	VMI *VMIObservation
	// Error says why it could not be read; VMI is then nil.
	Error *ObservedError
}

// VMI phases the decisions look at.
const (
	VMIRunning   = "Running"
	VMIFailed    = "Failed"
	VMISucceeded = "Succeeded"
)

// ActionType names the one mutating action a decision asks for.
type ActionType string

// The actions. Each is idempotent on its own: executing it twice, or after
// a crash that hid whether it ran, is harmless.
const (
	ActionNone                ActionType = ""
	ActionAddFinalizer        ActionType = "AddFinalizer"
	ActionRemoveFinalizer     ActionType = "RemoveFinalizer"
	ActionShutdownGuest       ActionType = "ShutdownGuest"
	ActionPowerOffSource      ActionType = "PowerOffSource"
	ActionPowerOnSource       ActionType = "PowerOnSource"
	ActionRemoveSnapshot      ActionType = "RemoveSnapshot"
	ActionCreateStagingClaims ActionType = "CreateStagingClaims"
	ActionCreateTransferJob   ActionType = "CreateTransferJob"
	ActionCreateConversionJob ActionType = "CreateConversionJob"
	ActionDeleteJob           ActionType = "DeleteJob"
	ActionCreateDataVolumes   ActionType = "CreateDataVolumes"
	ActionDeleteDataVolume    ActionType = "DeleteDataVolume"
	ActionCreateVM            ActionType = "CreateVM"
	ActionAdoptDataVolumes    ActionType = "AdoptDataVolumes"
	ActionStartVM             ActionType = "StartVM"
	ActionHaltVM              ActionType = "HaltVM"
	ActionDeleteVM            ActionType = "DeleteVM"
	ActionDeleteStaging       ActionType = "DeleteStaging"
	ActionDeleteChildren      ActionType = "DeleteChildren"
	ActionCreatePlan          ActionType = "CreatePlan"
	ActionDeletePlan          ActionType = "DeletePlan"
	// ActionCreateProofJob starts the proof of one component's image
	// (Action.Name is the component).
	ActionCreateProofJob ActionType = "CreateProofJob"
	// ActionDeleteStaleProof deletes a stale proof Job (Action.Objects,
	// a shared proof object: no migration's; Action.Name is the
	// component), so that the image is proven again.
	ActionDeleteStaleProof ActionType = "DeleteStaleProof"
	// ActionReleaseTarget hands a target VM that outlives its deleted
	// migration over to its owner: the migration's labels leave it, its
	// DataVolumes and their claims, an annotation says where it came from.
	ActionReleaseTarget ActionType = "ReleaseTarget"
)

// ActionCreateVerificationJob creates the Job that reads the target disks
// back before the VM is created.
const ActionCreateVerificationJob ActionType = "CreateVerificationJob"

// Action is the one mutating action a decision asks for.
type Action struct {
	// Type of the action; ActionNone asks for nothing.
	Type ActionType
	// Name is the object or snapshot the action applies to, when it
	// applies to one (a Job, a DataVolume, a snapshot).
	Name string
	// Attempt is the attempt number for create actions that have one.
	Attempt int32
	// Objects are the objects a delete action deletes, in order.
	Objects []ObjectRef
}

// Event is a Kubernetes event the controller records after the status
// write that carries the decision succeeded.
type Event struct {
	// Warning is true for Warning events, false for Normal ones.
	Warning bool
	// Reason is a CamelCase constant.
	Reason string
	// Message is for a person.
	Message string
}

// Decision is the outcome of one Decide.
type Decision struct {
	// Status is the new status; the caller writes it only when it differs
	// from the current one, before executing Action (so intents are
	// recorded before the calls they announce).
	Status v1alpha1.VirtualMachineMigrationStatus
	// Action is the one action to take.
	Action Action
	// RequeueAfter asks to look again after this long even without an
	// event; zero relies on events alone.
	RequeueAfter time.Duration
	// Events to record once the status is written.
	Events []Event
}

// SourceNeed says what the gatherer must read of the source VM for a
// decision, so that vSphere is only asked what the phase needs.
type SourceNeed int

const (
	// SourceNeedNothing: the decision does not look at the source.
	SourceNeedNothing SourceNeed = iota
	// SourceNeedState: power state, tools state and snapshot names.
	SourceNeedState
	// SourceNeedInventory: the full inventory, and the preflight rules.
	SourceNeedInventory
)

// NeedsSource says what Decide will look at of the source VM for this
// migration in its current state.
func NeedsSource(m *v1alpha1.VirtualMachineMigration) SourceNeed {
	st := &m.Status
	touched := needsRestore(st) || pendingSnapshots(st)
	switch {
	case m.DeletionTimestamp != nil:
		if IsTerminal(st.Phase) || !touched {
			return SourceNeedNothing
		}
		return SourceNeedState
	case m.Spec.Policy.Paused || IsTerminal(st.Phase):
		return SourceNeedNothing
	}
	switch st.Phase {
	case v1alpha1.PhaseValidating:
		return SourceNeedInventory
	case v1alpha1.PhaseQueued, v1alpha1.PhaseStoppingSource:
		return SourceNeedState
	case v1alpha1.PhaseRollingBack, v1alpha1.PhaseCleaningUp:
		if touched {
			return SourceNeedState
		}
	case v1alpha1.PhaseStarting:
		// The source must be seen off right before the target starts.
		if m.SpecInForce().Target.StartEnabled() && (st.Target == nil || st.Target.StartRequestedAt == nil) {
			return SourceNeedState
		}
	}
	return SourceNeedNothing
}
