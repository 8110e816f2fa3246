package pipeline

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// PodIdentity is the user, group and fsGroup the transfer, conversion and
// proof pods run as. A nil field is set by nobody here: the image's user
// and group apply, or what the platform assigns (OpenShift's
// restricted-v2 SCC gives every pod of a namespace the first uid of the
// namespace's range, and that range's first id as fsGroup, and refuses
// fixed ids outside it).
type PodIdentity struct {
	RunAsUser, RunAsGroup, FSGroup *int64
}

// DefaultPodIdentity runs the pods as StagingUID with it as fsGroup: the
// user virt-v2v images run as, so that the conversion can rewrite in
// place the images the transfer wrote, on clusters that assign no ids.
func DefaultPodIdentity() PodIdentity {
	return PodIdentity{RunAsUser: ptr.To(StagingUID), RunAsGroup: ptr.To(StagingUID), FSGroup: ptr.To(StagingUID)}
}

// identity is the pod identity in force: the configured one, else the default.
func (c Config) identity() PodIdentity {
	if c.PodIdentity == nil {
		return DefaultPodIdentity()
	}
	return *c.PodIdentity
}

// stagingPodSecurity is the pod security context of the transfer,
// conversion and proof pods: non-root, as the configured identity (the
// fsGroup applied only where the volume's root does not match), seccomp
// as given (RuntimeDefault when nil).
func stagingPodSecurity(cfg Config, seccomp *corev1.SeccompProfile) *corev1.PodSecurityContext {
	if seccomp == nil {
		seccomp = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	}
	id := cfg.identity()
	sc := &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      copyID(id.RunAsUser),
		RunAsGroup:     copyID(id.RunAsGroup),
		FSGroup:        copyID(id.FSGroup),
		SeccompProfile: seccomp.DeepCopy(),
	}
	if sc.FSGroup != nil {
		onRootMismatch := corev1.FSGroupChangeOnRootMismatch
		sc.FSGroupChangePolicy = &onRootMismatch
	}
	return sc
}

func copyID(id *int64) *int64 {
	if id == nil {
		return nil
	}
	return ptr.To(*id)
}

// PullSecrets are the image pull secrets of m's pods and of its transfer
// attempts' ServiceAccounts: the migration's own (spec.imagePullSecrets)
// first, then the controller's (Config.ImagePullSecrets), each name once.
func PullSecrets(m *v1alpha1.VirtualMachineMigration, cfg Config) []corev1.LocalObjectReference {
	var out []corev1.LocalObjectReference
	add := func(name string) {
		if name != "" && !slices.ContainsFunc(out, func(r corev1.LocalObjectReference) bool { return r.Name == name }) {
			out = append(out, corev1.LocalObjectReference{Name: name})
		}
	}
	for _, r := range m.SpecInForce().ImagePullSecrets {
		add(r.Name)
	}
	for _, name := range cfg.ImagePullSecrets {
		add(name)
	}
	return out
}

// renderAccess is a transfer attempt's progress access with the pull
// secrets its ServiceAccount carries.
func renderAccess(m *v1alpha1.VirtualMachineMigration, attempt int32, cfg Config) (*ProgressAccess, error) {
	a, err := RenderProgressAccess(m, attempt)
	if err != nil {
		return nil, err
	}
	a.ServiceAccount.ImagePullSecrets = PullSecrets(m, cfg)
	return a, nil
}
