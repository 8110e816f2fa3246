package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Phase is the checkpoint the controller is working toward now: each phase
// names a desired state, not a step that ran.
// +kubebuilder:validation:Enum=Pending;Validating;Planned;AwaitingApproval;Queued;StoppingSource;TransferringDisks;Converting;Importing;CreatingVM;Starting;CleaningUp;RollingBack;Cancelling;Succeeded;Failed
type Phase string

const (
	// PhasePending: the finalizer is set and the status initialised.
	PhasePending Phase = "Pending"
	// PhaseValidating: the source VM is found and inventoried, and every
	// preflight rule passes.
	PhaseValidating Phase = "Validating"
	// PhasePlanned: a migration with spec.planOnly validated, ran preflight
	// and stored the plan of every object it would create (status.plan);
	// it stays here, the source untouched, until spec.planOnly is false.
	PhasePlanned Phase = "Planned"
	// PhaseAwaitingApproval: a person approved the cutover.
	PhaseAwaitingApproval Phase = "AwaitingApproval"
	// PhaseQueued: a transfer slot is free on the source host and datastores.
	PhaseQueued Phase = "Queued"
	// PhaseStoppingSource: the source VM is powered off.
	PhaseStoppingSource Phase = "StoppingSource"
	// PhaseTransferringDisks: every disk's bytes are in its staging volume.
	PhaseTransferringDisks Phase = "TransferringDisks"
	// PhaseConverting: the guest is converted for KubeVirt.
	PhaseConverting Phase = "Converting"
	// PhaseImporting: the target disks (DataVolumes) are populated.
	PhaseImporting Phase = "Importing"
	// PhaseCreatingVM: the KubeVirt VirtualMachine exists.
	PhaseCreatingVM Phase = "CreatingVM"
	// PhaseStarting: the VM runs (and its guest agent connected, when asked).
	PhaseStarting Phase = "Starting"
	// PhaseCleaningUp: staging objects are gone (per the cleanup policy).
	PhaseCleaningUp Phase = "CleaningUp"
	// PhaseRollingBack: after a failure, the source is back as it was found.
	PhaseRollingBack Phase = "RollingBack"
	// PhaseCancelling: after deletion, children are gone and the source is
	// back as it was found.
	PhaseCancelling Phase = "Cancelling"
	// PhaseSucceeded is terminal: the VM was migrated.
	PhaseSucceeded Phase = "Succeeded"
	// PhaseFailed is terminal: the migration stopped; status.lastError says where and why.
	PhaseFailed Phase = "Failed"
)

// Phases returns every phase in the order a migration moves through them
// (the failure and cancellation paths, then the two terminal phases last):
// the order summaries and gauges list them in.
func Phases() []Phase {
	return []Phase{PhasePending, PhaseValidating, PhasePlanned, PhaseAwaitingApproval, PhaseQueued, PhaseStoppingSource,
		PhaseTransferringDisks, PhaseConverting, PhaseImporting, PhaseCreatingVM, PhaseStarting, PhaseCleaningUp,
		PhaseRollingBack, PhaseCancelling, PhaseSucceeded, PhaseFailed}
}

// VirtualMachineMigrationStatus is what the controller observed and did.
type VirtualMachineMigrationStatus struct {
	// ObservedGeneration is the spec generation the status reflects.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase is the checkpoint the controller is working toward.
	// +optional
	Phase Phase `json:"phase,omitempty"`
	// Progress is the migration's overall progress, as "45%": a share of
	// the whole migration, which never goes back as its phases follow one
	// another. The transfer's bytes take it from 0% to 70%, where the
	// conversion holds it; the import goes from 80% to 95%, where it stays
	// while the VM is created and started; the target running makes it
	// 100%. A transfer made again does not take it back. Empty before the
	// transfer, and once the migration fails (rolling back or Failed: no
	// copy runs, and status.disks keep how far each disk got).
	// +optional
	Progress string `json:"progress,omitempty"`
	// SourceName is the source VM's name as tables show it (kubectl get's
	// Source VM column): status.source.name, shortened in the middle to
	// 40 characters when longer (a VM name with escaped characters runs to
	// hundreds).
	// +optional
	SourceName string `json:"sourceName,omitempty"`
	// Conditions: Ready, Progressing, Succeeded and Failed (set when the
	// migration ends: the ones to wait on), Stalled, Paused,
	// ApprovalRequired, SpecChangeIgnored, InsecureConnection,
	// SourceRestoreFailed, TargetKept.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// StartTime is when the controller first saw the migration.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// CompletionTime is when the migration reached a terminal phase.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// PhaseStartTime is when the current phase was entered.
	// +optional
	PhaseStartTime *metav1.Time `json:"phaseStartTime,omitempty"`
	// LastProgressTime is when progress was last seen (for the Stalled condition).
	// +optional
	LastProgressTime *metav1.Time `json:"lastProgressTime,omitempty"`
	// AppliedSpec is the spec the controller committed to when it began to
	// stop the source. Later changes to it (other than policy.paused,
	// policy.retry and policy.cleanup) cannot apply, and are reported in the
	// SpecChangeIgnored condition.
	// +optional
	AppliedSpec *VirtualMachineMigrationSpec `json:"appliedSpec,omitempty"`
	// Source is the observed inventory of the source VM.
	// +optional
	Source *SourceInventory `json:"source,omitempty"`
	// Preflight lists the findings of validation.
	// +optional
	// +listType=atomic
	Preflight []PreflightFinding `json:"preflight,omitempty"`
	// SourceControl records what the controller did to the source VM.
	// +optional
	SourceControl *SourceControlStatus `json:"sourceControl,omitempty"`
	// Disks holds per-disk progress and evidence, in source order.
	// +optional
	// +listType=map
	// +listMapKey=key
	// +kubebuilder:validation:MaxItems=256
	Disks []DiskStatus `json:"disks,omitempty"`
	// Transfer records the transfer Job.
	// +optional
	Transfer *JobStatus `json:"transfer,omitempty"`
	// Conversion records the conversion Job and its inspection.
	// +optional
	Conversion *ConversionStatus `json:"conversion,omitempty"`
	// Verification records the Job that read every target disk before the
	// VM started, to check its bytes are the converted ones.
	// +optional
	Verification *JobStatus `json:"verification,omitempty"`
	// Target references the created VirtualMachine.
	// +optional
	Target *TargetStatus `json:"target,omitempty"`
	// AlreadyMigrated is set when the migration found its target
	// VirtualMachine already there, made from the same source VM by an
	// earlier migration that succeeded (a manifest applied again, by a
	// GitOps tool after its time to live deleted it): the migration then
	// ended Succeeded at once with reason AlreadyMigrated, having touched
	// nothing. Its time to live does not delete it.
	// +optional
	AlreadyMigrated *MigratedCopy `json:"alreadyMigrated,omitempty"`
	// Downtime is the outage the migration caused: from the source VM
	// seen powered off (by the controller's request) to the target VM
	// seen running, or to the source seen back on after a failure or a
	// cancellation; with the time from one checkpoint of the outage to
	// the next. Unset while the source was not stopped by the migration.
	// +optional
	Downtime *DowntimeStatus `json:"downtime,omitempty"`
	// Evidence lists, per checkpoint reached, what proved it.
	// +optional
	// +listType=map
	// +listMapKey=phase
	Evidence []CheckpointEvidence `json:"evidence,omitempty"`
	// Retries is how many retries the migration has spent.
	// +optional
	Retries int32 `json:"retries,omitempty"`
	// LastError is the last failure seen, with the phase it happened in.
	// +optional
	LastError *MigrationError `json:"lastError,omitempty"`
	// PodWaiting says why the pod of the Job the current phase waits for
	// (transfer, conversion or verification; in Validating, an image
	// proof's, which waits for a node) has not started, while that is for
	// a reason a person must fix (an image it cannot pull, no node,
	// admission, a container config error); unset once it started, and
	// once the phase moved on. kubectl vmm get and list show it.
	// +optional
	PodWaiting *PodWaiting `json:"podWaiting,omitempty"`
	// Plan records the dry-run plan stored for spec.planOnly.
	// +optional
	Plan *PlanStatus `json:"plan,omitempty"`
	// DryRun records the API server's answer to the server-side dry run
	// (dryRun=All) of every object the migration creates, sent in
	// Validating and again right before the source is stopped.
	// +optional
	DryRun *DryRunStatus `json:"dryRun,omitempty"`
	// ImageProofs record, per image the migration's pods run, the short
	// pod that ran the image's self-check in the target namespace before
	// the source was touched.
	// +optional
	// +listType=map
	// +listMapKey=component
	// +kubebuilder:validation:MaxItems=4
	ImageProofs []ImageProof `json:"imageProofs,omitempty"`
}

// DryRunOutcome is the API server's answer to the dry run of one object.
// +kubebuilder:validation:Enum=Accepted;Warned;Refused;Unchecked
type DryRunOutcome string

const (
	// DryRunAccepted: the API server (its validation, admission plugins
	// and webhooks) would create the object.
	DryRunAccepted DryRunOutcome = "Accepted"
	// DryRunWarned: it would create it, with warnings (for a Job, that
	// PodSecurity would refuse its pods where the namespace enforces it).
	DryRunWarned DryRunOutcome = "Warned"
	// DryRunRefused: it would refuse it; the message quotes why.
	DryRunRefused DryRunOutcome = "Refused"
	// DryRunUnchecked: the dry run cannot tell, as the object depends on
	// another the dry run does not create (the message says which).
	DryRunUnchecked DryRunOutcome = "Unchecked"
)

// DryRunStatus is the outcome of one dry run of the migration's objects.
type DryRunStatus struct {
	// ObservedGeneration is the spec generation the objects were rendered from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase is the phase that asked for it: Validating, or Queued right
	// before the source is stopped.
	// +optional
	Phase Phase `json:"phase,omitempty"`
	// CheckedAt is when the API server answered.
	CheckedAt metav1.Time `json:"checkedAt"`
	// Refused counts the objects the API server refused.
	// +optional
	Refused int32 `json:"refused,omitempty"`
	// Objects are the objects, in creation order, with the answer to each.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	Objects []DryRunObject `json:"objects,omitempty"`
}

// DryRunObject is the answer to the dry run of one object.
type DryRunObject struct {
	// APIVersion of the object, for example v1 or kubevirt.io/v1.
	APIVersion string `json:"apiVersion"`
	// Kind of the object.
	Kind string `json:"kind"`
	// Name of the object, in the migration's namespace.
	Name string `json:"name"`
	// Outcome is the API server's answer.
	Outcome DryRunOutcome `json:"outcome"`
	// Message quotes the API server: its refusal, or its warnings.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Message string `json:"message,omitempty"`
}

// ProofResult says whether an image proved it runs.
// +kubebuilder:validation:Enum=Passed;Failed
type ProofResult string

const (
	// ProofPassed: the image's pod started and its self-check succeeded.
	ProofPassed ProofResult = "Passed"
	// ProofFailed: the pod was refused, did not start, or its self-check
	// failed; the reason and message say why in the cluster's words.
	ProofFailed ProofResult = "Failed"
)

// ImageProof is the outcome of one image's proof pod.
type ImageProof struct {
	// Component is the component whose image was proven: transfer or conversion.
	Component string `json:"component"`
	// Image is the image reference the pod ran.
	Image string `json:"image"`
	// Key identifies what was proven: the namespace, the image, and the
	// pull secrets, security context, placement and runtime class the pod
	// ran with (a hash). A result is reused for this key for a bounded time.
	// +optional
	Key string `json:"key,omitempty"`
	// JobName is the proof Job that ran it (deleted once read).
	// +optional
	JobName string `json:"jobName,omitempty"`
	// CheckedAt is when the result was seen.
	CheckedAt metav1.Time `json:"checkedAt"`
	// Result is Passed or Failed.
	Result ProofResult `json:"result"`
	// Reason of a failure, as the cluster names it: ErrImagePull,
	// ImagePullBackOff, ErrImageNeverPull, CreateContainerConfigError,
	// FailedCreate (admission refused the pod), Unschedulable, or
	// SelfCheckFailed, NotStarted.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Reason string `json:"reason,omitempty"`
	// Message is the cluster's own words for a failure.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Message string `json:"message,omitempty"`
	// Output is what the image's self-check printed: vm-transfer's
	// version, the conversion image's capabilities (one JSON line).
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Output string `json:"output,omitempty"`
}

// Keys of the plan ConfigMap (status.plan.configMapName).
const (
	// PlanKeyObjects holds a multi-document YAML of every object the
	// migration would create, in creation order: staging
	// PersistentVolumeClaims, transfer ConfigMap and Job, conversion
	// ConfigMap and Job, DataVolumes, VirtualMachine.
	PlanKeyObjects = "objects.yaml"
	// PlanKeyDomain holds the conversion's libvirt domain XML.
	PlanKeyDomain = "domain.xml"
	// PlanKeyIndex holds the JSON list of the planned objects
	// ([]PlannedObject), which the controller copies into status.plan.
	PlanKeyIndex = "index.json"
)

// PlanStatus records a stored dry-run plan.
type PlanStatus struct {
	// ConfigMapName is the ConfigMap, in the migration's namespace and
	// owned by it, that holds the plan under the keys objects.yaml and
	// domain.xml. Empty once a successful run's cleanup deleted it with
	// the staging objects: renderedAt and objects still say what the plan
	// was.
	// +optional
	ConfigMapName string `json:"configMapName,omitempty"`
	// RenderedAt is when the plan was stored, once it is.
	// +optional
	RenderedAt *metav1.Time `json:"renderedAt,omitempty"`
	// Objects lists what the migration would create, in creation order.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	Objects []PlannedObject `json:"objects,omitempty"`
}

// PlannedObject names one object a migration would create.
type PlannedObject struct {
	// APIVersion of the object, for example v1 or kubevirt.io/v1.
	APIVersion string `json:"apiVersion"`
	// Kind of the object, for example PersistentVolumeClaim.
	Kind string `json:"kind"`
	// Name of the object, in the migration's namespace.
	Name string `json:"name"`
}

// SourceInventory is the observed inventory of the source VM.
type SourceInventory struct {
	// Name of the VM.
	// +kubebuilder:validation:MaxLength=512
	Name string `json:"name"`
	// MoRef is the VM's managed object reference value.
	// +kubebuilder:validation:MaxLength=128
	MoRef string `json:"moRef"`
	// InventoryPath of the VM.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	InventoryPath string `json:"inventoryPath,omitempty"`
	// BIOSUUID (config.uuid).
	// +optional
	// +kubebuilder:validation:MaxLength=128
	BIOSUUID string `json:"biosUUID,omitempty"`
	// InstanceUUID (config.instanceUuid).
	// +optional
	// +kubebuilder:validation:MaxLength=128
	InstanceUUID string `json:"instanceUUID,omitempty"`
	// Server is the vCenter or ESXi endpoint's instance UUID, tying the VM to it.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Server string `json:"server,omitempty"`
	// Datacenter holding the VM.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Datacenter string `json:"datacenter,omitempty"`
	// Host is the ESXi host running the VM (name).
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Host string `json:"host,omitempty"`
	// HostMoRef is the host's managed object reference value.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	HostMoRef string `json:"hostMoRef,omitempty"`
	// HostUUID is the host's hardware UUID (summary.hardware.uuid): the
	// same whether the host is reached through its vCenter or directly, so
	// the transfer limits and the claim on the source VM meet across both.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	HostUUID string `json:"hostUUID,omitempty"`
	// CPU topology.
	CPU CPUTopology `json:"cpu"`
	// MemoryMiB is the configured memory.
	MemoryMiB int64 `json:"memoryMiB"`
	// Firmware is BIOS or EFI.
	// +kubebuilder:validation:Enum=BIOS;EFI
	Firmware Firmware `json:"firmware"`
	// SecureBoot is on (EFI only).
	// +optional
	SecureBoot bool `json:"secureBoot,omitempty"`
	// GuestID is the configured guest OS identifier, for example rhel9_64Guest.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	GuestID string `json:"guestID,omitempty"`
	// GuestFamily is the guest OS family (linuxGuest, windowsGuest...).
	// +optional
	// +kubebuilder:validation:MaxLength=128
	GuestFamily string `json:"guestFamily,omitempty"`
	// GuestFullName is the guest OS's full name.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	GuestFullName string `json:"guestFullName,omitempty"`
	// DetectedGuestID is the guest OS identifier VMware Tools report from
	// the running guest (guest.guestId); empty when they report none.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	DetectedGuestID string `json:"detectedGuestID,omitempty"`
	// DetectedGuestFullName is the guest OS's full name as VMware Tools
	// report it (guest.guestFullName).
	// +optional
	// +kubebuilder:validation:MaxLength=256
	DetectedGuestFullName string `json:"detectedGuestFullName,omitempty"`
	// ToolsRunningStatus of VMware Tools (guestToolsRunning, guestToolsNotRunning...).
	// +optional
	// +kubebuilder:validation:MaxLength=128
	ToolsRunningStatus string `json:"toolsRunningStatus,omitempty"`
	// PowerState when inventoried (poweredOn, poweredOff, suspended).
	// +optional
	// +kubebuilder:validation:MaxLength=128
	PowerState string `json:"powerState,omitempty"`
	// Snapshots present on the VM, by name; past MaxSnapshots (64), the
	// last name kept says how many more there are.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=512
	Snapshots []string `json:"snapshots,omitempty"`
	// CBTEnabled says whether changed block tracking is on.
	// +optional
	CBTEnabled bool `json:"cbtEnabled,omitempty"`
	// Encrypted says whether the VM is encrypted.
	// +optional
	Encrypted bool `json:"encrypted,omitempty"`
	// VTPM says whether the VM has a virtual TPM.
	// +optional
	VTPM bool `json:"vTPM,omitempty"`
	// Disks in source order (controller, bus, unit); a VM with more than
	// MaxDisks (256: ESXi 8's 4 PVSCSI controllers of 64 targets) is refused.
	// +optional
	// +listType=map
	// +listMapKey=key
	// +kubebuilder:validation:MaxItems=256
	Disks []SourceDisk `json:"disks,omitempty"`
	// NICs in source order; a VM with more than MaxNICs (16; ESXi takes
	// 10) is refused.
	// +optional
	// +listType=map
	// +listMapKey=key
	// +kubebuilder:validation:MaxItems=16
	NICs []SourceNIC `json:"nics,omitempty"`
	// GuestNetworkRejected lists, quoted, what VMware Tools reported of
	// the guest's network that is not an address the controller would
	// write anywhere: an address with a zone, whitespace or control
	// characters, or a prefix length beyond its bits; a gateway or DNS
	// server that is not an address. VMware Tools report what the guest
	// says: none of it reaches the NICs' guest information, and preflight
	// refuses the migration (GuestAddressRejected).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=256
	GuestNetworkRejected []string `json:"guestNetworkRejected,omitempty"`
	// InventoriedAt is when the inventory was read.
	// +optional
	InventoriedAt *metav1.Time `json:"inventoriedAt,omitempty"`
}

// Firmware of a VM.
type Firmware string

const (
	// FirmwareBIOS is legacy BIOS.
	FirmwareBIOS Firmware = "BIOS"
	// FirmwareEFI is UEFI.
	FirmwareEFI Firmware = "EFI"
)

// CPUTopology is the VM's CPU layout.
type CPUTopology struct {
	// Sockets = numCPU / coresPerSocket.
	Sockets int32 `json:"sockets"`
	// CoresPerSocket as configured.
	CoresPerSocket int32 `json:"coresPerSocket"`
}

// SourceDisk is one virtual disk of the source VM.
type SourceDisk struct {
	// Key is the device key.
	Key int32 `json:"key"`
	// Label is the device label, for example "Hard disk 1".
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Label string `json:"label,omitempty"`
	// CapacityBytes of the disk.
	CapacityBytes int64 `json:"capacityBytes"`
	// FileName is the backing file, "[datastore] dir/vm.vmdk".
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	FileName string `json:"fileName,omitempty"`
	// Datastore holding the backing file.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Datastore string `json:"datastore,omitempty"`
	// DatastoreURL is that datastore's URL (summary.url, for example
	// ds:///vmfs/volumes/<uuid>/): its identity across endpoints, where
	// its name (every standalone host has a datastore1) is not.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	DatastoreURL string `json:"datastoreURL,omitempty"`
	// Provisioning is Thin, Thick (lazy zeroed) or EagerZeroedThick.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Provisioning string `json:"provisioning,omitempty"`
	// ControllerType is the bus: scsi, sata, nvme or ide.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	ControllerType string `json:"controllerType,omitempty"`
	// ControllerModel is the controller's model (pvscsi, lsilogic, ahci...).
	// +optional
	// +kubebuilder:validation:MaxLength=128
	ControllerModel string `json:"controllerModel,omitempty"`
	// BusNumber of the controller.
	// +optional
	BusNumber int32 `json:"busNumber"`
	// UnitNumber on the controller.
	// +optional
	UnitNumber int32 `json:"unitNumber"`
	// DiskMode: persistent, independent_persistent, independent_nonpersistent...
	// +optional
	// +kubebuilder:validation:MaxLength=128
	DiskMode string `json:"diskMode,omitempty"`
	// Sharing: sharingNone or sharingMultiWriter.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Sharing string `json:"sharing,omitempty"`
	// RDM says the disk is a raw device mapping.
	// +optional
	RDM bool `json:"rdm,omitempty"`
	// SnapshotDelta says the disk's current backing is a snapshot delta.
	// +optional
	SnapshotDelta bool `json:"snapshotDelta,omitempty"`
	// ChangeID is the CBT change ID, when CBT is on.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	ChangeID string `json:"changeID,omitempty"`
}

// SourceNIC is one network adapter of the source VM.
type SourceNIC struct {
	// Key is the device key.
	Key int32 `json:"key"`
	// Label is the device label, for example "Network adapter 1".
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Label string `json:"label,omitempty"`
	// MAC address.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	MAC string `json:"mac,omitempty"`
	// Network or port group name.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Network string `json:"network,omitempty"`
	// AdapterType: vmxnet3, e1000, e1000e...
	// +optional
	// +kubebuilder:validation:MaxLength=128
	AdapterType string `json:"adapterType,omitempty"`
	// PCISlotNumber is the NIC's PCI slot (its device's slotInfo), from
	// which a Linux guest on VMware names the interface (ens<slot>:
	// ens192, ens224...).
	// +optional
	PCISlotNumber *int32 `json:"pciSlotNumber,omitempty"`
	// Guest is what VMware Tools reported of the NIC from inside the
	// running guest (guest.net and guest.ipStack): its addresses, default
	// gateway and DNS servers. Unset when the guest reported nothing for
	// it (VMware Tools not running, or the VM off when inventoried).
	// +optional
	Guest *GuestNICInfo `json:"guest,omitempty"`
}

// GuestNICInfo is a NIC as VMware Tools saw it inside the guest.
type GuestNICInfo struct {
	// IPAddresses of the NIC, with prefix length and origin.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	IPAddresses []GuestIPAddress `json:"ipAddresses,omitempty"`
	// Gateway is the default route's gateway that lies on one of the
	// NIC's subnets, in its canonical form.
	// +optional
	// +kubebuilder:validation:MaxLength=45
	// +kubebuilder:validation:Pattern=`^[0-9a-f.:]+$`
	Gateway string `json:"gateway,omitempty"`
	// DNSServers the guest resolves names with over this NIC (the NIC's
	// own, else the guest's), in their canonical form.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=45
	// +kubebuilder:validation:items:Pattern=`^[0-9a-f.:]+$`
	DNSServers []string `json:"dnsServers,omitempty"`
}

// GuestIPAddress is one address of a guest's NIC.
type GuestIPAddress struct {
	// IP address, IPv4 or IPv6, in its canonical form (lower-case hex,
	// zeros compressed) and without a zone.
	// +kubebuilder:validation:MaxLength=45
	// +kubebuilder:validation:Pattern=`^[0-9a-f.:]+$`
	IP string `json:"ip"`
	// PrefixLength of the address's subnet; 0 when VMware Tools did not say.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=128
	PrefixLength int32 `json:"prefixLength,omitempty"`
	// Origin as VMware Tools reports it: manual (configured statically),
	// dhcp, linklayer, random or other (also for an origin it names
	// otherwise); empty when it did not say.
	// +optional
	// +kubebuilder:validation:Enum=manual;dhcp;linklayer;random;other
	Origin string `json:"origin,omitempty"`
}

// Severity of a preflight finding.
// +kubebuilder:validation:Enum=Blocking;Warning
type Severity string

const (
	// SeverityBlocking stops the migration.
	SeverityBlocking Severity = "Blocking"
	// SeverityWarning is reported and does not stop it.
	SeverityWarning Severity = "Warning"
)

// PreflightFinding is one result of a preflight rule.
type PreflightFinding struct {
	// Reason is the rule's name, as a CamelCase constant.
	Reason string `json:"reason"`
	// Severity says whether it blocks the migration.
	Severity Severity `json:"severity"`
	// Message says what is wrong and what to do.
	// +kubebuilder:validation:MaxLength=4096
	Message string `json:"message"`
}

// SourceControlStatus records what the controller did to the source VM, the
// intent written before each call and the result after.
type SourceControlStatus struct {
	// OriginalPowerState is the power state found before the controller acted.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	OriginalPowerState string `json:"originalPowerState,omitempty"`
	// ShutdownRequestedAt is when a guest shutdown was requested.
	// +optional
	ShutdownRequestedAt *metav1.Time `json:"shutdownRequestedAt,omitempty"`
	// PowerOffRequestedAt is when a hard power-off was requested.
	// +optional
	PowerOffRequestedAt *metav1.Time `json:"powerOffRequestedAt,omitempty"`
	// PowerOffTask is the vSphere task of the last power-off requested
	// (its managed object reference), watched until it ends: the source
	// is not powered on again, nor counted restored, while it may still run.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	PowerOffTask string `json:"powerOffTask,omitempty"`
	// PoweredOffAt is when the VM was seen powered off.
	// +optional
	PoweredOffAt *metav1.Time `json:"poweredOffAt,omitempty"`
	// RestoreRequestedAt is when power-on was requested to restore the source.
	// +optional
	RestoreRequestedAt *metav1.Time `json:"restoreRequestedAt,omitempty"`
	// RestoredAt is when the source was seen back in its original state.
	// +optional
	RestoredAt *metav1.Time `json:"restoredAt,omitempty"`
	// SourceGoneAt is when the source VM was found to no longer exist: the
	// one failure that ends a restore.
	// +optional
	SourceGoneAt *metav1.Time `json:"sourceGoneAt,omitempty"`
	// RestoreAbandonedAt is when the controller gave up restoring the
	// source because the migration's namespace is being deleted and
	// nothing can let it reach vSphere any more (its credentials Secret is
	// gone and a Terminating namespace accepts no new one): the source VM
	// stays as it is (powered off), an event, a log line and the metric
	// vm_migration_source_restore_abandoned say so, and the finalizer is
	// released so that the namespace can go.
	// +optional
	RestoreAbandonedAt *metav1.Time `json:"restoreAbandonedAt,omitempty"`
	// RestoreAbandonedReason is why the restore was given up.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	RestoreAbandonedReason string `json:"restoreAbandonedReason,omitempty"`
	// Snapshots the controller made, with intent and result.
	// +optional
	// +listType=map
	// +listMapKey=name
	Snapshots []SnapshotRecord `json:"snapshots,omitempty"`
}

// SnapshotRecord is one snapshot the controller made on the source.
type SnapshotRecord struct {
	// Name of the snapshot (deterministic: the migration's UID in it).
	Name string `json:"name"`
	// MoRef of the snapshot, once created.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	MoRef string `json:"moRef,omitempty"`
	// RequestedAt is when the creation was requested.
	// +optional
	RequestedAt *metav1.Time `json:"requestedAt,omitempty"`
	// RemovedAt is when the snapshot was seen removed.
	// +optional
	RemovedAt *metav1.Time `json:"removedAt,omitempty"`
}

// DiskStatus is one disk's progress and evidence.
type DiskStatus struct {
	// Key is the source disk's device key.
	Key int32 `json:"key"`
	// Name is the disk's name on the target VM (disk-0, disk-1...).
	Name string `json:"name"`
	// StagingClaim is the name of the PersistentVolumeClaim the transfer
	// writes the disk into. It is the DataVolume's name (dataVolume) when
	// the disk is written in place: the claim becomes the VM's disk,
	// adopted by the DataVolume, with no copy.
	// +optional
	StagingClaim string `json:"stagingClaim,omitempty"`
	// CapacityBytes of the source disk.
	CapacityBytes int64 `json:"capacityBytes"`
	// BytesTransferred so far.
	// +optional
	BytesTransferred int64 `json:"bytesTransferred,omitempty"`
	// RateBytesPerSecond is the recent transfer rate.
	// +optional
	RateBytesPerSecond int64 `json:"rateBytesPerSecond,omitempty"`
	// ETASeconds is the estimated time left for the transfer.
	// +optional
	ETASeconds *int64 `json:"etaSeconds,omitempty"`
	// SHA256 of the transferred image, once complete: the root of its
	// block tree where ChecksumScheme says so, else the SHA-256 of the
	// whole image.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	SHA256 string `json:"sha256,omitempty"`
	// ChecksumScheme is how every checksum of this disk (sha256 and
	// checksums) is computed: sha256-tree-1MiB (SHA-256 of each MiB of
	// the image, and of the list of their hex digests: see
	// docs/operators/safety.md to recompute it), or empty for the
	// SHA-256 of the whole image (a transfer of an earlier version).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	ChecksumScheme string `json:"checksumScheme,omitempty"`
	// TransferredAt is when the transfer of this disk was verified complete.
	// +optional
	TransferredAt *metav1.Time `json:"transferredAt,omitempty"`
	// AllocatedOnly says only the areas vSphere reported in use were
	// copied; the rest of the staged image is holes (zeros).
	// +optional
	AllocatedOnly bool `json:"allocatedOnly,omitempty"`
	// AllocatedBytes is how much of the disk vSphere reported in use (the
	// sum of its allocated areas), when it mapped them.
	// +optional
	AllocatedBytes *int64 `json:"allocatedBytes,omitempty"`
	// BytesRead is how many bytes the transfer read from the source for
	// this disk, over its attempts (an attempt killed mid-copy loses the
	// count of what it read after its last checkpoint, at most a chunk
	// per stream).
	// +optional
	BytesRead int64 `json:"bytesRead,omitempty"`
	// FullCopyReason says why the whole disk was copied rather than only
	// its allocated areas.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	FullCopyReason string `json:"fullCopyReason,omitempty"`
	// Checksums continue the disk's checksum chain past the transfer's
	// (sha256): the converted image's, and the target's read back before
	// the VM started.
	// +optional
	Checksums *DiskChecksums `json:"checksums,omitempty"`
	// DataVolume is the target DataVolume's name.
	// +optional
	DataVolume string `json:"dataVolume,omitempty"`
	// TargetClaimUID is the UID of the claim the transfer wrote this disk
	// into (a disk written in place), recorded when the transfer
	// completed: the checksum chain holds for that claim only, not for
	// another of the same name (one CDI made blank after it was deleted,
	// say).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	TargetClaimUID types.UID `json:"targetClaimUID,omitempty"`
	// ImportPhase is the DataVolume's phase.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	ImportPhase string `json:"importPhase,omitempty"`
	// ImportProgress is the DataVolume's progress, as "45.20%".
	// +optional
	// +kubebuilder:validation:MaxLength=128
	ImportProgress string `json:"importProgress,omitempty"`
}

// DiskChecksums are a disk's checksums past the transfer: every byte is
// accounted for from the source (status.disks[].sha256) to the target.
type DiskChecksums struct {
	// Converted is the SHA-256 of the staged image once converted (hex):
	// the conversion Job's, or, for a disk its report had no room for,
	// the verification Job's; the transferred one when the conversion was
	// skipped.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Converted string `json:"converted,omitempty"`
	// ConvertedBytes is the staged image's size once converted.
	// +optional
	ConvertedBytes int64 `json:"convertedBytes,omitempty"`
	// RehashedBytes is how many bytes the conversion read again to give
	// Converted: the blocks its writes touched (its qcow2 overlay's
	// clusters), or the whole disk where the image had no block tree (a
	// block device).
	// +optional
	RehashedBytes int64 `json:"rehashedBytes,omitempty"`
	// Target is the SHA-256 of the first capacityBytes of the target
	// claim's image (hex), read by the verification Job before the VM
	// started; it must equal Converted.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Target string `json:"target,omitempty"`
	// TargetBytes is the size of the target claim's image (its file, or
	// its block device), at least capacityBytes.
	// +optional
	TargetBytes int64 `json:"targetBytes,omitempty"`
	// VerifiedAt is when Target was seen equal to Converted: two reads of
	// the disk compared (Compared ConvertedAndTarget), or the target
	// being the very claim the conversion hashed as it left it (Compared
	// ConvertedInPlace). Unset when only one read exists (ReadOnce).
	// +optional
	VerifiedAt *metav1.Time `json:"verifiedAt,omitempty"`
	// Compared says what the chain compared for this disk past the
	// transfer: ConvertedAndTarget (the conversion's checksum of the
	// converted image and a later read of the target claim, equal),
	// ConvertedInPlace (the target is the claim the transfer wrote and the
	// conversion hashed, bound under its DataVolume, unread since), or
	// ReadOnce (the conversion hashed no image of this disk, a disk past
	// the ones its report has room for; it re-hashes the blocks it wrote
	// of a file image and a Block claim's device whole: the target was
	// read once after the conversion, Converted and Target are that one
	// read, and nothing compared it with anything).
	// +optional
	// +kubebuilder:validation:Enum=ConvertedAndTarget;ConvertedInPlace;ReadOnce
	Compared ChainComparison `json:"compared,omitempty"`
	// Mismatch is, once the target was read and is not the converted
	// image, the first range of bytes where they differ, when the block
	// tree stored beside the image could tell (its root the converted
	// one).
	// +optional
	Mismatch *ByteRange `json:"mismatch,omitempty"`
}

// ByteRange is a range of a disk's bytes.
type ByteRange struct {
	// Offset of its first byte.
	// +kubebuilder:validation:Minimum=0
	Offset int64 `json:"offset"`
	// Length in bytes.
	// +kubebuilder:validation:Minimum=0
	Length int64 `json:"length"`
}

// ChainComparison is what a disk's checksum chain compared past the
// transfer (DiskChecksums.Compared).
type ChainComparison string

// What the chain compared.
const (
	// ComparedConvertedAndTarget: the converted image's checksum and a
	// later read of the target claim, equal.
	ComparedConvertedAndTarget ChainComparison = "ConvertedAndTarget"
	// ComparedConvertedInPlace: the target is the claim the conversion
	// hashed, unread since.
	ComparedConvertedInPlace ChainComparison = "ConvertedInPlace"
	// ComparedReadOnce: one read of the target after the conversion,
	// compared with nothing.
	ComparedReadOnce ChainComparison = "ReadOnce"
)

// JobStatus records a Job the controller ran.
type JobStatus struct {
	// JobName of the current attempt.
	JobName string `json:"jobName"`
	// Attempt number, from 1.
	Attempt int32 `json:"attempt"`
	// CompletedAt is when the Job succeeded.
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// CreatedAt is when this attempt's Job was created, recorded once the
	// controller saw it: what it read, it read after that (a read is
	// dated by when it began), and a Job of the attempt that was seen and
	// is gone before its result vanished rather than never ran.
	// +optional
	CreatedAt *metav1.Time `json:"createdAt,omitempty"`
}

// ConversionStatus records the conversion.
type ConversionStatus struct {
	JobStatus `json:",inline"`
	// ConfigMapName holds the rendered libvirt domain XML.
	// +optional
	ConfigMapName string `json:"configMapName,omitempty"`
	// OperatingSystem virt-v2v inspected, for example "rhel 9.4".
	// +optional
	// +kubebuilder:validation:MaxLength=256
	OperatingSystem string `json:"operatingSystem,omitempty"`
	// Warnings are the warnings virt-v2v printed during a conversion that
	// succeeded, in order, for example "could not determine a way to
	// update the configuration of Grub2": the guest was converted, but
	// something in it may need a look before or after the first boot.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=512
	Warnings []string `json:"warnings,omitempty"`
	// Skipped says the conversion was skipped by the spec.
	// +optional
	Skipped bool `json:"skipped,omitempty"`
	// Interfaces says, per source NIC the conversion was asked to pin
	// (spec.target.preserveStaticIPs), which interface name it keeps in
	// the guest, or why it could not be pinned.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Interfaces []InterfacePin `json:"interfaces,omitempty"`
}

// Sources of a pinned interface name (InterfacePin.Source).
const (
	// PinSourceAddress: the guest's network configuration that holds the
	// NIC's static address names the interface.
	PinSourceAddress = "Address"
	// PinSourcePCISlot: VMware's name for the NIC's PCI slot
	// (ens<slot>), which the guest's network configuration uses.
	PinSourcePCISlot = "PCISlot"
)

// InterfacePin is what the conversion found and did for one source NIC
// in the guest's network configuration.
type InterfacePin struct {
	// MAC address of the source NIC, lower case with colons.
	// +kubebuilder:validation:Pattern=`^([0-9a-f]{2}:){5}[0-9a-f]{2}$`
	MAC string `json:"mac"`
	// Name the guest's network configuration gives the NIC; empty when
	// none of it could be tied to the NIC. An interface name as systemd
	// takes it: printable ASCII but for space, '%', '/' and ':'.
	// +optional
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[!-$&-.0-9;-~]+$`
	Name string `json:"name,omitempty"`
	// Source says how Name was found: Address or PCISlot.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Source string `json:"source,omitempty"`
	// Pinned says a systemd .link file in the guest now gives the
	// interface with this MAC address the name Name, whatever its new bus
	// (spec.target.preserveStaticIPs).
	// +optional
	Pinned bool `json:"pinned,omitempty"`
	// StaticAddresses are the NIC's addresses that the guest's network
	// configuration sets statically: the ones the network identity check
	// expects to find again.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=45
	// +kubebuilder:validation:items:Pattern=`^[0-9a-f.:]+$`
	StaticAddresses []string `json:"staticAddresses,omitempty"`
	// GuestUnreadable says the conversion could not read the guest's
	// network configuration (Message says why): whether the NIC's
	// addresses are static or leased is not known.
	// +optional
	GuestUnreadable bool `json:"guestUnreadable,omitempty"`
	// Message says why the NIC was not pinned.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Message string `json:"message,omitempty"`
}

// MigratedCopy is a VirtualMachine that a migration made from a source
// VM, as the controller found it: in a namespace it watches, carrying
// the source's identity (AnnotationSourceInstanceUUID, or for a VM
// handed over by an earlier version, its BIOS UUID and server) and the
// mark of the migration that made it (its labels, or
// AnnotationMigratedBy).
type MigratedCopy struct {
	// Namespace of the VirtualMachine.
	// +kubebuilder:validation:MaxLength=253
	Namespace string `json:"namespace"`
	// Name of the VirtualMachine.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// MigratedBy names the migration that made it (namespace/name), as
	// the VirtualMachine says.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	MigratedBy string `json:"migratedBy,omitempty"`
	// Outcome is how that migration ended, as far as the VirtualMachine
	// or the migration says: Succeeded, Failed, Cancelled, InProgress;
	// empty when unknown (handed over by an earlier version).
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Outcome string `json:"outcome,omitempty"`
	// Identity is what of the source VM it carries, for a person: its
	// instance UUID, or its BIOS UUID and server.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Identity string `json:"identity,omitempty"`
}

// TargetStatus references the created VirtualMachine.
type TargetStatus struct {
	// Name of the VirtualMachine (in the migration's namespace).
	Name string `json:"name"`
	// UID of the VirtualMachine, once created.
	// +optional
	UID types.UID `json:"uid,omitempty"`
	// StartRequestedAt is when the controller asked the VirtualMachine to
	// run. From then on it holds migrated data: a cancellation or a failure
	// halts it and keeps it and its DataVolumes.
	// +optional
	StartRequestedAt *metav1.Time `json:"startRequestedAt,omitempty"`
	// VMIPhase is the VirtualMachineInstance's phase.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	VMIPhase string `json:"vmiPhase,omitempty"`
	// AgentConnected says the guest agent connected.
	// +optional
	AgentConnected bool `json:"agentConnected,omitempty"`
	// Interfaces are the VirtualMachineInstance's interfaces as KubeVirt
	// reported them (status.interfaces, from the domain and the guest
	// agent) when the network identity was checked.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Interfaces []TargetInterface `json:"interfaces,omitempty"`
}

// TargetInterface is one interface of the running target VM, as KubeVirt
// reports it.
type TargetInterface struct {
	// Name of the VM's interface (and network), net-<source NIC index>.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name,omitempty"`
	// MAC address.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	MAC string `json:"mac,omitempty"`
	// InterfaceName inside the guest, as its guest agent reports it.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	InterfaceName string `json:"interfaceName,omitempty"`
	// IPAddresses as KubeVirt reports them: the guest agent's, or, on
	// the pod network, the pod's.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=256
	IPAddresses []string `json:"ipAddresses,omitempty"`
	// InfoSource is where KubeVirt took the data from: domain,
	// guest-agent, multus-status, comma-separated.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	InfoSource string `json:"infoSource,omitempty"`
}

// DowntimeStatus is the outage a migration caused, read off its
// checkpoints: every time is one a checkpoint recorded, so the status
// changes only when one is reached.
type DowntimeStatus struct {
	// SourceStoppedAt is when the source VM was seen powered off after
	// the controller asked it to stop: the outage begins.
	SourceStoppedAt metav1.Time `json:"sourceStoppedAt"`
	// TargetRunningAt is when the target VM was seen running (with its
	// guest agent connected and its network identity checked, where the
	// spec asks for them): the outage ends. Unset while it does not run,
	// and for a VM left halted (spec.target.start false), whose outage
	// ends when someone starts it.
	// +optional
	TargetRunningAt *metav1.Time `json:"targetRunningAt,omitempty"`
	// SourceRestoredAt is when, after a failure or a cancellation, the
	// source VM was seen back in its original power state: the outage
	// ends there instead.
	// +optional
	SourceRestoredAt *metav1.Time `json:"sourceRestoredAt,omitempty"`
	// Seconds is the whole outage, once it ended (TargetRunningAt or
	// SourceRestoredAt minus SourceStoppedAt).
	// +optional
	// +kubebuilder:validation:Minimum=0
	Seconds *int64 `json:"seconds,omitempty"`
	// Duration is Seconds as a person reads it ("54s", "35m20s",
	// "1h2m"), set with it: kubectl get -o wide's Downtime column, which
	// shows what kubectl vmm list -o wide's DOWNTIME does. Seconds is the
	// field for machines.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Duration string `json:"duration,omitempty"`
	// Phases is the time, in outage order, from one checkpoint of the
	// outage to the next, by the phase whose checkpoint ended it:
	// TransferringDisks counts from the source seen powered off
	// (SourceStoppedAt) to every disk transferred, Converting from there
	// to the guest converted, and so on to Starting (the target seen
	// running). A phase appears once its checkpoint is
	// reached; a phase gone through twice (a transfer again after a
	// failed conversion) counts until its last checkpoint.
	// +optional
	// +listType=map
	// +listMapKey=phase
	// +kubebuilder:validation:MaxItems=8
	Phases []PhaseDowntime `json:"phases,omitempty"`
}

// PhaseDowntime is the time one phase of the outage took.
type PhaseDowntime struct {
	// Phase whose checkpoint ended this part of the outage.
	Phase Phase `json:"phase"`
	// Seconds from the previous checkpoint of the outage (the source seen
	// powered off, for the first) to this one.
	// +kubebuilder:validation:Minimum=0
	Seconds int64 `json:"seconds"`
}

// CheckpointEvidence is what proved a checkpoint was reached.
type CheckpointEvidence struct {
	// Phase whose desired state was observed.
	Phase Phase `json:"phase"`
	// ReachedAt is when it was observed.
	ReachedAt metav1.Time `json:"reachedAt"`
	// Observed says what was seen, for a person.
	// +kubebuilder:validation:MaxLength=4096
	Observed string `json:"observed"`
}

// MigrationError is a failure, with where it happened.
type MigrationError struct {
	// Phase the failure happened in.
	Phase Phase `json:"phase"`
	// Reason is a CamelCase constant.
	// +kubebuilder:validation:MaxLength=128
	Reason string `json:"reason"`
	// Message for a person.
	// +kubebuilder:validation:MaxLength=4096
	Message string `json:"message"`
	// Summary is the message's short form, for tables (the Last Error
	// column of kubectl get -o wide and kubectl vmm list -o wide): its
	// start, cut at a word and ended with "..." when longer than 80
	// characters.
	// +optional
	// +kubebuilder:validation:MaxLength=80
	Summary string `json:"summary,omitempty"`
	// Time of the failure.
	Time metav1.Time `json:"time"`
}

// PodWaiting is why a pod of the migration has not started, in the
// cluster's words.
type PodWaiting struct {
	// Job whose pod has not started.
	Job string `json:"job"`
	// Reason as the cluster names it: ErrImagePull, ImagePullBackOff,
	// ErrImageNeverPull, InvalidImageName, CreateContainerConfigError,
	// CreateContainerError, Unschedulable, FailedCreate.
	// +kubebuilder:validation:MaxLength=128
	Reason string `json:"reason"`
	// Message is the kubelet's, the scheduler's or the admission's.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// Since is when the controller first saw this Job's pod not started
	// for such a reason; it stays while the reason changes (a pull that
	// fails goes back and forth between ErrImagePull and ImagePullBackOff).
	Since metav1.Time `json:"since"`
	// AttemptFailsAt is when the attempt counts as failed if the pod has
	// not started by then (the controller's --pod-start-timeout after the
	// Job was created); a new attempt follows while the retry budget lasts.
	// For an image proof's pod, when the proof fails (--image-proof-timeout
	// after its Job was created), which refuses the migration with its
	// source untouched.
	// +optional
	AttemptFailsAt *metav1.Time `json:"attemptFailsAt,omitempty"`
}
