package preflight

import (
	"fmt"
	"strings"

	"platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// sourceCopies refuses a migration of a source VM that a migration
// already made a VirtualMachine of (ClusterFacts.SourceCopies, in any
// watched namespace): a second copy would run beside the first with the
// same MAC addresses on the same networks, and the same guest
// configuration. spec.target.secondCopy asks for one anyway; its NICs
// then get new MAC addresses (PreserveMACs), which a warning says.
func (c *checker) sourceCopies() {
	copies := c.cluster.SourceCopies
	if !c.spec.Target.SecondCopy {
		if len(copies) == 0 {
			return
		}
		c.add(blocking(ReasonSourceAlreadyMigrated, fmt.Sprintf(
			"the source VM %s was already migrated: %s. A second copy would run beside it with the same MAC addresses on the same networks "+
				"(and the same guest configuration): nothing was touched. If a second copy is wanted, set spec.target.secondCopy: true "+
				"(its NICs then get new MAC addresses) and a free spec.target.name",
			c.inv.Name, describeCopies(copies))))
		return
	}
	found := "no VirtualMachine migrated from this source VM was found"
	if len(copies) > 0 {
		found = "the source VM was already migrated: " + describeCopies(copies)
	}
	c.add(warning(ReasonSecondCopy, fmt.Sprintf(
		"spec.target.secondCopy: this migration makes a second copy of the source VM %s (%s): its NICs get new MAC addresses, "+
			"whatever spec.target.preserveMACAddresses says, and its guest keeps the source's own network configuration "+
			"(static addresses included): check it before the copy joins the source's networks",
		c.inv.Name, found)))
}

// describeCopies names each copy, the migration that made it and what
// of the source it carries.
func describeCopies(copies []v1alpha1.MigratedCopy) string {
	parts := make([]string, 0, len(copies))
	for _, cp := range copies {
		s := fmt.Sprintf("VirtualMachine %s/%s", cp.Namespace, cp.Name)
		var about []string
		if cp.MigratedBy != "" {
			about = append(about, "made by migration "+cp.MigratedBy)
		}
		switch cp.Outcome {
		case v1alpha1.OutcomeFailed:
			about = append(about, "which failed after starting it")
		case v1alpha1.OutcomeCancelled:
			about = append(about, "which was cancelled after starting it")
		case v1alpha1.OutcomeInProgress:
			about = append(about, "still in progress")
		}
		if cp.Identity != "" {
			about = append(about, "carrying the source's "+cp.Identity)
		}
		if len(about) > 0 {
			s += " (" + strings.Join(about, ", ") + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}
