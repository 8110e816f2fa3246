package preflight

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// A source VM already migrated (issue 50, item 3): a VirtualMachine a
// migration made from it exists, in this namespace or another one the
// controller watches. A second migration of it is refused before anything
// is touched, unless spec.target.secondCopy asks for one; then its NICs
// get new MAC addresses, and a warning says so.

// copyOf is a VirtualMachine migrated from the clean inventory's VM.
func copyOf(ns, name string) v1alpha1.MigratedCopy {
	return v1alpha1.MigratedCopy{Namespace: ns, Name: name, MigratedBy: ns + "/" + name, Outcome: v1alpha1.OutcomeSucceeded,
		Identity: "instance UUID 5010a6c2-7f0e-4b1a-9b55-0a1b2c3d4e5f"}
}

// Reasons of the rule, as the API carries them.
const (
	reasonSourceAlreadyMigrated = "SourceAlreadyMigrated"
	reasonSecondCopy            = "SecondCopy"
)

func TestCheckSourceCopies(t *testing.T) {
	copies := func(c ...v1alpha1.MigratedCopy) func(*ClusterFacts) {
		return func(f *ClusterFacts) { f.SourceCopies = c }
	}
	second := func(s *v1alpha1.VirtualMachineMigrationSpec) { s.Target.SecondCopy = true }
	runCheckCases(t, map[string]checkCase{
		"migrated before, into another namespace": {
			mods: mods{cluster: copies(copyOf("team-b", "web-01"))},
			want: []want{{reasonSourceAlreadyMigrated, v1alpha1.SeverityBlocking,
				[]string{"team-b/web-01", "instance UUID 5010a6c2", "same MAC addresses", "spec.target.secondCopy"}}},
		},
		"migrated twice before": {
			mods: mods{cluster: copies(copyOf("apps", "web-01-old"), copyOf("team-b", "web-01"))},
			want: []want{{reasonSourceAlreadyMigrated, v1alpha1.SeverityBlocking, []string{"apps/web-01-old", "team-b/web-01"}}},
		},
		"a second copy asked for": {
			mods: mods{spec: second, cluster: copies(copyOf("team-b", "web-01"))},
			want: []want{{reasonSecondCopy, v1alpha1.SeverityWarning, []string{"team-b/web-01", "new MAC addresses"}}},
		},
		"a second copy asked for, no first one found": {
			mods: mods{spec: second},
			want: []want{{reasonSecondCopy, v1alpha1.SeverityWarning, []string{"new MAC addresses"}}},
		},
	})
}

// TestRefusalsNeverAdviseDeletingMigratedData: the names a migration
// needs are taken by what a migration made (the VM, its DataVolumes and
// their claims hold migrated data): the refusal says to migrate under
// other names, never to delete them.
func TestRefusalsNeverAdviseDeletingMigratedData(t *testing.T) {
	cluster := cleanCluster()
	cluster.TargetNameTaken, cluster.TargetMadeBy = true, "apps/web-01"
	cluster.TakenNames, cluster.TakenMigrated = []string{"DataVolume/web-01-disk-0", "PersistentVolumeClaim/web-01-disk-0"}, true
	cluster.SourceCopies = []v1alpha1.MigratedCopy{copyOf("apps", "web-01")}
	got := Check(cleanSpec(), cleanInventory(), cluster)
	reasons := map[string]bool{}
	for _, f := range got {
		reasons[f.Reason] = true
		assert.NotContains(t, strings.ToLower(f.Message), "delete", "%s advises deleting migrated data: %s", f.Reason, f.Message)
	}
	for _, r := range []string{ReasonTargetNameTaken, ReasonChildNameTaken, reasonSourceAlreadyMigrated} {
		assert.True(t, reasons[r], "no %s finding in %+v", r, got)
	}
}
