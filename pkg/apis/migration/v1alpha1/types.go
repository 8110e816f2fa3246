package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=vmm,categories=migration
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Progress",type=string,JSONPath=`.status.progress`
// +kubebuilder:printcolumn:name="Source VM",type=string,JSONPath=`.status.sourceName`
// +kubebuilder:printcolumn:name="Target VM",type=string,JSONPath=`.status.target.name`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Progressing")].reason`,priority=1,description="why the migration is not progressing (the Progressing condition's reason), or Working"
// +kubebuilder:printcolumn:name="Last Error",type=string,JSONPath=`.status.lastError.summary`,priority=1,description="the last error's message, short (status.lastError.summary)"
// +kubebuilder:printcolumn:name="Downtime",type=string,JSONPath=`.status.downtime.duration`,priority=1,description="the outage the migration caused, once it ended (54s, 35m20s): from the source seen powered off to the target seen running (or the source seen back on); status.downtime, in seconds status.downtime.seconds"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="the migration's name must be a DNS-1123 label (at most 63 lower case letters, digits and '-'): it is carried in the labels of every object the migration creates"

// VirtualMachineMigration asks the controller to move one virtual machine
// from VMware vSphere into KubeVirt, in the migration's namespace.
type VirtualMachineMigration struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is what the user wants migrated and how.
	Spec VirtualMachineMigrationSpec `json:"spec"`
	// Status is what the controller observed and did.
	// +optional
	Status VirtualMachineMigrationStatus `json:"status,omitempty"`
}

// VirtualMachineMigrationSpec is the desired migration. Nothing but the user
// writes it.
type VirtualMachineMigrationSpec struct {
	// Source names the vSphere endpoint and the virtual machine to migrate.
	Source SourceSpec `json:"source"`
	// Target describes the KubeVirt VirtualMachine to create.
	// +optional
	// +kubebuilder:default={}
	Target TargetSpec `json:"target,omitempty"`
	// Staging describes the intermediate volumes the disks are copied to.
	// +optional
	// +kubebuilder:default={}
	Staging StagingSpec `json:"staging,omitempty"`
	// Transfer tunes how the disks are copied into staging.
	// +optional
	// +kubebuilder:default={}
	Transfer TransferSpec `json:"transfer,omitempty"`
	// Conversion describes the guest conversion with virt-v2v.
	// +optional
	Conversion ConversionSpec `json:"conversion,omitempty"`
	// ImagePullSecrets name Secrets of the migration's namespace
	// (kubernetes.io/dockerconfigjson) that the transfer, conversion and
	// image proof pods pull their images with, and that the transfer
	// attempts' ServiceAccounts carry, beside those the controller adds
	// itself (--image-pull-secret). Naming any replaces, for those pods,
	// the pull secrets of the namespace's default ServiceAccount.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
	// Policy governs cutover, retries and cleanup.
	// +optional
	// +kubebuilder:default={}
	Policy PolicySpec `json:"policy,omitempty"`
	// PlanOnly asks for a dry run: the controller validates the migration,
	// runs preflight against vSphere and the cluster, renders every object
	// the migration would create, stores that plan (status.plan names the
	// ConfigMap holding it) and stops in phase Planned, without touching
	// the source VM's power state. Setting it back to false continues into
	// a real migration.
	// +optional
	PlanOnly bool `json:"planOnly,omitempty"`
	// TTLSecondsAfterFinished deletes the migration that many seconds
	// after it finished (Succeeded or Failed; status.completionTime), as
	// Jobs do, so that old records retire on a schedule. Just before, the
	// controller records the migration's evidence (per-disk checksums,
	// times, approval) in an event on it and a line of its log, so that
	// the record survives in the cluster's event and log pipelines. The
	// deletion is the one a person would make: the migrated
	// VirtualMachine and its DataVolumes are kept; staging objects a
	// failed migration kept for inspection go. A failed migration whose
	// source VM could not be powered on again is never deleted by it, nor
	// one that found its source already migrated (reason AlreadyMigrated:
	// it did nothing, and a GitOps tool would only apply it again).
	// Unset: the controller's default (--default-ttl-after-finished), off
	// unless set; 0: as soon as it finished. It may be set or changed at
	// any time, after the migration finished too.
	// +optional
	// +kubebuilder:validation:Minimum=0
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
}

// SourceSpec names the vSphere endpoint and the virtual machine to migrate.
// +kubebuilder:validation:XValidation:rule="has(self.datacenter) == has(oldSelf.datacenter)",message="source.datacenter is immutable: it cannot be added or removed once the migration exists"
type SourceSpec struct {
	// URL of the vCenter or ESXi SDK endpoint, for example https://vcenter.example.com/sdk.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() == 'https' && url(self).getHostname() != ''",message="source.url must be an https URL with a host, for example https://vcenter.example.com/sdk"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^https://[^/]*@')",message="source.url must not carry credentials: put them in the credentials Secret"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="source.url is immutable: create a new migration to migrate from another endpoint"
	URL string `json:"url"`
	// CredentialsSecretRef names a Secret in the migration's namespace,
	// labelled migration.platform.example/vsphere-credentials=true, with
	// the keys username, password and endpoints (the hosts the credentials
	// may be sent to, "host:port" or "*.domain:port", one per line or
	// comma-separated), and optionally ca.crt (PEM) and thumbprint (SHA-1
	// or SHA-256 of the server certificate).
	CredentialsSecretRef SecretReference `json:"credentialsSecretRef"`
	// InsecureSkipVerify turns off TLS verification of the endpoint. Only for
	// tests and labs: a Warning event and condition say it is on.
	// +optional
	InsecureSkipVerify bool `json:"insecureSkipVerify,omitempty"`
	// Datacenter restricts the search to one datacenter. Empty means the
	// only datacenter, or the one a standalone ESXi host has.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="source.datacenter is immutable"
	Datacenter string `json:"datacenter,omitempty"`
	// VM selects the virtual machine by exactly one of its identities.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="source.vm is immutable: the source selection cannot change once set; create a new migration instead"
	VM VMSelector `json:"vm"`
}

// SecretReference names a Secret in the migration's namespace.
type SecretReference struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
}

// VMSelector selects one virtual machine by exactly one of its identities.
// +kubebuilder:validation:XValidation:rule="[has(self.name), has(self.inventoryPath), has(self.biosUUID), has(self.instanceUUID), has(self.moRef)].filter(x, x).size() == 1",message="source.vm must set exactly one of name, inventoryPath, biosUUID, instanceUUID or moRef"
type VMSelector struct {
	// Name of the virtual machine; it must be unique in the datacenter.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=80
	Name string `json:"name,omitempty"`
	// InventoryPath of the virtual machine, for example /dc1/vm/folder/web-01.
	// +optional
	// +kubebuilder:validation:MinLength=2
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^/.+`
	InventoryPath string `json:"inventoryPath,omitempty"`
	// BIOSUUID is the virtual machine's BIOS UUID (config.uuid).
	// +optional
	// +kubebuilder:validation:Pattern=`^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$`
	BIOSUUID string `json:"biosUUID,omitempty"`
	// InstanceUUID is the vCenter instance UUID (config.instanceUuid).
	// +optional
	// +kubebuilder:validation:Pattern=`^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$`
	InstanceUUID string `json:"instanceUUID,omitempty"`
	// MoRef is the managed object reference value, for example vm-42.
	// +optional
	// +kubebuilder:validation:Pattern=`^(vm-)?[0-9]+$`
	MoRef string `json:"moRef,omitempty"`
}

// TargetSpec describes the KubeVirt VirtualMachine to create.
type TargetSpec struct {
	// Name of the VirtualMachine. Defaults to a DNS-1123 form of the source
	// VM's name.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="target.name must be a DNS-1123 label: lower case letters, digits and '-', starting and ending with a letter or digit"
	Name string `json:"name,omitempty"`
	// Start the VirtualMachine once it is created.
	// +optional
	// +kubebuilder:default=true
	Start *bool `json:"start,omitempty"`
	// PreserveMACAddresses gives each interface its source NIC's MAC address.
	// +optional
	// +kubebuilder:default=true
	PreserveMACAddresses *bool `json:"preserveMACAddresses,omitempty"`
	// SecondCopy says that a second copy of a source VM already migrated
	// is wanted. A migration whose source VM is already the source of a
	// VirtualMachine a migration made (it carries the source's instance
	// UUID), in any namespace the controller watches, is refused before
	// anything is touched (SourceAlreadyMigrated): two copies would run
	// with the same MAC addresses on the same networks. With SecondCopy
	// the migration goes ahead, and the copy's interfaces get new MAC
	// addresses whatever preserveMACAddresses says (so preserveStaticIPs,
	// which needs the source MACs, cannot keep the guest's interface
	// names either); a preflight warning says so. The guest keeps its own
	// network configuration: check it before the copy joins the source's
	// networks.
	// +optional
	SecondCopy bool `json:"secondCopy,omitempty"`
	// PreserveStaticIPs keeps each NIC's network identity in the guest:
	// the conversion pins every source MAC address to the interface name
	// the guest gave it on VMware (a systemd .link file for Linux guests,
	// which udev applies whatever manages the network: ifupdown,
	// systemd-networkd, NetworkManager or netplan), so that the guest's
	// own static configuration applies again, and hands Windows guests'
	// static addresses to virt-v2v (--mac MAC:ip:...). It needs the
	// source MAC addresses (preserveMACAddresses). Whatever its value,
	// once the VM runs its guest agent's report is compared with the
	// addresses VMware Tools reported (condition NetworkIdentityPreserved).
	// +optional
	// +kubebuilder:default=true
	PreserveStaticIPs *bool `json:"preserveStaticIPs,omitempty"`
	// WaitForGuestAgent makes verification wait for the guest agent to connect.
	// +optional
	WaitForGuestAgent bool `json:"waitForGuestAgent,omitempty"`
	// Storage maps source disks to target storage.
	// +optional
	Storage StorageMapping `json:"storage,omitempty"`
	// Networks maps source networks to target networks. A source network
	// without a mapping fails validation.
	// +optional
	// +listType=map
	// +listMapKey=source
	// +kubebuilder:validation:MaxItems=64
	Networks []NetworkMapping `json:"networks,omitempty"`
}

// StorageMapping chooses the target storage of each disk: a per-disk entry
// wins over a per-datastore entry, which wins over the default.
type StorageMapping struct {
	// Default applies to every disk no other entry matches.
	// +optional
	Default *StorageTarget `json:"default,omitempty"`
	// Datastores maps the disks on one source datastore.
	// +optional
	// +listType=map
	// +listMapKey=datastore
	// +kubebuilder:validation:MaxItems=64
	Datastores []DatastoreStorageMapping `json:"datastores,omitempty"`
	// Disks maps one source disk, by its device key.
	// +optional
	// +listType=map
	// +listMapKey=diskKey
	// +kubebuilder:validation:MaxItems=64
	Disks []DiskStorageMapping `json:"disks,omitempty"`
}

// StorageTarget is where a disk lands.
type StorageTarget struct {
	// StorageClassName of the target volume; empty means the cluster default.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	StorageClassName string `json:"storageClassName,omitempty"`
	// VolumeMode of the target volume; empty means the storage profile's.
	// +optional
	// +kubebuilder:validation:Enum=Filesystem;Block
	VolumeMode *corev1.PersistentVolumeMode `json:"volumeMode,omitempty"`
	// AccessModes of the target volume; empty means the storage profile's.
	// +optional
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:items:Enum=ReadWriteOnce;ReadOnlyMany;ReadWriteMany;ReadWriteOncePod
	AccessModes []corev1.PersistentVolumeAccessMode `json:"accessModes,omitempty"`
}

// DatastoreStorageMapping maps the disks on one source datastore.
type DatastoreStorageMapping struct {
	// Datastore is the source datastore's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	Datastore string `json:"datastore"`
	// Target is where those disks land.
	Target StorageTarget `json:"target"`
}

// DiskStorageMapping maps one source disk.
type DiskStorageMapping struct {
	// DiskKey is the source disk's device key (status.source.disks[].key).
	// +kubebuilder:validation:Minimum=0
	DiskKey int32 `json:"diskKey"`
	// Target is where the disk lands.
	Target StorageTarget `json:"target"`
}

// NetworkType says how a source network is carried over.
// +kubebuilder:validation:Enum=Pod;Multus;Ignore
type NetworkType string

const (
	// NetworkTypePod puts the NIC on the pod network (masquerade).
	NetworkTypePod NetworkType = "Pod"
	// NetworkTypeMultus puts the NIC on a Multus network (bridge).
	NetworkTypeMultus NetworkType = "Multus"
	// NetworkTypeIgnore leaves the NIC out of the target VM.
	NetworkTypeIgnore NetworkType = "Ignore"
)

// NetworkMapping carries one source network to a target network.
// +kubebuilder:validation:XValidation:rule="self.type == 'Multus' ? has(self.multusNetworkName) : !has(self.multusNetworkName)",message="multusNetworkName is required with type Multus and not allowed otherwise"
type NetworkMapping struct {
	// Source is the source network or port group name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	Source string `json:"source"`
	// Type of the target network.
	Type NetworkType `json:"type"`
	// MultusNetworkName is the NetworkAttachmentDefinition, as name or namespace/name.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?/)?[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	MultusNetworkName string `json:"multusNetworkName,omitempty"`
}

// StagingSpec describes the intermediate volumes that hold the raw disk
// images between transfer and import.
type StagingSpec struct {
	// StorageClassName of the staging volumes; empty means the cluster default.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	StorageClassName string `json:"storageClassName,omitempty"`
	// SizeOverheadPercent is added to each disk's capacity to size its
	// staging volume (filesystem metadata, the image file's own overhead).
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	SizeOverheadPercent *int32 `json:"sizeOverheadPercent,omitempty"`
}

// TransferSpec tunes how the disks are copied into staging.
type TransferSpec struct {
	// AllocatedOnly copies only the areas of each disk that vSphere
	// reports in use, where it can: the source VM is powered off with
	// changed block tracking (CBT) on, vSphere answers the query, and its
	// map covers at least the space the datastore reports in use. The rest
	// of the staged image is left as holes, which read as zeros. Otherwise,
	// or when false, every byte of every disk is copied; status.disks[]
	// says which way each disk was copied, and why not allocated-only.
	// +optional
	// +kubebuilder:default=true
	AllocatedOnly *bool `json:"allocatedOnly,omitempty"`
}

// ConversionSpec describes the guest conversion.
type ConversionSpec struct {
	// Skip the conversion (the guest already has virtio drivers).
	// +optional
	Skip bool `json:"skip,omitempty"`
	// Image of the virt-v2v conversion container; empty means the
	// controller's default (its --conversion-image). Any other image must
	// match one of the patterns of the controller's
	// --allowed-conversion-images (path.Match, e.g.
	// registry.example.com/v2v/*): the conversion runs with access to the
	// staged disks, so a migration naming an image that matches none is
	// refused before its source is touched (ConversionImageNotAllowed).
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^[^\s]+$`
	Image string `json:"image,omitempty"`
}

// ShutdownMode says how the source VM is stopped.
// +kubebuilder:validation:Enum=GuestThenPowerOff;PowerOff
type ShutdownMode string

const (
	// ShutdownModeGuestThenPowerOff asks the guest to shut down through
	// VMware Tools, and powers the VM off when the timeout passes.
	ShutdownModeGuestThenPowerOff ShutdownMode = "GuestThenPowerOff"
	// ShutdownModePowerOff powers the VM off at once.
	ShutdownModePowerOff ShutdownMode = "PowerOff"
)

// CleanupPolicy says what happens to staging objects after success.
// +kubebuilder:validation:Enum=Delete;Retain
type CleanupPolicy string

const (
	// CleanupPolicyDelete deletes staging objects once the migration succeeded.
	CleanupPolicyDelete CleanupPolicy = "Delete"
	// CleanupPolicyRetain keeps them until the migration is deleted.
	CleanupPolicyRetain CleanupPolicy = "Retain"
)

// PolicySpec governs cutover, retries and cleanup.
type PolicySpec struct {
	// Shutdown says how the source VM is stopped.
	// +optional
	// +kubebuilder:default={}
	Shutdown ShutdownPolicy `json:"shutdown,omitempty"`
	// Retry bounds the retries of failed steps.
	// +optional
	// +kubebuilder:default={}
	Retry RetryPolicy `json:"retry,omitempty"`
	// Cleanup says what happens to staging objects after success. On
	// failure they are always kept for inspection until the migration is deleted.
	// +optional
	// +kubebuilder:default=Delete
	Cleanup CleanupPolicy `json:"cleanup,omitempty"`
	// RequireApproval holds the migration before the source VM is stopped
	// until Approved is true.
	// +optional
	RequireApproval bool `json:"requireApproval,omitempty"`
	// Approved lets a migration that requires approval stop the source VM.
	// +optional
	Approved bool `json:"approved,omitempty"`
	// Paused holds the migration at its current checkpoint: no new action is
	// taken until it is false again. Running Jobs are not interrupted.
	// +optional
	Paused bool `json:"paused,omitempty"`
	// StallTimeout is how long without any progress before the Stalled
	// condition is set.
	// +optional
	// +kubebuilder:default="30m"
	StallTimeout *Duration `json:"stallTimeout,omitempty"`
	// StartTimeout is how long the new VM may take to run (and, when asked,
	// to connect its guest agent) before verification fails.
	// +optional
	// +kubebuilder:default="10m"
	StartTimeout *Duration `json:"startTimeout,omitempty"`
}

// ShutdownPolicy says how the source VM is stopped.
type ShutdownPolicy struct {
	// Mode of the shutdown.
	// +optional
	// +kubebuilder:default=GuestThenPowerOff
	Mode ShutdownMode `json:"mode,omitempty"`
	// Timeout of the guest shutdown before the VM is powered off.
	// +optional
	// +kubebuilder:default="5m"
	Timeout *Duration `json:"timeout,omitempty"`
}

// RetryPolicy bounds the retries of failed steps.
type RetryPolicy struct {
	// Limit is how many times a failed step is retried, over the whole
	// migration, before it fails.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Limit *int32 `json:"limit,omitempty"`
	// Deadline is the wall-clock time the migration may take from its start
	// before a failing step is no longer retried.
	// +optional
	// +kubebuilder:default="24h"
	Deadline *Duration `json:"deadline,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// VirtualMachineMigrationList is a list of VirtualMachineMigrations.
type VirtualMachineMigrationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the migrations.
	Items []VirtualMachineMigration `json:"items"`
}
