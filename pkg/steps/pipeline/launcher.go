package pipeline

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"platform.example/vm-migration/pkg/preflight"
)

// LabelPodSecurityEnforce is the namespace label PodSecurity admission
// enforces its level from.
const LabelPodSecurityEnforce = "pod-security.kubernetes.io/enforce"

// launcherTTL is how long what was read of a namespace and of KubeVirt's
// configuration serves.
const launcherTTL = time.Minute

// launcherCache keeps, per namespace, what the cluster says of KubeVirt's
// launcher pods there.
type launcherCache struct {
	mu   sync.Mutex
	byNS map[string]cachedLauncher
}

type cachedLauncher struct {
	at    time.Time
	facts preflight.LauncherFacts
}

// LauncherFacts reads what the cluster says of the pods KubeVirt will
// start for a VM in namespace ns: the PodSecurity level the namespace
// enforces and whether KubeVirt's configuration (its KubeVirt resource)
// gives virt-launcher a seccomp profile. What cannot be read (no KubeVirt
// resource, no permission) is left unknown, and then nothing is said.
func (s *Step) LauncherFacts(ctx context.Context, ns string) (preflight.LauncherFacts, error) {
	now := s.now()
	s.launcher.mu.Lock()
	if e, ok := s.launcher.byNS[ns]; ok && now.Sub(e.at) < launcherTTL {
		s.launcher.mu.Unlock()
		return e.facts, nil
	}
	s.launcher.mu.Unlock()
	var facts preflight.LauncherFacts
	namespace, err := s.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	switch {
	case err == nil:
		facts.NamespaceEnforce = namespace.Labels[LabelPodSecurityEnforce]
	case !apierrors.IsForbidden(err) && !apierrors.IsNotFound(err):
		return facts, fmt.Errorf("reading namespace %s: %w", ns, err)
	}
	kvs, err := s.KubeVirt.KubevirtV1().KubeVirts(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	switch {
	case err == nil:
		for i := range kvs.Items {
			if kv := &kvs.Items[i]; kv.DeletionTimestamp == nil {
				facts.KubeVirt = kv.Namespace + "/" + kv.Name
				facts.LauncherSeccomp = launcherSeccomp(kv)
				break
			}
		}
	case !apierrors.IsForbidden(err) && !apierrors.IsNotFound(err):
		return facts, fmt.Errorf("reading KubeVirt's configuration: %w", err)
	}
	s.launcher.mu.Lock()
	defer s.launcher.mu.Unlock()
	if s.launcher.byNS == nil {
		s.launcher.byNS = map[string]cachedLauncher{}
	}
	s.launcher.byNS[ns] = cachedLauncher{at: now, facts: facts}
	return facts, nil
}

// launcherSeccomp says whether KubeVirt gives virt-launcher a seccomp
// profile: a custom profile, runtime default or localhost.
func launcherSeccomp(kv *kubevirtv1.KubeVirt) bool {
	cfg := kv.Spec.Configuration.SeccompConfiguration
	if cfg == nil || cfg.VirtualMachineInstanceProfile == nil || cfg.VirtualMachineInstanceProfile.CustomProfile == nil {
		return false
	}
	p := cfg.VirtualMachineInstanceProfile.CustomProfile
	return p.RuntimeDefaultProfile || (p.LocalhostProfile != nil && *p.LocalhostProfile != "")
}
