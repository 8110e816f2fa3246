package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/pkg/statemachine"
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
	DefaultProofTTL = 10 * time.Minute
	// proofJobGrace is how much longer than the proof timeout the Job's
	// own active deadline is: the controller reads the pod's problem
	// before the Job controller deletes the pod.
	proofJobGrace = 30 * time.Second
	// proofJobTTL removes a proof Job the controller could not delete.
	proofJobTTL = time.Hour
	// annotationProofKey holds a proof Job's key.
	annotationProofKey = "migration.platform.example/proof-key"
	// annotationProofValidation names the validation a proof Job was
	// made for (when it began): a migration validating again (refused
	// before the stop, its spec changed) does not read an earlier one.
	annotationProofValidation = "migration.platform.example/proof-validation"
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
// be validated (status.source).
func RenderProof(m *v1alpha1.VirtualMachineMigration, component string, cfg Config) (*batchv1.Job, *corev1.ServiceAccount, error) {
	pod, err := proofPod(m, component, cfg)
	if err != nil {
		return nil, nil, err
	}
	var sa *corev1.ServiceAccount
	if pod.ServiceAccountName != "" {
		sa = &corev1.ServiceAccount{
			TypeMeta:                     metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			ObjectMeta:                   proofMeta(m, naming.ProofAccess(m.Name), component),
			AutomountServiceAccountToken: ptr.To(false),
			ImagePullSecrets:             PullSecrets(m, cfg),
		}
		pod.ServiceAccountName = sa.Name
	}
	key, err := proofKey(m.Namespace, pod)
	if err != nil {
		return nil, nil, err
	}
	meta := proofMeta(m, naming.ProofJob(m.Name, component), component)
	meta.Annotations = map[string]string{annotationProofKey: key}
	if v := validationStart(m); v != "" {
		meta.Annotations[annotationProofValidation] = v
	}
	job := runOnce(meta, metav1.ObjectMeta{Labels: meta.Labels}, cfg.proofTimeout()+proofJobGrace, *pod)
	job.Spec.TTLSecondsAfterFinished = ptr.To(int32(proofJobTTL / time.Second))
	return job, sa, nil
}

// proofMeta is the metadata of a proof object, controlled by m.
func proofMeta(m *v1alpha1.VirtualMachineMigration, name, component string) metav1.ObjectMeta {
	meta := childMeta(m, name, v1alpha1.ComponentProof, true)
	meta.Labels[v1alpha1.LabelProofOf] = component
	return meta
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
	switch component {
	case v1alpha1.ComponentTransfer:
		job, err = RenderTransferJob(mp, 1, cfg)
	case v1alpha1.ComponentConversion:
		job, err = RenderConversionJob(mp, 1, cfg)
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

// CreateProofJob creates the proof of a component's image: its
// ServiceAccount first, where it has one, then its Job.
func (s *Step) CreateProofJob(ctx context.Context, m *v1alpha1.VirtualMachineMigration, component string) error {
	job, sa, err := RenderProof(m, component, s.Config)
	if err != nil {
		return err
	}
	if sa != nil {
		if err := createIfAbsent(ctx, m, "service account", s.Kube.CoreV1().ServiceAccounts(m.Namespace), sa); err != nil {
			return err
		}
	}
	return createIfAbsent(ctx, m, "job", s.Kube.BatchV1().Jobs(m.Namespace), job)
}
