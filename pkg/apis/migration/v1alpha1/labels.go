package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Labels the controller puts on every object it creates for a migration
// (staging volumes, Jobs, ConfigMaps, DataVolumes, the target VM and its
// template), so that it finds them again and maps their events back to the
// migration.
const (
	// LabelMigrationName holds the migration's name.
	LabelMigrationName = "migration.platform.example/migration"
	// LabelMigrationUID holds the migration's UID: an object without it,
	// or with another UID, is not this migration's. The image proofs'
	// objects, shared by the migrations of a namespace, carry it empty:
	// the controller caches them with its own objects, and they are no
	// migration's.
	LabelMigrationUID = "migration.platform.example/migration-uid"
	// LabelComponent says which step made the object (staging, transfer,
	// conversion, import, verification, vm, plan).
	LabelComponent = "migration.platform.example/component"
	// LabelVSphereCredentials marks a Secret the controller may use as a
	// migration's vSphere credentials: a Secret must carry it with the
	// value "true" to be used (and the controller caches no other Secret),
	// so a user who may create migrations cannot make the controller send
	// an unrelated Secret of the namespace to a host of their choosing.
	LabelVSphereCredentials = "migration.platform.example/vsphere-credentials"
	// AnnotationSourceVM, AnnotationSourceUUID, AnnotationSourceInstanceUUID
	// and AnnotationSourceServer tie the migrated VirtualMachine back to
	// its source: its name, its BIOS UUID, its vCenter instance UUID (the
	// identity a migration of the same source is found by) and its
	// server's UUID.
	AnnotationSourceVM           = "migration.platform.example/source-vm"
	AnnotationSourceUUID         = "migration.platform.example/source-bios-uuid"
	AnnotationSourceInstanceUUID = "migration.platform.example/source-instance-uuid"
	AnnotationSourceServer       = "migration.platform.example/source-server"
	// AnnotationMigratedBy names the migration (namespace/name) a target
	// VM, its DataVolumes and their claims came from, once the migration
	// was deleted and they were handed over, its labels removed.
	AnnotationMigratedBy = "migration.platform.example/migrated-by"
	// AnnotationOutcome says, beside AnnotationMigratedBy, how that
	// migration ended: OutcomeSucceeded, OutcomeFailed (a target kept
	// because it had been started) or OutcomeCancelled (deleted before
	// it ended, its started target kept). A VM handed over by an earlier
	// version of the controller has none.
	AnnotationOutcome = "migration.platform.example/outcome"
)

// Values of AnnotationOutcome (and of MigratedCopy.Outcome).
const (
	OutcomeSucceeded = "Succeeded"
	OutcomeFailed    = "Failed"
	OutcomeCancelled = "Cancelled"
	// OutcomeInProgress: the migration that made the VM still runs (its
	// labels are still on the VM). Never an annotation's value.
	OutcomeInProgress = "InProgress"
)

// Values of LabelComponent: which step made a child.
const (
	// ComponentStaging marks the staging volumes.
	ComponentStaging = "staging"
	// ComponentTransfer marks a transfer attempt's Job, ConfigMaps,
	// ServiceAccount, Role and RoleBinding.
	ComponentTransfer = "transfer"
	// ComponentConversion marks a conversion attempt's Job and ConfigMap.
	ComponentConversion = "conversion"
	// ComponentImport marks the target DataVolumes (and the claims CDI
	// makes for them, which get the DataVolume's labels).
	ComponentImport = "import"
	// ComponentDisk marks the claims the transfer writes the VM's disks
	// into, which the target DataVolumes adopt (the one-pass data path).
	ComponentDisk = "disk"
	// ComponentVerification marks a verification attempt's Job, which
	// reads the target disks before the VM starts.
	ComponentVerification = "verification"
	// ComponentVM marks the target VirtualMachine.
	ComponentVM = "vm"
	// ComponentPlan marks the ConfigMap holding a dry-run plan.
	ComponentPlan = "plan"
	// ComponentProof marks an image proof's Job (and ServiceAccount): a
	// short pod that runs an image's self-check before the source stops,
	// shared by every migration of its namespace and proof key, owned by
	// none of them and removed by its TTL.
	ComponentProof = "proof"
)

// LabelProofOf says, on an image proof's objects, which component's image
// it proves (ComponentTransfer or ComponentConversion).
const LabelProofOf = "migration.platform.example/proof-of"

// LabelProofKey holds, on an image proof's objects, its key: a hash of
// the namespace and the shape of the pod it proves.
const LabelProofKey = "migration.platform.example/proof-key"

// MigrationUIDOf is the value of an object's LabelMigrationUID label: the
// UID of the migration that made it, or "" for an object no migration made.
func MigrationUIDOf(o metav1.Object) types.UID {
	return types.UID(o.GetLabels()[LabelMigrationUID])
}
