package steps

import (
	"context"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/preflight"
	"platform.example/vm-migration/pkg/statemachine"
)

// SourceStep is everything the controller does on the vSphere side
// (package steps/source implements it). Observe never changes anything;
// each action is a single idempotent call whose intent the state machine
// already recorded in status.
type SourceStep interface {
	// Observe reads what the decision needs of the source VM. vSphere sends
	// no events, so this is the one observation read live. Failures are
	// returned classified inside the observation, never as a panic.
	Observe(ctx context.Context, m *v1alpha1.VirtualMachineMigration, need statemachine.SourceNeed) statemachine.SourceObservation
	// ShutdownGuest asks the guest OS to shut down.
	ShutdownGuest(ctx context.Context, m *v1alpha1.VirtualMachineMigration) error
	// PowerOff powers the VM off; an already-off VM is success.
	PowerOff(ctx context.Context, m *v1alpha1.VirtualMachineMigration) error
	// PowerOn powers the VM on; an already-on VM is success.
	PowerOn(ctx context.Context, m *v1alpha1.VirtualMachineMigration) error
	// RemoveSnapshot removes a snapshot by name; a missing one is success.
	RemoveSnapshot(ctx context.Context, m *v1alpha1.VirtualMachineMigration, name string) error
}

// PipelineStep observes, creates and deletes the Kubernetes-side objects
// of the data path (package steps/pipeline implements it). Every create
// tolerates AlreadyExists for an object of this migration, and names are
// deterministic (package naming) and recorded in status.
type PipelineStep interface {
	// Observe fills in the children, the Jobs with their pods and progress,
	// the target DataVolumes, VM and VMI, from the informer caches only.
	Observe(m *v1alpha1.VirtualMachineMigration, obs *statemachine.Observation) error
	// ReadTargetInstance reads the target's VirtualMachineInstance from
	// the API server itself, not the cache, right before a rolled-back
	// source may be powered on again (statemachine.NeedsLiveTargetInstance).
	// It changes nothing; a failed read is returned inside, classified.
	ReadTargetInstance(ctx context.Context, m *v1alpha1.VirtualMachineMigration) *statemachine.LiveVMIObservation
	// CreateStagingClaims creates the missing staging volumes.
	CreateStagingClaims(ctx context.Context, m *v1alpha1.VirtualMachineMigration) error
	// CreateTransferJob creates the transfer Job of an attempt.
	CreateTransferJob(ctx context.Context, m *v1alpha1.VirtualMachineMigration, attempt int32) error
	// CreateConversionJob creates the conversion Job of an attempt.
	CreateConversionJob(ctx context.Context, m *v1alpha1.VirtualMachineMigration, attempt int32) error
	// CreateVerificationJob creates the Job of a verification attempt,
	// which reads the target disks back before the VM is created.
	CreateVerificationJob(ctx context.Context, m *v1alpha1.VirtualMachineMigration, attempt int32) error
	// CreateDataVolumes creates the missing target DataVolumes.
	CreateDataVolumes(ctx context.Context, m *v1alpha1.VirtualMachineMigration) error
	// CreateVM creates the target VirtualMachine, halted.
	CreateVM(ctx context.Context, m *v1alpha1.VirtualMachineMigration) error
	// AdoptDataVolumes makes the target VM the controller owner of its DataVolumes.
	AdoptDataVolumes(ctx context.Context, m *v1alpha1.VirtualMachineMigration) error
	// SetRunStrategy sets the target VM's run strategy (Always or Halted).
	SetRunStrategy(ctx context.Context, m *v1alpha1.VirtualMachineMigration, strategy string) error
	// ReleaseTarget hands the target VM a deleted migration keeps, its
	// DataVolumes and their claims over: the migration's labels removed,
	// an annotation naming the migration.
	ReleaseTarget(ctx context.Context, m *v1alpha1.VirtualMachineMigration) error
	// CreatePlan stores the dry-run plan of every object the migration
	// would create (spec.planOnly).
	CreatePlan(ctx context.Context, m *v1alpha1.VirtualMachineMigration) error
	// ObserveCluster asks the API server what the caches cannot tell (the
	// dry run of the migration's objects before the stop, why its pods
	// were refused), fills obs with it and returns what the preflight
	// rules read of it. inv is the source's inventory in Validating. It
	// changes nothing in the cluster.
	ObserveCluster(ctx context.Context, m *v1alpha1.VirtualMachineMigration, inv *v1alpha1.SourceInventory, obs *statemachine.Observation) (preflight.ClusterFacts, error)
	// CreateProofJob starts the proof that a component's image runs in
	// the migration's namespace (component: transfer or conversion),
	// unless a migration of the same proof key started it: the proof Job
	// is shared, and no migration's.
	CreateProofJob(ctx context.Context, m *v1alpha1.VirtualMachineMigration, component string) error
	// DeleteStaleProof deletes stale shared proof Jobs, each only when it
	// carries the proof labels, with a UID precondition.
	DeleteStaleProof(ctx context.Context, m *v1alpha1.VirtualMachineMigration, objects []statemachine.ObjectRef) error
	// Delete deletes observed objects of this migration, each with a UID
	// precondition; it refuses any ref that does not carry the migration's UID.
	Delete(ctx context.Context, m *v1alpha1.VirtualMachineMigration, objects []statemachine.ObjectRef) error
}
