package preflight

import (
	"fmt"
	"strings"

	"platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// Reasons of the Multus network definitions rule.
const (
	// ReasonNetworkDefinitionMissing: a NIC maps to a Multus network whose
	// NetworkAttachmentDefinition does not exist. KubeVirt's
	// virt-controller reads it before it renders the VM's launcher pod,
	// and without it never starts the VM.
	ReasonNetworkDefinitionMissing = "NetworkDefinitionMissing"
	// ReasonMultusAPIMissing: a NIC maps to a Multus network and the
	// cluster serves no NetworkAttachmentDefinitions (k8s.cni.cncf.io/v1):
	// Multus does not seem to be installed.
	ReasonMultusAPIMissing = "MultusAPIMissing"
)

// NetworkDefinitionState is what the cluster answered for one Multus
// network's NetworkAttachmentDefinition.
type NetworkDefinitionState string

// States of NetworkDefinitionFact.
const (
	// NetworkDefinitionFound: the definition exists.
	NetworkDefinitionFound NetworkDefinitionState = "Found"
	// NetworkDefinitionMissing: the API is served and has no such object.
	NetworkDefinitionMissing NetworkDefinitionState = "Missing"
	// NetworkDefinitionNoAPI: the cluster serves no
	// NetworkAttachmentDefinitions at all.
	NetworkDefinitionNoAPI NetworkDefinitionState = "NoAPI"
)

// NetworkDefinitionFact is what the cluster said of one Multus network.
type NetworkDefinitionFact struct {
	// Definition is the NetworkAttachmentDefinition asked for,
	// namespace/name (a bare name is the target namespace's).
	Definition string
	// State is the cluster's answer.
	State NetworkDefinitionState
}

// networkDefinitions blocks a migration whose Multus networks have no
// NetworkAttachmentDefinition, which KubeVirt would find only when it
// starts the migrated VM, after the source was stopped; and warns when
// the cluster serves no such definitions at all. A network the
// controller could not ask about (no permission) is not judged.
func (c *checker) networkDefinitions() {
	nics := map[string][]string{}
	var order []string
	for _, nic := range c.inv.NICs {
		m, ok := c.mapping(nic.Network)
		if !ok || m.Type != v1alpha1.NetworkTypeMultus || m.MultusNetworkName == "" {
			continue
		}
		if _, seen := nics[m.MultusNetworkName]; !seen {
			order = append(order, m.MultusNetworkName)
		}
		nics[m.MultusNetworkName] = append(nics[m.MultusNetworkName], fmt.Sprintf("%s (network %q)", nicName(nic), nic.Network))
	}
	for _, name := range order {
		fact, ok := c.cluster.NetworkDefinitions[name]
		if !ok {
			continue
		}
		which := strings.Join(nics[name], ", ")
		switch fact.State {
		case NetworkDefinitionMissing:
			c.add(blocking(ReasonNetworkDefinitionMissing, fmt.Sprintf(
				"%s maps to the Multus network %s, and no NetworkAttachmentDefinition %s exists: KubeVirt would not start the migrated VM "+
					"(virt-controller: \"failed to locate network attachment definition %s\") once the source is stopped; "+
					"create it, or map the network to another one", which, name, fact.Definition, fact.Definition)))
		case NetworkDefinitionNoAPI:
			c.add(warning(ReasonMultusAPIMissing, fmt.Sprintf(
				"%s maps to the Multus network %s, and the cluster serves no NetworkAttachmentDefinitions (k8s.cni.cncf.io/v1): "+
					"without Multus, KubeVirt cannot attach the interface and would not start the migrated VM", which, name)))
		}
	}
}
