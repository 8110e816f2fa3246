package pipeline

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/blocktree"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/transfer/wire"
)

// Verification Job layout.
const (
	// VerificationContainer is the name of the verification Job's first
	// container; the next ones (one per wire.MaxHashImages images) are
	// VerificationContainer-1, -2...
	VerificationContainer = "verify"
	// verifyRoot is where the claims are mounted (verifyRoot/<kind>/<disk>),
	// and block claims appear as devices (verifyRoot/<kind>/<disk>.dev).
	verifyRoot = "/verify"
	// Kinds of the images the Job reads, first in their names.
	imageTarget = "target"
	imageStaged = "staged"
)

// verifyImage is one image the verification Job reads.
type verifyImage struct {
	kind  string // imageTarget or imageStaged
	disk  v1alpha1.DiskStatus
	name  string // the disk's name in the VM
	claim string
	block bool
}

// hashName is the image's NAME on vm-transfer hash's command line.
func (v verifyImage) hashName() string { return v.kind + "/" + v.name }

// volume is the image's pod volume name.
func (v verifyImage) volume() string { return v.kind + "-" + strconv.Itoa(int(v.disk.Key)) }

// path is where the container sees the image.
func (v verifyImage) path() string {
	if v.block {
		return path.Join(verifyRoot, v.kind, v.name+".dev")
	}
	return path.Join(verifyRoot, v.kind, v.name, ImageFile)
}

// verifyImages lists what a verification reads: every disk's target
// claim (the DataVolume's, which CDI names after it), and the staged
// image of each disk the conversion's report had no checksum for.
// blockClaims names the claims in Block volume mode.
func verifyImages(m *v1alpha1.VirtualMachineMigration, blockClaims map[string]bool) ([]verifyImage, error) {
	disks, err := recordedDisks(m, true)
	if err != nil {
		return nil, err
	}
	var out []verifyImage
	for i, d := range disks {
		name := diskNameAt(d, i)
		out = append(out, verifyImage{kind: imageTarget, disk: d, name: name, claim: d.DataVolume, block: blockClaims[d.DataVolume]})
	}
	for i, d := range disks {
		// A disk written in place has no staged image apart from its
		// target: the target's read is the converted image's.
		if d.ConvertedSHA256() == "" && d.StagingClaim != "" && !d.WrittenInPlace() {
			out = append(out, verifyImage{kind: imageStaged, disk: d, name: diskNameAt(d, i), claim: d.StagingClaim, block: blockClaims[d.StagingClaim]})
		}
	}
	return out, nil
}

// RenderVerificationJob renders the verification Job of an attempt: once
// the DataVolumes are populated and before the VM starts, it reads every
// target claim (read-only) with vm-transfer hash and reports the SHA-256
// of its first capacityBytes bytes, which must be the converted image's
// (statemachine: the checksum chain). The images of disks whose converted
// checksum is unknown (the conversion's report had no room) are read from
// their staging claims too. Each container reads at most
// wire.MaxHashImages images (its termination message holds them all).
// The pod is the transfer's kind of pod: the controller's image, uid/gid
// 107 with fsGroup 107 (the owner CDI and KubeVirt give disk images; a
// block device needs the runtime to give it to the pod's user, as
// KubeVirt's non-root launcher does), restricted, no service account
// token, backoffLimit 0 and the retry deadline as its active deadline.
// blockClaims names the claims in Block volume mode.
func RenderVerificationJob(m *v1alpha1.VirtualMachineMigration, attempt int32, cfg Config, blockClaims map[string]bool) (*batchv1.Job, error) {
	if cfg.TransferImage == "" {
		return nil, errors.New("no transfer image is configured (the verification runs vm-transfer hash)")
	}
	images, err := verifyImages(m, blockClaims)
	if err != nil {
		return nil, err
	}
	volumes := make([]corev1.Volume, 0, len(images))
	for _, img := range images {
		volumes = append(volumes, corev1.Volume{Name: img.volume(), VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: img.claim, ReadOnly: true}}})
	}
	var containers []corev1.Container
	for i := 0; i < len(images); i += wire.MaxHashImages {
		containers = append(containers, verifyContainer(cfg, len(containers), images[i:min(i+wire.MaxHashImages, len(images))]))
	}
	meta, podMeta := jobMeta(m, naming.VerificationJob(m.Name, attempt), v1alpha1.ComponentVerification)
	return runOnce(meta, podMeta, m.SpecInForce().Policy.RetryDeadline(), corev1.PodSpec{
		AutomountServiceAccountToken: ptr.To(false),
		SecurityContext:              stagingPodSecurity(cfg, nil),
		ImagePullSecrets:             PullSecrets(m, cfg),
		Containers:                   containers,
		Volumes:                      volumes,
	}), nil
}

// verifyContainerName is the name of the verification Job's i-th container.
func verifyContainerName(i int) string {
	if i == 0 {
		return VerificationContainer
	}
	return VerificationContainer + "-" + strconv.Itoa(i)
}

// verifyContainer runs vm-transfer hash over its images.
func verifyContainer(cfg Config, i int, images []verifyImage) corev1.Container {
	command := cfg.TransferCommand
	if command == "" {
		command = DefaultTransferCommand
	}
	args := []string{"hash", "--termination-log=" + corev1.TerminationMessagePathDefault}
	c := corev1.Container{
		Name:            verifyContainerName(i),
		Image:           cfg.TransferImage,
		ImagePullPolicy: cfg.ImagePullPolicy,
		Command:         []string{command},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("128Mi")},
		},
		TerminationMessagePath:   corev1.TerminationMessagePathDefault,
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		SecurityContext:          restrictedContainer(),
	}
	for _, img := range images {
		if !img.block && img.disk.ChecksumScheme == blocktree.Scheme {
			// The block tree beside the image names where it differs.
			args = append(args, "--tree="+img.hashName()+"="+img.path()+TreeSuffix)
		}
	}
	for _, img := range images {
		args = append(args, fmt.Sprintf("%s=%s:%d", img.hashName(), img.path(), img.disk.CapacityBytes))
		if img.block {
			c.VolumeDevices = append(c.VolumeDevices, corev1.VolumeDevice{Name: img.volume(), DevicePath: img.path()})
		} else {
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: img.volume(), MountPath: path.Dir(img.path()), ReadOnly: true})
		}
	}
	c.Args = args
	return c
}

// ObserveVerificationJob reads a verification Job: Succeeded and Failed
// from its conditions, and every container's result (the images' sizes
// and checksums); a succeeded Job one of whose containers' results is not
// in the cache yet has ResultMissing.
func ObserveVerificationJob(job *batchv1.Job, pods []corev1.Pod) statemachine.JobObservation {
	o, condMessage := jobConditions(job)
	pod := latestPod(pods)
	var problems []string
	missing := false
	for i := range job.Spec.Template.Spec.Containers {
		name := job.Spec.Template.Spec.Containers[i].Name
		term, waiting := containerState(pod, name)
		switch {
		case term == nil:
			missing = true
			if waiting != nil && waiting.Reason != "" && waiting.Reason != "ContainerCreating" && !o.Failed {
				o.Message = "waiting: " + joinNonEmpty(": ", waiting.Reason, waiting.Message)
			}
			continue
		case term.ExitCode != 0 && term.Message == "":
			problems = append(problems, fmt.Sprintf("container %s: %s (exit code %d)", name, orDefault(term.Reason, "terminated"), term.ExitCode))
		}
		problems = append(problems, addHashResult(&o, term.Message)...)
	}
	o.ResultMissing = o.Succeeded && missing
	if o.Failed {
		o.Message = truncate(joinNonEmpty("; ", strings.Join(problems, "; "), condMessage, podProblem(pod, nil)), maxMessage)
	}
	return o
}

// addHashResult adds one container's hash result to the observation and
// returns what it could not read.
func addHashResult(o *statemachine.JobObservation, msg string) []string {
	res, err := wire.ParseHashResult([]byte(strings.TrimSpace(msg)))
	if err != nil {
		return []string{"no hash result: " + truncate(oneLine(msg), 200)}
	}
	var problems []string
	for _, img := range res.Images {
		kind, disk, _ := strings.Cut(img.Name, "/")
		c := statemachine.ImageChecksum{Disk: disk, Staged: kind == imageStaged, Bytes: img.Bytes, Size: img.Size, SHA256: img.SHA256}
		if isSHA256(img.StoredRoot) {
			c.StoredRoot = img.StoredRoot
			if r := img.FirstDifference; r != nil && r.Offset >= 0 && r.Length > 0 && r.Offset <= img.Bytes-r.Length {
				c.FirstDifference = &statemachine.ByteRange{Offset: r.Offset, Length: r.Length}
			}
		}
		if img.SHA256 == "" || !isSHA256(img.SHA256) {
			c.SHA256, c.Error = "", orDefault(img.Error, "no checksum")
			problems = append(problems, img.Name+": "+c.Error)
		}
		o.Checksums = append(o.Checksums, c)
	}
	return problems
}

// CreateVerificationJob creates the verification Job of an attempt, each
// claim mounted as its volume mode says: the claim's own (the claims the
// controller made, staging or written in place, from the cache; those CDI
// made for a clone, which the cache may not hold yet, read once from the
// API server), else the one the DataVolume asked for (the storage
// mapping), else Filesystem. A target claim's mode may come from its
// storage profile: nothing else says it.
func (s *Step) CreateVerificationJob(ctx context.Context, m *v1alpha1.VirtualMachineMigration, attempt int32) error {
	if attempt < 1 {
		return fmt.Errorf("verification attempt %d: attempts count from 1", attempt)
	}
	block, err := s.blockClaims(ctx, m)
	if err != nil {
		return err
	}
	job, err := RenderVerificationJob(m, attempt, s.Config, block)
	if err != nil {
		return fmt.Errorf("rendering the verification job: %w", err)
	}
	return createIfAbsent(ctx, m, "job", s.Kube.BatchV1().Jobs(m.Namespace), job)
}

// blockClaims names the migration's target and staging claims that are
// in Block volume mode.
func (s *Step) blockClaims(ctx context.Context, m *v1alpha1.VirtualMachineMigration) (map[string]bool, error) {
	block := map[string]bool{}
	for _, d := range m.Status.Disks {
		mapped := diskStorageTarget(m, d).VolumeMode
		block[d.DataVolume] = mapped != nil && *mapped == corev1.PersistentVolumeBlock
		if pvc, err := s.Listers.Claims.PersistentVolumeClaims(m.Namespace).Get(d.StagingClaim); err == nil && ours(pvc, m.UID) {
			block[d.StagingClaim] = pvc.Spec.VolumeMode != nil && *pvc.Spec.VolumeMode == corev1.PersistentVolumeBlock
		}
		if d.WrittenInPlace() {
			// The target claim is the one the controller made: cached.
			continue
		}
		mode, err := s.claimMode(ctx, m, d.DataVolume)
		if err != nil {
			return nil, err
		}
		if mode != nil {
			block[d.DataVolume] = *mode == corev1.PersistentVolumeBlock
		}
	}
	return block, nil
}

// claimMode is a target claim's volume mode as the API server has it; nil
// when the claim is not this migration's or not found.
func (s *Step) claimMode(ctx context.Context, m *v1alpha1.VirtualMachineMigration, name string) (*corev1.PersistentVolumeMode, error) {
	pvc, err := s.Kube.CoreV1().PersistentVolumeClaims(m.Namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading claim %s/%s for its volume mode: %w", m.Namespace, name, err)
	case !ours(pvc, m.UID):
		return nil, nil
	}
	return pvc.Spec.VolumeMode, nil
}
