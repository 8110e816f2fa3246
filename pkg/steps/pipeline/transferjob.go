package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/pkg/transfer/wire"
)

// Transfer Job layout.
const (
	// DefaultTransferCommand is vm-transfer's path in the controller image.
	DefaultTransferCommand = "/usr/local/bin/vm-transfer"
	// TransferContainer is the transfer Job's container name.
	TransferContainer = "transfer"
	// TransferSpecKey is the job spec's key in the transfer ConfigMap.
	TransferSpecKey = "transfer-spec.json"
	// transferSpecDir, transferCredentialsDir and stagingRoot are where
	// the job spec, the credentials Secret and the staging volumes
	// (stagingRoot/<disk key>) are mounted; a claim in Block volume mode
	// appears as a device instead (stagingRoot/<disk key>.dev).
	transferSpecDir        = "/etc/vm-transfer/spec"
	transferCredentialsDir = "/etc/vm-transfer/credentials"
	stagingRoot            = "/staging"
	// ImageFile is the disk image's name at the root of a staging volume.
	ImageFile = "disk.img"
)

// RenderTransferSpec renders the vm-transfer job spec: the endpoint, the
// inventoried VM, whether only allocated areas may be copied
// (spec.transfer.allocatedOnly) and, per disk in status order, its backing
// file and its destination: the image path in its staging volume, or the
// claim's device when blockClaims names the claim (Block volume mode; nil
// means every claim is Filesystem). It holds no credentials.
func RenderTransferSpec(m *v1alpha1.VirtualMachineMigration, blockClaims map[string]bool) (*wire.JobSpec, error) {
	inv := m.Status.Source
	if inv == nil || inv.MoRef == "" {
		return nil, errors.New("the source VM is not inventoried yet (status.source)")
	}
	if _, err := recordedDisks(m, false); err != nil {
		return nil, err
	}
	if err := sourceField("status.source.moRef", inv.MoRef); err != nil {
		return nil, err
	}
	if err := sourceText("status.source.datacenter", inv.Datacenter, maxSourceName); err != nil {
		return nil, err
	}
	for i, d := range inv.Disks {
		if err := sourceText(fmt.Sprintf("status.source.disks[%d].fileName", i), d.FileName, maxSourcePath); err != nil {
			return nil, err
		}
	}
	spec := m.SpecInForce()
	dc := inv.Datacenter
	if dc == "" {
		dc = spec.Source.Datacenter
	}
	js := &wire.JobSpec{
		Version:  wire.SpecVersion,
		Endpoint: wire.EndpointSpec{URL: spec.Source.URL, Datacenter: dc, InsecureSkipVerify: spec.Source.InsecureSkipVerify},
		VMMoRef:  inv.MoRef,
		FullCopy: !spec.Transfer.AllocatedOnlyEnabled(),
	}
	for _, d := range m.Status.Disks {
		src := sourceDisk(inv, d.Key)
		if src == nil || src.FileName == "" {
			return nil, fmt.Errorf("disk %d has no backing file in the inventory", d.Key)
		}
		js.Disks = append(js.Disks, wire.DiskSpec{
			Key:           d.Key,
			FileName:      src.FileName,
			CapacityBytes: d.CapacityBytes,
			Destination:   stagingDestination(d.Key, blockClaims[d.StagingClaim]),
		})
	}
	if err := js.Validate(); err != nil {
		return nil, err
	}
	return js, nil
}

// sourceDisk finds an inventoried disk by key.
func sourceDisk(inv *v1alpha1.SourceInventory, key int32) *v1alpha1.SourceDisk {
	for i := range inv.Disks {
		if inv.Disks[i].Key == key {
			return &inv.Disks[i]
		}
	}
	return nil
}

func stagingMount(key int32) string { return path.Join(stagingRoot, strconv.Itoa(int(key))) }

// stagingDestination is where the transfer pod writes a disk: the image
// file at the root of its staging volume, or, for a claim in Block volume
// mode, the claim's device (the raw disk is the device).
func stagingDestination(key int32, block bool) string {
	if block {
		return stagingMount(key) + ".dev"
	}
	return path.Join(stagingMount(key), ImageFile)
}

// mappedBlockClaims names the claims the storage mapping puts in Block
// volume mode: each disk's DataVolume, and so the claim of a disk written
// in place (named as its DataVolume), when the disk's storage target says
// Block. A staging claim of the clone path is Filesystem whatever the
// mapping. It is what renderings made before any claim exists (the plan,
// the dry run) know of the modes; a mode a StorageProfile picks shows only
// on the claims themselves ((*Step).blockClaims).
func mappedBlockClaims(m *v1alpha1.VirtualMachineMigration) map[string]bool {
	block := map[string]bool{}
	for _, d := range m.Status.Disks {
		mode := diskStorageTarget(m, d).VolumeMode
		if d.DataVolume != "" && mode != nil && *mode == corev1.PersistentVolumeBlock {
			block[d.DataVolume] = true
		}
	}
	return block
}

// stagingBlockClaims names the claims the transfer and the conversion
// attach as devices: (*Step).blockClaims over the disks whose DataVolume
// is named. A disk recorded before the one-pass path is named its
// DataVolume only at the import, and its staging claim is Filesystem
// (there is no target claim to ask about yet).
func (s *Step) stagingBlockClaims(ctx context.Context, m *v1alpha1.VirtualMachineMigration) (map[string]bool, error) {
	unnamed := func(d v1alpha1.DiskStatus) bool { return d.DataVolume == "" }
	if !slices.ContainsFunc(m.Status.Disks, unnamed) {
		return s.blockClaims(ctx, m)
	}
	named := m.DeepCopy()
	named.Status.Disks = slices.DeleteFunc(named.Status.Disks, unnamed)
	return s.blockClaims(ctx, named)
}

// RenderTransferConfigMap renders the ConfigMap with the job spec of an
// attempt; blockClaims names the claims in Block volume mode.
func RenderTransferConfigMap(m *v1alpha1.VirtualMachineMigration, attempt int32, blockClaims map[string]bool) (*corev1.ConfigMap, error) {
	js, err := RenderTransferSpec(m, blockClaims)
	if err != nil {
		return nil, err
	}
	data, err := json.MarshalIndent(js, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding the transfer job spec: %w", err)
	}
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: childMeta(m, naming.TransferSpecConfigMap(m.Name, attempt), v1alpha1.ComponentTransfer, true),
		Data:       map[string]string{TransferSpecKey: string(data) + "\n"},
	}, nil
}

// defaultTransferResources fit the command's defaults: 2 disks at once,
// about (streams + 1/2) chunks of 8 MiB in flight each (some 75 MiB with
// 2 streams), plus TLS and hashing.
func defaultTransferResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("512Mi")},
	}
}

// restrictedContainer is the container security context of the restricted
// Pod Security profile, with a read-only root file system.
func restrictedContainer() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsNonRoot:             ptr.To(true),
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

// stagingVolumeName is the pod volume name of a disk's staging volume.
func stagingVolumeName(key int32) string { return "staging-" + strconv.Itoa(int(key)) }

// jobMeta is the metadata of a Job and of its pod template.
func jobMeta(m *v1alpha1.VirtualMachineMigration, name, component string) (metav1.ObjectMeta, metav1.ObjectMeta) {
	return childMeta(m, name, component, true), metav1.ObjectMeta{Labels: childLabels(m, component)}
}

// RenderTransferJob renders the transfer Job of an attempt: one run of
// vm-transfer (backoffLimit 0: a failed attempt is retried by the
// controller under a new name; the retry deadline as its active deadline),
// the job spec and the credentials Secret mounted read-only, one staging
// volume per disk (mounted, or attached as a device when blockClaims names
// its claim: Block volume mode), the result as the termination message,
// under the restricted Pod Security profile.
func RenderTransferJob(m *v1alpha1.VirtualMachineMigration, attempt int32, cfg Config, blockClaims map[string]bool) (*batchv1.Job, error) {
	if cfg.TransferImage == "" {
		return nil, errors.New("no transfer image is configured")
	}
	disks, err := recordedDisks(m, false)
	if err != nil {
		return nil, err
	}
	spec := m.SpecInForce()
	secret := spec.Source.CredentialsSecretRef.Name
	if secret == "" {
		return nil, errors.New("spec.source.credentialsSecretRef.name is empty")
	}
	args, serviceAccount, err := transferArgs(m, attempt, cfg)
	if err != nil {
		return nil, err
	}
	volumes, mounts, devices := transferVolumes(naming.TransferSpecConfigMap(m.Name, attempt), secret, disks, blockClaims)
	meta, podMeta := jobMeta(m, naming.TransferJob(m.Name, attempt), v1alpha1.ComponentTransfer)
	// A hung transfer cannot hold the migration past its retry budget:
	// the Job fails, and the budget fails the migration.
	return runOnce(meta, podMeta, spec.Policy.RetryDeadline(), corev1.PodSpec{
		ServiceAccountName:           serviceAccount,
		AutomountServiceAccountToken: ptr.To(serviceAccount != ""),
		SecurityContext:              stagingPodSecurity(cfg, nil),
		ImagePullSecrets:             PullSecrets(m, cfg),
		Containers:                   []corev1.Container{transferContainer(cfg, args, mounts, devices)},
		Volumes:                      volumes,
	}), nil
}

// runOnce is a Job that runs its pod once, within deadline: backoffLimit
// 0 (a failed attempt is retried by the controller under a new name),
// the pod never restarted, no service links in its environment, and no
// replacement pod before the one it has is gone (podReplacementPolicy
// Failed: with the default, TerminatingOrFailed, a drain, an eviction or
// a partitioned node lets the Job start a second pod while the first
// still runs, and two writers would hold one claim).
func runOnce(meta, podMeta metav1.ObjectMeta, deadline time.Duration, pod corev1.PodSpec) *batchv1.Job {
	pod.RestartPolicy = corev1.RestartPolicyNever
	pod.EnableServiceLinks = ptr.To(false)
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: meta,
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To[int32](0),
			PodReplacementPolicy:  ptr.To(batchv1.Failed),
			ActiveDeadlineSeconds: ptr.To(int64(deadline / time.Second)),
			Template:              corev1.PodTemplateSpec{ObjectMeta: podMeta, Spec: pod},
		},
	}
}

// transferArgs are vm-transfer's arguments and, with the progress channel
// on, the attempt's ServiceAccount the pod runs as (its token mounted: the
// ServiceAccount mounts none by default, this pod opts in).
func transferArgs(m *v1alpha1.VirtualMachineMigration, attempt int32, cfg Config) ([]string, string, error) {
	args := []string{
		"--spec=" + path.Join(transferSpecDir, TransferSpecKey),
		"--credentials-dir=" + transferCredentialsDir,
		"--termination-log=" + corev1.TerminationMessagePathDefault,
	}
	if cfg.TransferStreams > 1 {
		args = append(args, "--streams="+strconv.Itoa(cfg.TransferStreams))
	}
	if !cfg.TransferProgress {
		return args, "", nil
	}
	access, err := renderAccess(m, attempt, cfg)
	if err != nil {
		return nil, "", err
	}
	return append(args, access.PodArgs()...), access.ServiceAccount.Name, nil
}

// transferVolumes are the job spec and the credentials Secret, read-only,
// a small /tmp, and one staging volume per disk: mounted, or attached as
// the device stagingDestination names when blockClaims names its claim.
func transferVolumes(specConfigMap, secret string, disks []v1alpha1.DiskStatus, blockClaims map[string]bool) ([]corev1.Volume, []corev1.VolumeMount, []corev1.VolumeDevice) {
	volumes := []corev1.Volume{
		{Name: "spec", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: specConfigMap}, DefaultMode: ptr.To[int32](0o444)}}},
		{Name: "credentials", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: secret, DefaultMode: ptr.To[int32](0o440)}}},
		{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("64Mi"))}}},
	}
	mounts := []corev1.VolumeMount{
		{Name: "spec", MountPath: transferSpecDir, ReadOnly: true},
		{Name: "credentials", MountPath: transferCredentialsDir, ReadOnly: true},
		{Name: "tmp", MountPath: "/tmp"},
	}
	var devices []corev1.VolumeDevice
	for _, d := range disks {
		vol := stagingVolumeName(d.Key)
		volumes = append(volumes, corev1.Volume{Name: vol, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: d.StagingClaim}}})
		if blockClaims[d.StagingClaim] {
			devices = append(devices, corev1.VolumeDevice{Name: vol, DevicePath: stagingDestination(d.Key, true)})
		} else {
			mounts = append(mounts, corev1.VolumeMount{Name: vol, MountPath: stagingMount(d.Key)})
		}
	}
	return volumes, mounts, devices
}

// transferContainer runs vm-transfer with its result as the termination
// message, under the restricted profile with a read-only root.
func transferContainer(cfg Config, args []string, mounts []corev1.VolumeMount, devices []corev1.VolumeDevice) corev1.Container {
	command := cfg.TransferCommand
	if command == "" {
		command = DefaultTransferCommand
	}
	resources := defaultTransferResources()
	if cfg.TransferResources != nil {
		resources = *cfg.TransferResources.DeepCopy()
	}
	return corev1.Container{
		Name:                     TransferContainer,
		Image:                    cfg.TransferImage,
		ImagePullPolicy:          cfg.ImagePullPolicy,
		Command:                  []string{command},
		Args:                     args,
		Resources:                resources,
		VolumeMounts:             mounts,
		VolumeDevices:            devices,
		TerminationMessagePath:   corev1.TerminationMessagePathDefault,
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		SecurityContext:          restrictedContainer(),
	}
}
