package preflight

import (
	"testing"

	"platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

func TestNetworkDefinitions(t *testing.T) {
	facts := func(state NetworkDefinitionState) func(*ClusterFacts) {
		return func(c *ClusterFacts) {
			c.NetworkDefinitions = map[string]NetworkDefinitionFact{"backend": {Definition: "migrations/backend", State: state}}
		}
	}
	runCheckCases(t, map[string]checkCase{
		"the definition exists":                   {mods: mods{cluster: facts(NetworkDefinitionFound)}},
		"not asked (no permission): nothing said": {},
		"the definition is missing: blocked before the stop": {
			mods: mods{cluster: facts(NetworkDefinitionMissing)},
			want: []want{{ReasonNetworkDefinitionMissing, v1alpha1.SeverityBlocking, []string{
				`Network adapter 2 (network "backend-pg")`, "Multus network backend", "NetworkAttachmentDefinition migrations/backend",
				`"failed to locate network attachment definition migrations/backend"`}}},
		},
		"no Multus API: warned": {
			mods: mods{cluster: facts(NetworkDefinitionNoAPI)},
			want: []want{{ReasonMultusAPIMissing, v1alpha1.SeverityWarning, []string{"k8s.cni.cncf.io/v1", `Network adapter 2 (network "backend-pg")`}}},
		},
		"two NICs on the missing network: one finding naming both": {
			mods: mods{cluster: facts(NetworkDefinitionMissing), inv: func(i *v1alpha1.SourceInventory) {
				i.NICs = append(i.NICs, v1alpha1.SourceNIC{Key: 4002, Label: "Network adapter 3", MAC: "00:50:56:00:00:03", Network: "backend-pg", AdapterType: "vmxnet3"})
			}},
			want: []want{{ReasonNetworkDefinitionMissing, v1alpha1.SeverityBlocking, []string{"Network adapter 2", "Network adapter 3"}}},
		},
		"the Multus network is mapped to Ignore: not judged": {
			mods: mods{cluster: facts(NetworkDefinitionMissing), spec: func(s *v1alpha1.VirtualMachineMigrationSpec) {
				s.Target.Networks[1] = v1alpha1.NetworkMapping{Source: "backend-pg", Type: v1alpha1.NetworkTypeIgnore}
			}},
		},
	})
}
