package pipeline

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/preflight"
)

// Multus' API, where NetworkAttachmentDefinitions live.
const (
	multusGroupVersion    = "k8s.cni.cncf.io/v1"
	networkDefinitionsRes = "network-attachment-definitions"
)

// networkDefinitionTTL is how long what was read of a Multus network
// serves.
const networkDefinitionTTL = time.Minute

// networkDefinitionCache keeps what the cluster said of Multus networks,
// by namespace/name; the key "" holds whether the API is served.
type networkDefinitionCache struct {
	mu sync.Mutex
	by map[string]cachedNetworkDefinition
}

type cachedNetworkDefinition struct {
	at    time.Time
	state preflight.NetworkDefinitionState
}

// NetworkDefinitions reads, for each Multus network m's mappings name,
// whether its NetworkAttachmentDefinition exists, which KubeVirt's
// virt-controller needs before it renders the VM's launcher pod. A
// network it may not read (no permission, or a client without REST
// access) is left out, and then nothing is said of it.
func (s *Step) NetworkDefinitions(ctx context.Context, m *v1alpha1.VirtualMachineMigration) (map[string]preflight.NetworkDefinitionFact, error) {
	var out map[string]preflight.NetworkDefinitionFact
	for _, n := range m.Spec.Target.Networks {
		if n.Type != v1alpha1.NetworkTypeMultus || n.MultusNetworkName == "" {
			continue
		}
		ns, name, ok := strings.Cut(n.MultusNetworkName, "/")
		if !ok {
			ns, name = m.Namespace, n.MultusNetworkName
		}
		state, err := s.networkDefinition(ctx, ns, name)
		if err != nil {
			return nil, err
		}
		if state == "" {
			continue
		}
		if out == nil {
			out = map[string]preflight.NetworkDefinitionFact{}
		}
		out[n.MultusNetworkName] = preflight.NetworkDefinitionFact{Definition: ns + "/" + name, State: state}
	}
	return out, nil
}

// networkDefinition is the state of one definition, "" when unknown.
func (s *Step) networkDefinition(ctx context.Context, ns, name string) (preflight.NetworkDefinitionState, error) {
	served, err := s.cachedNetworkState(ctx, "", s.multusServed)
	if err != nil || served != preflight.NetworkDefinitionFound {
		return served, err
	}
	return s.cachedNetworkState(ctx, ns+"/"+name, func(ctx context.Context) (preflight.NetworkDefinitionState, error) {
		return s.readNetworkDefinition(ctx, ns, name)
	})
}

// cachedNetworkState answers key from the cache, or asks read.
func (s *Step) cachedNetworkState(ctx context.Context, key string, read func(context.Context) (preflight.NetworkDefinitionState, error)) (preflight.NetworkDefinitionState, error) {
	now := s.now()
	c := &s.networkDefs
	c.mu.Lock()
	if e, ok := c.by[key]; ok && now.Sub(e.at) < networkDefinitionTTL {
		c.mu.Unlock()
		return e.state, nil
	}
	c.mu.Unlock()
	state, err := read(ctx)
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.by == nil {
		c.by = map[string]cachedNetworkDefinition{}
	}
	c.by[key] = cachedNetworkDefinition{at: now, state: state}
	return state, nil
}

// multusServed asks discovery whether the cluster serves
// NetworkAttachmentDefinitions: Found, or NoAPI.
func (s *Step) multusServed(context.Context) (preflight.NetworkDefinitionState, error) {
	list, err := s.Kube.Discovery().ServerResourcesForGroupVersion(multusGroupVersion)
	switch {
	case apierrors.IsNotFound(err):
		return preflight.NetworkDefinitionNoAPI, nil
	case apierrors.IsForbidden(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("asking the API server for %s: %w", multusGroupVersion, err)
	}
	for _, r := range list.APIResources {
		if r.Name == networkDefinitionsRes {
			return preflight.NetworkDefinitionFound, nil
		}
	}
	return preflight.NetworkDefinitionNoAPI, nil
}

// readNetworkDefinition gets one NetworkAttachmentDefinition: Found,
// Missing, or "" when it may not be read.
func (s *Step) readNetworkDefinition(ctx context.Context, ns, name string) (preflight.NetworkDefinitionState, error) {
	rc := s.Kube.Discovery().RESTClient()
	if rc == nil {
		return "", nil
	}
	err := rc.Get().AbsPath("/apis", multusGroupVersion, "namespaces", ns, networkDefinitionsRes, name).Do(ctx).Error()
	switch {
	case err == nil:
		return preflight.NetworkDefinitionFound, nil
	case apierrors.IsNotFound(err):
		return preflight.NetworkDefinitionMissing, nil
	case apierrors.IsForbidden(err):
		return "", nil
	}
	return "", fmt.Errorf("reading NetworkAttachmentDefinition %s/%s: %w", ns, name, err)
}
