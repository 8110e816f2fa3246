package transfer

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"platform.example/vm-migration/pkg/transfer/wire"
)

// DefaultConfigMapMinInterval bounds the rate of ConfigMap patches: a
// snapshot is sent sooner only when a disk changes state.
const DefaultConfigMapMinInterval = 15 * time.Second

// ConfigMapPatcher merge-patches one ConfigMap's data.
type ConfigMapPatcher interface {
	// PatchData merges data into the ConfigMap's data.
	PatchData(ctx context.Context, data map[string]string) error
}

// ConfigMapSink reports progress (and the result) into one ConfigMap that
// the controller created for this attempt. The pod's service account needs
// only get and patch on that one ConfigMap (a Role with resourceNames).
type ConfigMapSink struct {
	// Patcher writes to the ConfigMap.
	Patcher ConfigMapPatcher
	// MinInterval between patches unless a disk changed state.
	MinInterval time.Duration

	mu         sync.Mutex
	last       time.Time
	lastStates string
}

// Report patches the progress key, at most every MinInterval unless a
// disk changed state.
func (s *ConfigMapSink) Report(ctx context.Context, p wire.Progress) error {
	states := make([]string, len(p.Disks))
	for i, d := range p.Disks {
		states[i] = d.State
	}
	joined := strings.Join(states, ",")
	s.mu.Lock()
	if joined == s.lastStates && p.Time.Sub(s.last) < s.MinInterval {
		s.mu.Unlock()
		return nil
	}
	s.last, s.lastStates = p.Time, joined
	s.mu.Unlock()
	data, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return s.Patcher.PatchData(ctx, map[string]string{wire.ConfigMapKeyProgress: string(data)})
}

// ReportResult patches the result key.
func (s *ConfigMapSink) ReportResult(ctx context.Context, r *wire.Result) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return s.Patcher.PatchData(ctx, map[string]string{wire.ConfigMapKeyResult: string(data)})
}

// clientPatcher patches a ConfigMap through the API server.
type clientPatcher struct {
	client          kubernetes.Interface
	namespace, name string
}

// PatchData sends a JSON merge patch of the data.
func (p *clientPatcher) PatchData(ctx context.Context, data map[string]string) error {
	body, err := json.Marshal(map[string]any{"data": data})
	if err != nil {
		return err
	}
	_, err = p.client.CoreV1().ConfigMaps(p.namespace).Patch(ctx, p.name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: "vm-transfer"})
	if err != nil {
		return fmt.Errorf("patching configmap %s/%s: %w", p.namespace, p.name, err)
	}
	return nil
}

// NewConfigMapSink reports into namespace/name through client.
func NewConfigMapSink(client kubernetes.Interface, namespacedName string) (*ConfigMapSink, error) {
	ns, name, ok := strings.Cut(namespacedName, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return nil, fmt.Errorf("progress configmap %q is not NAMESPACE/NAME", namespacedName)
	}
	return &ConfigMapSink{Patcher: &clientPatcher{client: client, namespace: ns, name: name}, MinInterval: DefaultConfigMapMinInterval}, nil
}

// NewInClusterConfigMapSink is NewConfigMapSink with the pod's service
// account credentials.
func NewInClusterConfigMapSink(namespacedName string) (*ConfigMapSink, error) {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("progress configmap: in-cluster credentials: %w", err)
	}
	cfg.UserAgent = "vm-transfer"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("progress configmap: %w", err)
	}
	return NewConfigMapSink(client, namespacedName)
}
