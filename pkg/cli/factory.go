package cli

import (
	"fmt"
	"time"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"

	migclient "platform.example/vm-migration/pkg/generated/migration/clientset/versioned"
)

// Clients are the API clients the commands use.
type Clients struct {
	// Migration reads and writes VirtualMachineMigrations.
	Migration migclient.Interface
	// Kube reads plan ConfigMaps and events.
	Kube kubernetes.Interface
}

// Factory gives the commands their clients, namespace and clock.
type Factory interface {
	// Clients builds the API clients.
	Clients() (Clients, error)
	// Namespace is the namespace to work in (the --namespace flag, else the
	// kubeconfig context's, else "default"), and whether the flag set it.
	Namespace() (string, bool, error)
	// Now is the current time.
	Now() time.Time
}

// configFlagsFactory builds clients from kubectl's standard flags.
type configFlagsFactory struct {
	flags *genericclioptions.ConfigFlags
}

// NewFactory returns a Factory reading kubectl's kubeconfig, context,
// namespace and connection flags.
func NewFactory(flags *genericclioptions.ConfigFlags) Factory {
	return &configFlagsFactory{flags: flags}
}

func (f *configFlagsFactory) Clients() (Clients, error) {
	cfg, err := f.flags.ToRESTConfig()
	if err != nil {
		return Clients{}, fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.UserAgent = "kubectl-vmm"
	mig, err := migclient.NewForConfig(cfg)
	if err != nil {
		return Clients{}, fmt.Errorf("building the migration client: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return Clients{}, fmt.Errorf("building the kubernetes client: %w", err)
	}
	return Clients{Migration: mig, Kube: kube}, nil
}

func (f *configFlagsFactory) Namespace() (string, bool, error) {
	ns, explicit, err := f.flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", false, fmt.Errorf("reading the namespace from the kubeconfig: %w", err)
	}
	return ns, explicit, nil
}

func (f *configFlagsFactory) Now() time.Time { return time.Now() }
