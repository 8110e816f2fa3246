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
	// AnnotationSourceVM, AnnotationSourceUUID and AnnotationSourceServer
	// tie the migrated VirtualMachine back to its source.
	AnnotationSourceVM     = "migration.platform.example/source-vm"
	AnnotationSourceUUID   = "migration.platform.example/source-bios-uuid"
	AnnotationSourceServer = "migration.platform.example/source-server"
	// AnnotationMigratedBy names the migration (namespace/name) a target
	// VM, its DataVolumes and their claims came from, once the migration
	// was deleted and they were handed over, its labels removed.
	AnnotationMigratedBy = "migration.platform.example/migrated-by"
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
