package builders

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// Defaults of Migration.
const (
	Name         = "web01-mig"
	Namespace    = "apps"
	UID          = types.UID("7c0a4a52-0d6e-4bb4-9d0c-6f5a3b1e2a10")
	SourceURL    = "https://vcenter.example.com/sdk"
	SecretName   = "vcenter-creds"
	SourceVMName = "Web_01 (prod)"
	// DefaultTarget is the target name the controller derives from SourceVMName.
	DefaultTarget = "web-01-prod"
)

// MigrationMod changes one thing of a migration.
type MigrationMod = func(*v1alpha1.VirtualMachineMigration)

// Migration is a migration as the API server returns it right after
// creation (generation 1, empty status, no finalizer yet), changed by mods
// in order.
func Migration(mods ...MigrationMod) *v1alpha1.VirtualMachineMigration {
	m := &v1alpha1.VirtualMachineMigration{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "VirtualMachineMigration"},
		ObjectMeta: metav1.ObjectMeta{Name: Name, Namespace: Namespace, UID: UID, Generation: 1},
		Spec: v1alpha1.VirtualMachineMigrationSpec{
			Source: v1alpha1.SourceSpec{
				URL:                  SourceURL,
				CredentialsSecretRef: v1alpha1.SecretReference{Name: SecretName},
				VM:                   v1alpha1.VMSelector{Name: SourceVMName},
			},
		},
	}
	for _, mod := range mods {
		mod(m)
	}
	return m
}

// Named sets the name (and a UID derived from it, so that two named
// migrations differ).
func Named(name string) MigrationMod {
	return func(m *v1alpha1.VirtualMachineMigration) {
		m.Name = name
		m.UID = types.UID("uid-" + name)
	}
}

// InNamespace sets the namespace.
func InNamespace(ns string) MigrationMod {
	return func(m *v1alpha1.VirtualMachineMigration) { m.Namespace = ns }
}

// WithUID sets the UID.
func WithUID(uid types.UID) MigrationMod {
	return func(m *v1alpha1.VirtualMachineMigration) { m.UID = uid }
}

// WithoutUID clears the UID, as an object not yet created has none.
func WithoutUID(m *v1alpha1.VirtualMachineMigration) { m.UID = "" }

// SourceVM selects the source VM by name.
func SourceVM(name string) MigrationMod {
	return func(m *v1alpha1.VirtualMachineMigration) { m.Spec.Source.VM = v1alpha1.VMSelector{Name: name} }
}

// SourceAt sets the vSphere endpoint.
func SourceAt(url string) MigrationMod {
	return func(m *v1alpha1.VirtualMachineMigration) { m.Spec.Source.URL = url }
}

// Datacenter sets spec.source.datacenter.
func Datacenter(dc string) MigrationMod {
	return func(m *v1alpha1.VirtualMachineMigration) { m.Spec.Source.Datacenter = dc }
}

// ShutdownTimeout sets how long the guest may take to shut down.
func ShutdownTimeout(d time.Duration) MigrationMod {
	return func(m *v1alpha1.VirtualMachineMigration) {
		m.Spec.Policy.Shutdown.Timeout = &v1alpha1.Duration{Duration: d}
	}
}

// Credentials names the credentials Secret.
func Credentials(secret string) MigrationMod {
	return func(m *v1alpha1.VirtualMachineMigration) { m.Spec.Source.CredentialsSecretRef.Name = secret }
}

// WithFinalizer adds the controller's finalizer.
func WithFinalizer(m *v1alpha1.VirtualMachineMigration) {
	m.Finalizers = append(m.Finalizers, v1alpha1.FinalizerName)
}

// WithoutFinalizer removes every finalizer.
func WithoutFinalizer(m *v1alpha1.VirtualMachineMigration) { m.Finalizers = nil }

// Deleted marks the migration as being deleted a second before T0.
func Deleted(m *v1alpha1.VirtualMachineMigration) { m.DeletionTimestamp = TP(-time.Second) }

// Paused holds the migration (spec.policy.paused).
func Paused(m *v1alpha1.VirtualMachineMigration) { m.Spec.Policy.Paused = true }

// RequireApproval gates the cutover on approval.
func RequireApproval(m *v1alpha1.VirtualMachineMigration) { m.Spec.Policy.RequireApproval = true }

// Approved approves the cutover.
func Approved(m *v1alpha1.VirtualMachineMigration) { m.Spec.Policy.Approved = true }

// Insecure turns TLS verification of the source off.
func Insecure(m *v1alpha1.VirtualMachineMigration) { m.Spec.Source.InsecureSkipVerify = true }

// SkipConversion skips the guest conversion.
func SkipConversion(m *v1alpha1.VirtualMachineMigration) { m.Spec.Conversion.Skip = true }

// ConversionImage sets the migration's virt-v2v image.
func ConversionImage(image string) MigrationMod {
	return func(m *v1alpha1.VirtualMachineMigration) { m.Spec.Conversion.Image = image }
}

// Retain keeps the staging objects after success.
func Retain(m *v1alpha1.VirtualMachineMigration) {
	m.Spec.Policy.Cleanup = v1alpha1.CleanupPolicyRetain
}

// NoStart leaves the target VM halted.
func NoStart(m *v1alpha1.VirtualMachineMigration) { m.Spec.Target.Start = ptr.To(false) }

// WaitForAgent waits for the target's guest agent.
func WaitForAgent(m *v1alpha1.VirtualMachineMigration) { m.Spec.Target.WaitForGuestAgent = true }

// PowerOffMode powers the source off without asking the guest.
func PowerOffMode(m *v1alpha1.VirtualMachineMigration) {
	m.Spec.Policy.Shutdown.Mode = v1alpha1.ShutdownModePowerOff
}

// WithGeneration sets metadata.generation.
func WithGeneration(g int64) MigrationMod {
	return func(m *v1alpha1.VirtualMachineMigration) { m.Generation = g }
}

// TargetName sets spec.target.name.
func TargetName(name string) MigrationMod {
	return func(m *v1alpha1.VirtualMachineMigration) { m.Spec.Target.Name = name }
}

// RetryLimit sets spec.policy.retry.limit.
func RetryLimit(n int32) MigrationMod {
	return func(m *v1alpha1.VirtualMachineMigration) { m.Spec.Policy.Retry.Limit = ptr.To(n) }
}

// RetryDeadline sets spec.policy.retry.deadline.
func RetryDeadline(d time.Duration) MigrationMod {
	return func(m *v1alpha1.VirtualMachineMigration) {
		m.Spec.Policy.Retry.Deadline = &v1alpha1.Duration{Duration: d}
	}
}

// Networks sets the network mappings.
func Networks(maps ...v1alpha1.NetworkMapping) MigrationMod {
	return func(m *v1alpha1.VirtualMachineMigration) { m.Spec.Target.Networks = maps }
}

// PodNetwork maps a source network to the pod network.
func PodNetwork(source string) v1alpha1.NetworkMapping {
	return v1alpha1.NetworkMapping{Source: source, Type: v1alpha1.NetworkTypePod}
}

// IgnoredNetwork leaves a source network's NICs out.
func IgnoredNetwork(source string) v1alpha1.NetworkMapping {
	return v1alpha1.NetworkMapping{Source: source, Type: v1alpha1.NetworkTypeIgnore}
}

// MultusNetwork maps a source network to a Multus network.
func MultusNetwork(source, nad string) v1alpha1.NetworkMapping {
	return v1alpha1.NetworkMapping{Source: source, Type: v1alpha1.NetworkTypeMultus, MultusNetworkName: nad}
}

// DefaultStorage sets the default storage class of the target disks.
func DefaultStorage(class string) MigrationMod {
	return func(m *v1alpha1.VirtualMachineMigration) {
		m.Spec.Target.Storage.Default = &v1alpha1.StorageTarget{StorageClassName: class}
	}
}

// StagingClass sets the staging storage class.
func StagingClass(class string) MigrationMod {
	return func(m *v1alpha1.VirtualMachineMigration) { m.Spec.Staging.StorageClassName = class }
}

// WithSpec changes the spec directly; placed after Reached, the change
// differs from status.appliedSpec.
func WithSpec(f func(*v1alpha1.VirtualMachineMigrationSpec)) MigrationMod {
	return func(m *v1alpha1.VirtualMachineMigration) { f(&m.Spec) }
}

// WithStatus changes the status directly.
func WithStatus(f func(*v1alpha1.VirtualMachineMigrationStatus)) MigrationMod {
	return func(m *v1alpha1.VirtualMachineMigration) { f(&m.Status) }
}

// WithRetries sets status.retries.
func WithRetries(n int32) MigrationMod {
	return WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) { s.Retries = n })
}

// WithSourceControl changes status.sourceControl, creating it if needed.
func WithSourceControl(f func(*v1alpha1.SourceControlStatus)) MigrationMod {
	return WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
		if s.SourceControl == nil {
			s.SourceControl = &v1alpha1.SourceControlStatus{}
		}
		f(s.SourceControl)
	})
}

// InPhase sets the phase and a start time, and nothing else.
func InPhase(p v1alpha1.Phase) MigrationMod {
	return WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
		s.Phase = p
		s.StartTime = TP(-time.Hour)
	})
}
