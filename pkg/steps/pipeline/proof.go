package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/steps"
)

// An image proof is a short Job whose pod is the pod of a component's
// Jobs (its image, pull policy and pull secrets, service account kind,
// security context, runtime class, resources and placement) without the
// migration's volumes, running the image's own self-check instead of its
// work: vm-transfer --version for the transfer image, v2v-self-check for
// the conversion image. It runs in Validating, before the source is
// touched; the controller creates Jobs and never pods, as for the real
// work. Its result is kept per key (namespace, image and pod shape) for
// Config.ProofTTL and serves every migration whose pods have that key.

// Proof defaults.
const (
	// DefaultProofTimeout bounds a proof pod: once its Job is that old
	// without a result, the proof fails with what its pod waits on.
	DefaultProofTimeout = 2 * time.Minute
	// DefaultProofTTL is how long a passed proof serves a namespace.
	// A proof's Job lives as long (ttlSecondsAfterFinished), then the
	// Job controller deletes it.
	DefaultProofTTL = 10 * time.Minute
	// proofJobGrace is how much longer than the proof timeout the Job's
	// own active deadline is: the controller reads the pod's problem
	// before the Job controller deletes the pod.
	proofJobGrace = 30 * time.Second
	// annotationProofKey holds a proof Job's key (as LabelProofKey does).
	annotationProofKey = "migration.platform.example/proof-key"
	// ConversionSelfCheck is the conversion image's self-check
	// (docs/operators/conversion-image.md).
	ConversionSelfCheck = "/usr/local/bin/v2v-self-check"
)

// ReasonSelfCheckFailed, ReasonNotStarted and ReasonIncompatibleImage are
// the proof failures that are not the cluster's own reasons.
const (
	ReasonSelfCheckFailed   = "SelfCheckFailed"
	ReasonNotStarted        = "NotStarted"
	ReasonIncompatibleImage = "IncompatibleImage"
)

// conversionSelfCheckScript runs the image's self-check into the
// termination message; an image without one (not built by this project)
// is asked for virt-v2v-in-place's version instead, and says nothing of
// its capabilities.
const conversionSelfCheckScript = `if [ -x ` + ConversionSelfCheck + ` ]; then
  ` + ConversionSelfCheck + ` >/dev/termination-log; rc=$?
else
  v=$(virt-v2v-in-place --version 2>&1); rc=$?
  printf '{"virtV2V":"%s","selfCheck":false,"ok":%s,"problems":[]}\n' "$(echo "$v" | tr -d '"\\' | head -c 200)" "$([ $rc -eq 0 ] && echo true || echo false)" >/dev/termination-log
fi
cat /dev/termination-log
exit $rc
`

// ProofComponents are the components whose images m's pods run: the
// transfer, and the conversion unless it is skipped.
func ProofComponents(m *v1alpha1.VirtualMachineMigration) []string {
	if m.SpecInForce().Conversion.Skip {
		return []string{v1alpha1.ComponentTransfer}
	}
	return []string{v1alpha1.ComponentTransfer, v1alpha1.ComponentConversion}
}

// RenderProof renders the proof of one component's image: its Job and,
// where that component's pods run as a ServiceAccount of their own (the
// transfer's, with the progress channel on), one of the same kind. m must
// be validated (status.source). The objects are named by the proof's key
// (the namespace and the pod's shape), not by m: every migration of that
// key renders the same ones, and the first to need them creates them.
// They are no migration's (an empty migration UID label, no owner
// reference): the Job's TTL removes it once its result is older than the
// proof TTL, and the ServiceAccount with it (owned by the Job).
func RenderProof(m *v1alpha1.VirtualMachineMigration, component string, cfg Config) (*batchv1.Job, *corev1.ServiceAccount, error) {
	pod, err := proofPod(m, component, cfg)
	if err != nil {
		return nil, nil, err
	}
	key, err := proofKey(m.Namespace, pod)
	if err != nil {
		return nil, nil, err
	}
	var sa *corev1.ServiceAccount
	if pod.ServiceAccountName != "" {
		sa = &corev1.ServiceAccount{
			TypeMeta:                     metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			ObjectMeta:                   proofMeta(m.Namespace, naming.ProofAccess(key), component, key),
			AutomountServiceAccountToken: ptr.To(false),
			ImagePullSecrets:             PullSecrets(m, cfg),
		}
		pod.ServiceAccountName = sa.Name
	}
	meta := proofMeta(m.Namespace, naming.ProofJob(component, key), component, key)
	job := runOnce(meta, metav1.ObjectMeta{Labels: meta.Labels}, cfg.proofTimeout()+proofJobGrace, *pod)
	job.Spec.TTLSecondsAfterFinished = ptr.To(int32(cfg.proofTTL() / time.Second))
	return job, sa, nil
}

// proofMeta is the metadata of a shared proof object: the proof labels,
// an empty migration UID label (the controller's caches hold the objects
// that carry the label; an empty one is no migration's), no owner.
func proofMeta(namespace, name, component, key string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: namespace,
		Labels: map[string]string{
			v1alpha1.LabelMigrationUID: "",
			v1alpha1.LabelComponent:    v1alpha1.ComponentProof,
			v1alpha1.LabelProofOf:      component,
			v1alpha1.LabelProofKey:     key,
		},
		Annotations: map[string]string{annotationProofKey: key},
	}
}

// isProofObject reports whether o is a shared proof object of key: its
// labels say so, and no migration's UID is on it.
func isProofObject(o metav1.Object, key string) bool {
	l := o.GetLabels()
	uid, labelled := l[v1alpha1.LabelMigrationUID]
	return labelled && uid == "" && l[v1alpha1.LabelComponent] == v1alpha1.ComponentProof &&
		key != "" && l[v1alpha1.LabelProofKey] == key
}

// proofPod is the pod of a component's first attempt, rendered by the
// functions the attempt uses, with the self-check as its work and only
// its scratch volumes.
func proofPod(m *v1alpha1.VirtualMachineMigration, component string, cfg Config) (*corev1.PodSpec, error) {
	if m.Status.Source == nil {
		return nil, errors.New("the source VM is not inventoried yet (status.source)")
	}
	mp := m.DeepCopy()
	mp.Status = statemachine.PlannedStatus(m)
	var job *batchv1.Job
	var err error
	// The proof pod keeps none of the claims: the Filesystem rendering
	// (no block claims) leaves no device to drop.
	switch component {
	case v1alpha1.ComponentTransfer:
		job, err = RenderTransferJob(mp, 1, cfg, nil)
	case v1alpha1.ComponentConversion:
		job, err = RenderConversionJob(mp, 1, cfg, nil)
	default:
		return nil, fmt.Errorf("no image proof for component %q", component)
	}
	if err != nil {
		return nil, fmt.Errorf("rendering the %s pod to prove its image: %w", component, err)
	}
	pod := job.Spec.Template.Spec.DeepCopy()
	c := &pod.Containers[0]
	if component == v1alpha1.ComponentTransfer {
		c.Args = []string{"--version", "--termination-log=" + corev1.TerminationMessagePathDefault}
	} else {
		c.Command, c.Args = []string{"/bin/sh", "-c", conversionSelfCheckScript}, nil
	}
	c.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
	pod.AutomountServiceAccountToken = ptr.To(false)
	pod.Volumes, c.VolumeMounts = scratchVolumes(pod.Volumes, c.VolumeMounts)
	return pod, nil
}

// scratchVolumes keeps the emptyDir volumes and their mounts: the proof
// pod has no claims, ConfigMaps or Secrets of the migration.
func scratchVolumes(volumes []corev1.Volume, mounts []corev1.VolumeMount) ([]corev1.Volume, []corev1.VolumeMount) {
	keep := map[string]bool{}
	var vs []corev1.Volume
	for _, v := range volumes {
		if v.EmptyDir != nil {
			keep[v.Name] = true
			vs = append(vs, v)
		}
	}
	var ms []corev1.VolumeMount
	for _, vm := range mounts {
		if keep[vm.Name] {
			ms = append(ms, vm)
		}
	}
	return vs, ms
}

// proofShape is what a proof proves: what decides whether the pod is
// admitted, scheduled, pulled and started, and not the migration's names.
type proofShape struct {
	Namespace         string                        `json:"namespace"`
	Image             string                        `json:"image"`
	PullPolicy        corev1.PullPolicy             `json:"pullPolicy,omitempty"`
	PullSecrets       []corev1.LocalObjectReference `json:"pullSecrets,omitempty"`
	OwnAccount        bool                          `json:"ownAccount,omitempty"`
	Command           []string                      `json:"command,omitempty"`
	Args              []string                      `json:"args,omitempty"`
	Env               []corev1.EnvVar               `json:"env,omitempty"`
	PodSecurity       *corev1.PodSecurityContext    `json:"podSecurity,omitempty"`
	ContainerSecurity *corev1.SecurityContext       `json:"containerSecurity,omitempty"`
	RuntimeClass      *string                       `json:"runtimeClass,omitempty"`
	Resources         corev1.ResourceRequirements   `json:"resources"`
	NodeSelector      map[string]string             `json:"nodeSelector,omitempty"`
	Affinity          *corev1.Affinity              `json:"affinity,omitempty"`
	Tolerations       []corev1.Toleration           `json:"tolerations,omitempty"`
	Volumes           []corev1.Volume               `json:"volumes,omitempty"`
}

// proofKey is the key of a proof pod in a namespace: a hash of its shape.
func proofKey(namespace string, pod *corev1.PodSpec) (string, error) {
	c := pod.Containers[0]
	shape := proofShape{
		Namespace: namespace, Image: c.Image, PullPolicy: c.ImagePullPolicy, PullSecrets: pod.ImagePullSecrets,
		OwnAccount: pod.ServiceAccountName != "", Command: c.Command, Args: c.Args, Env: c.Env,
		PodSecurity: pod.SecurityContext, ContainerSecurity: c.SecurityContext, RuntimeClass: pod.RuntimeClassName,
		Resources: c.Resources, NodeSelector: pod.NodeSelector, Affinity: pod.Affinity, Tolerations: pod.Tolerations, Volumes: pod.Volumes,
	}
	data, err := json.Marshal(shape)
	if err != nil {
		return "", fmt.Errorf("encoding the proof's shape: %w", err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])[:16], nil
}

// proofTimeout is the configured proof timeout or the default.
func (c Config) proofTimeout() time.Duration {
	if c.ProofTimeout > 0 {
		return c.ProofTimeout
	}
	return DefaultProofTimeout
}

// proofTTL is the configured proof TTL or the default.
func (c Config) proofTTL() time.Duration {
	if c.ProofTTL > 0 {
		return c.ProofTTL
	}
	return DefaultProofTTL
}

// CreateProofJob creates the proof of a component's image where it is
// absent: its ServiceAccount first, where it has one, then its Job, then
// the ServiceAccount is made the Job's (an owner reference), so that the
// garbage collector removes it with the Job. Another migration of the key
// that created them first is no failure (AlreadyExists): the objects are
// shared. An object of the same name that is not a proof object of the
// key is not taken over.
func (s *Step) CreateProofJob(ctx context.Context, m *v1alpha1.VirtualMachineMigration, component string) error {
	job, sa, err := RenderProof(m, component, s.Config)
	if err != nil {
		return err
	}
	key := job.Labels[v1alpha1.LabelProofKey]
	var account *corev1.ServiceAccount
	if sa != nil {
		if account, err = s.proofAccount(ctx, sa, key); err != nil {
			return err
		}
	}
	created, err := createShared(ctx, "job", s.Kube.BatchV1().Jobs(m.Namespace), job, key)
	if err != nil {
		return err
	}
	if created.DeletionTimestamp != nil {
		// A stale one on its way out, which the cache did not show yet:
		// its account must not be handed to it.
		return &statemachine.ObservedError{Class: statemachine.ErrorTransient, Reason: steps.ReasonProofJobDeleting,
			Message: fmt.Sprintf("proof job %s/%s is being deleted: proving again once it is gone", created.Namespace, created.Name)}
	}
	s.proofs.created(key, s.now())
	if account == nil {
		return nil
	}
	return s.ownProofAccess(ctx, account, created)
}

// createShared creates a shared proof object, or reads the one of the
// same name a peer created, and returns it; one that is not a proof
// object of key is an error naming it.
func createShared[T metav1.Object](ctx context.Context, kind string, api creator[T], obj T, key string) (T, error) {
	name := obj.GetName()
	out, err := api.Create(ctx, obj, strictCreate)
	if err == nil {
		return out, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return out, fmt.Errorf("creating %s %s/%s: %w", kind, obj.GetNamespace(), name, err)
	}
	existing, err := api.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return existing, fmt.Errorf("creating %s %s/%s: it exists but reading it failed: %w", kind, obj.GetNamespace(), name, err)
	}
	if !isProofObject(existing, key) {
		return existing, &statemachine.ObservedError{Class: statemachine.ErrorPermanent, Reason: steps.ReasonNameTaken,
			Message: fmt.Sprintf("%s %s/%s exists and is not the image proof of key %s (labels %s=%q, %s=%q): delete or rename it",
				kind, obj.GetNamespace(), name, key, v1alpha1.LabelComponent, existing.GetLabels()[v1alpha1.LabelComponent],
				v1alpha1.LabelProofKey, existing.GetLabels()[v1alpha1.LabelProofKey])}
	}
	return existing, nil
}

// proofAccount creates the proof's ServiceAccount, or reads the one a
// peer created. One an earlier proof Job of the key owns, a Job that is
// gone (or was replaced under its name), is the garbage collector's to
// delete at any moment, even once handed to a new Job: it is deleted
// (its UID as a precondition) and made again.
func (s *Step) proofAccount(ctx context.Context, sa *corev1.ServiceAccount, key string) (*corev1.ServiceAccount, error) {
	api := s.Kube.CoreV1().ServiceAccounts(sa.Namespace)
	account, err := createShared(ctx, "service account", api, sa, key)
	if err != nil || !s.ownerGone(ctx, account) {
		return account, err
	}
	err = api.Delete(ctx, account.Name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(account.UID))})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return nil, fmt.Errorf("deleting service account %s/%s of a proof job that is gone: %w", account.Namespace, account.Name, err)
	}
	return createShared(ctx, "service account", api, sa, key)
}

// ownerGone reports whether sa is owned by a Job that no longer exists
// under its name and UID (the garbage collector deletes such an account).
// An account no Job owns yet (its creator's handover to come) is not.
func (s *Step) ownerGone(ctx context.Context, sa *corev1.ServiceAccount) bool {
	for _, o := range sa.OwnerReferences {
		if o.Kind != "Job" {
			continue
		}
		job, err := s.Kube.BatchV1().Jobs(sa.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && (job.UID != o.UID || job.DeletionTimestamp != nil)) {
			return true
		}
	}
	return false
}

// ownProofAccess makes the proof Job the owner of its ServiceAccount
// (unless it is already), so that the garbage collector removes the
// account once the Job is gone, and so that the Job's deletion in the
// foreground (a stale proof's, its TTL's) ends only once the account is
// gone (blockOwnerDeletion): the next Job of the key never gets an
// account the collector is about to delete.
func (s *Step) ownProofAccess(ctx context.Context, sa *corev1.ServiceAccount, job *batchv1.Job) error {
	if slices.ContainsFunc(sa.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == job.UID }) {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": sa.ResourceVersion,
		"ownerReferences": []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, BlockOwnerDeletion: ptr.To(true)}},
	}})
	if err != nil {
		return fmt.Errorf("encoding the owner of service account %s/%s: %w", sa.Namespace, sa.Name, err)
	}
	_, err = s.Kube.CoreV1().ServiceAccounts(sa.Namespace).Patch(ctx, sa.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		// A peer handed it over meanwhile, or it went: the next
		// creation of the key's proof sees to it.
		return nil
	}
	if err != nil {
		return fmt.Errorf("making job %s/%s the owner of service account %s: %w", job.Namespace, job.Name, sa.Name, err)
	}
	return nil
}

// DeleteStaleProof deletes the stale proof Jobs objects name (a decision's
// ActionDeleteStaleProof): each only when the cache holds it with the
// observed UID and the proof labels (a shared proof object, no
// migration's and nothing else), with that UID as a precondition, its pods
// and its ServiceAccount in the foreground. One already gone or replaced
// is skipped.
func (s *Step) DeleteStaleProof(ctx context.Context, m *v1alpha1.VirtualMachineMigration, objects []statemachine.ObjectRef) error {
	for _, ref := range objects {
		job, err := s.Listers.Jobs.Jobs(m.Namespace).Get(ref.Name)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("reading proof job %s/%s: %w", m.Namespace, ref.Name, err)
		}
		if ref.Kind != statemachine.KindJob || ref.UID == "" || job.UID != ref.UID || !isProofObject(job, job.Labels[v1alpha1.LabelProofKey]) {
			return fmt.Errorf("refusing to delete %s %s/%s: it was not observed as an image proof Job", ref.Kind, m.Namespace, ref.Name)
		}
		s.proofs.forget(job.Labels[v1alpha1.LabelProofKey], job.UID)
		err = s.Kube.BatchV1().Jobs(m.Namespace).Delete(ctx, ref.Name, deleteOptions(ref))
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting proof job %s/%s: %w", m.Namespace, ref.Name, err)
		}
	}
	return nil
}
