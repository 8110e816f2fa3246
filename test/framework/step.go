package framework

import (
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	cdiclient "platform.example/vm-migration/pkg/generated/cdi/clientset/versioned"
	kvclient "platform.example/vm-migration/pkg/generated/kubevirt/clientset/versioned"
	"platform.example/vm-migration/pkg/steps/pipeline"
)

// PipelineStep is the controller's pipeline step with clients on cfg (a
// copy of it, the API server's warnings collected per request as the
// controller collects them), configured by pc.
func PipelineStep(cfg *rest.Config, pc pipeline.Config) (*pipeline.Step, error) {
	rc := rest.CopyConfig(cfg)
	rc.WarningHandlerWithContext = pipeline.WarningCollector{Next: rest.WarningLogger{}}
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("creating the Kubernetes client: %w", err)
	}
	kv, err := kvclient.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("creating the KubeVirt client: %w", err)
	}
	cdi, err := cdiclient.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("creating the CDI client: %w", err)
	}
	return &pipeline.Step{Kube: kube, KubeVirt: kv, CDI: cdi, Config: pc}, nil
}
