package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/utils/clock"
	kubevirtv1 "kubevirt.io/api/core/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	cdiclient "platform.example/vm-migration/pkg/generated/cdi/clientset/versioned"
	kvclient "platform.example/vm-migration/pkg/generated/kubevirt/clientset/versioned"
	"platform.example/vm-migration/pkg/steps"
)

// DefaultConversionTimeout bounds a conversion Job's run
// (activeDeadlineSeconds): a hung libguestfs appliance fails the attempt
// instead of holding the migration forever.
const DefaultConversionTimeout = 4 * time.Hour

// Config holds what the rendered objects need beyond the migration.
type Config struct {
	// TransferImage runs the vm-transfer command (the controller's image).
	TransferImage string
	// TransferCommand is the transfer command's path in TransferImage;
	// empty means DefaultTransferCommand.
	TransferCommand string
	// ConversionImage is the default virt-v2v image, used when
	// spec.conversion.image is empty.
	ConversionImage string
	// ImagePullPolicy of both Jobs; empty means the cluster default.
	ImagePullPolicy corev1.PullPolicy
	// TransferProgress gives each transfer attempt a live progress channel
	// (package steps/transfer): a progress ConfigMap, and a ServiceAccount
	// whose Role may only get and patch it, which the pod runs as with its
	// token mounted. Off, the pod mounts no token and the transfer's
	// progress is only known when it ends (from its termination message).
	// On, the controller must be allowed to create ServiceAccounts, Roles
	// and RoleBindings, and to patch ConfigMaps (a Role cannot grant more
	// than its creator holds).
	TransferProgress bool
	// TransferResources of the transfer container; nil means defaults.
	TransferResources *corev1.ResourceRequirements
	// TransferStreams is how many Range connections the transfer reads each
	// disk with (vm-transfer --streams); 0 or 1 means one. The controller
	// derives it from a per-host connection budget (wire.StreamsPerDisk).
	TransferStreams int
	// ConversionResources of the conversion container; nil means
	// DefaultConversionResources.
	ConversionResources *corev1.ResourceRequirements
	// ConversionApplianceMiB is libguestfs' appliance memory
	// (LIBGUESTFS_MEMSIZE) in MiB; virt-v2v runs its helper VM with twice
	// that. Zero means DefaultConversionApplianceMiB.
	ConversionApplianceMiB int64
	// ConversionKVM requests /dev/kvm (devices.kubevirt.io/kvm) for the
	// conversion: only schedulable where KubeVirt's device plugin offers
	// it. The conversion uses KVM only if the appliance boots under it.
	ConversionKVM bool
	// ConversionRuntimeClass is the RuntimeClass of the conversion pods
	// (empty: the cluster's default): one that offers /dev/kvm (a test
	// node's "kvm"). Named, the conversion probes KVM as with
	// ConversionKVM; unnamed and without ConversionKVM it runs under TCG.
	ConversionRuntimeClass string
	// ConversionSeccompProfile replaces RuntimeDefault for the conversion
	// pod, for images whose libguestfs runs passt, which needs
	// unshare(CLONE_NEWUSER): a Localhost profile allowing it.
	ConversionSeccompProfile *corev1.SeccompProfile
	// ConversionTimeout bounds a conversion run; zero means DefaultConversionTimeout.
	ConversionTimeout time.Duration
	// ImagePullSecrets are Secrets (by name, in each migration's
	// namespace) every transfer, conversion and proof pod, and every
	// transfer attempt's ServiceAccount, pulls its image with, beside
	// the migration's own spec.imagePullSecrets.
	ImagePullSecrets []string
	// PodIdentity is the user, group and fsGroup of those pods; nil means
	// DefaultPodIdentity.
	PodIdentity *PodIdentity
	// DryRun sends every object a migration creates to the API server
	// with dryRun=All in Validating and right before the stop.
	DryRun bool
	// ClusterFacts reads what the informer caches cannot tell: why the
	// API server refused a Job's pod (the Job's FailedCreate events,
	// listed while it has no pod), the PodSecurity level the namespace
	// enforces and whether KubeVirt gives its launcher pods a seccomp
	// profile (the namespace and the KubeVirt resource, read once a
	// minute in Validating).
	ClusterFacts bool
	// ImageProofs runs, in Validating, a short pod per image in the
	// migration's namespace, shaped as the pods that will run it, with
	// the image's self-check.
	ImageProofs bool
	// ProofTimeout bounds a proof pod's run (its Job's active deadline);
	// zero means DefaultProofTimeout.
	ProofTimeout time.Duration
	// ProofTTL is how long a proof's result serves the migrations of a
	// namespace that run the same image in pods of the same shape; zero
	// means DefaultProofTTL.
	ProofTTL time.Duration
}

// Step implements steps.PipelineStep: it observes its children through
// the informer caches and creates and deletes them through the API server.
type Step struct {
	// Kube creates and deletes staging volumes, ConfigMaps, Jobs and the
	// per-attempt access objects.
	Kube kubernetes.Interface
	// KubeVirt creates, patches and deletes the target VirtualMachine.
	KubeVirt kvclient.Interface
	// CDI creates, patches and deletes the target DataVolumes.
	CDI cdiclient.Interface
	// Listers are the caches every observation reads.
	Listers Listers
	// StorageClasses is the cluster's storage classes (the controller's
	// cache): which is the default, for the target claims of a mapping
	// that names no class. Nil: listed from the API server when needed.
	StorageClasses storagelisters.StorageClassLister
	// Config of the rendered objects.
	Config Config
	// Clock stamps the results the step keeps (proofs, dry runs); nil
	// means the real clock.
	Clock clock.PassiveClock

	// What the step remembers between reconciles: the refusals of Jobs'
	// pods (their events), the image proofs' results, the dry runs, what
	// the cluster says of KubeVirt's launcher pods, of the Multus
	// networks and CDI's StorageProfiles.
	refusals        refusals
	proofs          proofCache
	dryRuns         dryRunCache
	launcher        launcherCache
	networkDefs     networkDefinitionCache
	storageProfiles storageProfileCache
}

// now is the step's clock's time.
func (s *Step) now() time.Time {
	if s.Clock == nil {
		return time.Now()
	}
	return s.Clock.Now()
}

var _ steps.PipelineStep = (*Step)(nil)

// CreateStagingClaims creates the claim the transfer writes into of every
// disk that has none: the target claim of a disk written in place (in the
// modes its storage mapping or StorageProfile gives), the staging volume
// of the clone path. It does not wait for them to bind.
func (s *Step) CreateStagingClaims(ctx context.Context, m *v1alpha1.VirtualMachineMigration) error {
	defaults, err := s.claimDefaults(ctx, m)
	if err != nil {
		return err
	}
	claims, err := RenderStagingClaims(m, defaults)
	if err != nil {
		return fmt.Errorf("rendering staging volumes: %w", err)
	}
	for _, pvc := range claims {
		if err := createIfAbsent(ctx, m, "staging volume", s.Kube.CoreV1().PersistentVolumeClaims(m.Namespace), pvc); err != nil {
			return err
		}
	}
	return nil
}

// CreateTransferJob creates the job spec ConfigMap and the transfer Job of
// an attempt, and before them the attempt's progress access when the
// progress channel is on. Each claim is written as its volume mode says
// (stagingBlockClaims): the image file of a Filesystem claim, the device
// of a Block one.
func (s *Step) CreateTransferJob(ctx context.Context, m *v1alpha1.VirtualMachineMigration, attempt int32) error {
	if attempt < 1 {
		return fmt.Errorf("transfer attempt %d: attempts count from 1", attempt)
	}
	block, err := s.stagingBlockClaims(ctx, m)
	if err != nil {
		return err
	}
	cm, err := RenderTransferConfigMap(m, attempt, block)
	if err != nil {
		return fmt.Errorf("rendering the transfer job spec: %w", err)
	}
	job, err := RenderTransferJob(m, attempt, s.Config, block)
	if err != nil {
		return fmt.Errorf("rendering the transfer job: %w", err)
	}
	if s.Config.TransferProgress {
		if err := s.createProgressAccess(ctx, m, attempt); err != nil {
			return err
		}
	}
	return s.createJob(ctx, m, cm, job)
}

// CreateConversionJob creates the domain ConfigMap and the conversion Job
// of an attempt, each claim attached as its volume mode says
// (stagingBlockClaims).
func (s *Step) CreateConversionJob(ctx context.Context, m *v1alpha1.VirtualMachineMigration, attempt int32) error {
	if attempt < 1 {
		return fmt.Errorf("conversion attempt %d: attempts count from 1", attempt)
	}
	block, err := s.stagingBlockClaims(ctx, m)
	if err != nil {
		return err
	}
	cm, err := RenderConversionConfigMap(m, attempt, block)
	if err != nil {
		return fmt.Errorf("rendering the conversion domain: %w", err)
	}
	job, err := RenderConversionJob(m, attempt, s.Config, block)
	if err != nil {
		return fmt.Errorf("rendering the conversion job: %w", err)
	}
	return s.createJob(ctx, m, cm, job)
}

// createProgressAccess creates the progress ConfigMap, ServiceAccount,
// Role and RoleBinding of a transfer attempt.
func (s *Step) createProgressAccess(ctx context.Context, m *v1alpha1.VirtualMachineMigration, attempt int32) error {
	a, err := renderAccess(m, attempt, s.Config)
	if err != nil {
		return err
	}
	ns := m.Namespace
	if err := createIfAbsent(ctx, m, "config map", s.Kube.CoreV1().ConfigMaps(ns), a.ConfigMap); err != nil {
		return err
	}
	if err := createIfAbsent(ctx, m, "service account", s.Kube.CoreV1().ServiceAccounts(ns), a.ServiceAccount); err != nil {
		return err
	}
	if err := createIfAbsent(ctx, m, "role", s.Kube.RbacV1().Roles(ns), a.Role); err != nil {
		return err
	}
	return createIfAbsent(ctx, m, "role binding", s.Kube.RbacV1().RoleBindings(ns), a.RoleBinding)
}

// createJob creates a Job's ConfigMap, then the Job.
func (s *Step) createJob(ctx context.Context, m *v1alpha1.VirtualMachineMigration, cm *corev1.ConfigMap, job *batchv1.Job) error {
	if err := createIfAbsent(ctx, m, "config map", s.Kube.CoreV1().ConfigMaps(m.Namespace), cm); err != nil {
		return err
	}
	return createIfAbsent(ctx, m, "job", s.Kube.BatchV1().Jobs(m.Namespace), job)
}

// CreateDataVolumes creates the target DataVolumes that do not exist;
// those of disks written in place adopt the migration's claims as the
// cache has them.
func (s *Step) CreateDataVolumes(ctx context.Context, m *v1alpha1.VirtualMachineMigration) error {
	dvs, err := RenderDataVolumes(m, s.targetClaims(m))
	if err != nil {
		return fmt.Errorf("rendering data volumes: %w", err)
	}
	for _, dv := range dvs {
		if err := createIfAbsent(ctx, m, "data volume", s.CDI.CdiV1beta1().DataVolumes(m.Namespace), dv); err != nil {
			return err
		}
	}
	return nil
}

// CreateVM creates the target VirtualMachine, halted.
func (s *Step) CreateVM(ctx context.Context, m *v1alpha1.VirtualMachineMigration) error {
	vm, err := RenderVirtualMachine(m)
	if err != nil {
		return fmt.Errorf("rendering the virtual machine: %w", err)
	}
	return createIfAbsent(ctx, m, "virtual machine", s.KubeVirt.KubevirtV1().VirtualMachines(m.Namespace), vm)
}

// ourVM reads the target VM from the cache and checks it is this migration's.
func (s *Step) ourVM(ctx context.Context, m *v1alpha1.VirtualMachineMigration) (*kubevirtv1.VirtualMachine, error) {
	name, err := targetName(m)
	if err != nil {
		return nil, err
	}
	vm, err := s.Listers.VMs.VirtualMachines(m.Namespace).Get(name)
	if err != nil {
		return nil, fmt.Errorf("reading virtual machine %s/%s: %w", m.Namespace, name, err)
	}
	if !ours(vm, m.UID) {
		return nil, fmt.Errorf("virtual machine %s/%s does not belong to migration %s", m.Namespace, name, m.Name)
	}
	return vm, nil
}

// AdoptDataVolumes makes the target VM the controller owner of each of its
// DataVolumes, so that they live and die with it. A DataVolume already
// controlled by the VM is left alone; one controlled by anything else, or
// not this migration's, is an error.
func (s *Step) AdoptDataVolumes(ctx context.Context, m *v1alpha1.VirtualMachineMigration) error {
	vm, err := s.ourVM(ctx, m)
	if err != nil {
		return err
	}
	yes := true
	owner := metav1.OwnerReference{
		APIVersion: kubevirtv1.SchemeGroupVersion.String(), Kind: "VirtualMachine",
		Name: vm.Name, UID: vm.UID, Controller: &yes, BlockOwnerDeletion: &yes,
	}
	api := s.CDI.CdiV1beta1().DataVolumes(m.Namespace)
	for _, d := range m.Status.Disks {
		name := d.DataVolume
		dv, err := s.Listers.DataVolumes.DataVolumes(m.Namespace).Get(name)
		if err != nil {
			return fmt.Errorf("reading data volume %s/%s: %w", m.Namespace, name, err)
		}
		if !ours(dv, m.UID) {
			return fmt.Errorf("data volume %s/%s does not belong to migration %s", m.Namespace, name, m.Name)
		}
		if c := metav1.GetControllerOf(dv); c != nil {
			if c.UID == vm.UID {
				continue
			}
			return fmt.Errorf("data volume %s/%s is already controlled by %s %s", m.Namespace, name, c.Kind, c.Name)
		}
		refs := append(slices.Clone(dv.OwnerReferences), owner)
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
			"ownerReferences": refs, "resourceVersion": dv.ResourceVersion,
		}})
		if err != nil {
			return fmt.Errorf("encoding the owner patch of data volume %s: %w", name, err)
		}
		if _, err := api.Patch(ctx, name, types.MergePatchType, patch, strictPatch); err != nil {
			return fmt.Errorf("handing data volume %s/%s to virtual machine %s: %w", m.Namespace, name, vm.Name, err)
		}
	}
	return nil
}

// SetRunStrategy sets the target VM's run strategy; a VM that already has
// it is left alone.
func (s *Step) SetRunStrategy(ctx context.Context, m *v1alpha1.VirtualMachineMigration, strategy string) error {
	switch kubevirtv1.VirtualMachineRunStrategy(strategy) {
	case kubevirtv1.RunStrategyAlways, kubevirtv1.RunStrategyHalted, kubevirtv1.RunStrategyManual,
		kubevirtv1.RunStrategyRerunOnFailure, kubevirtv1.RunStrategyOnce:
	default:
		return fmt.Errorf("unknown run strategy %q", strategy)
	}
	vm, err := s.ourVM(ctx, m)
	if err != nil {
		return err
	}
	if vm.Spec.RunStrategy != nil && string(*vm.Spec.RunStrategy) == strategy && vm.Spec.Running == nil {
		return nil
	}
	// spec.running is cleared with it: the webhook rejects both set.
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": vm.ResourceVersion},
		"spec":     map[string]any{"runStrategy": strategy, "running": nil},
	})
	if err != nil {
		return fmt.Errorf("encoding the run strategy patch: %w", err)
	}
	if _, err := s.KubeVirt.KubevirtV1().VirtualMachines(m.Namespace).Patch(ctx, vm.Name, types.MergePatchType, patch, strictPatch); err != nil {
		return fmt.Errorf("setting the run strategy of virtual machine %s/%s to %s: %w", m.Namespace, vm.Name, strategy, err)
	}
	return nil
}
