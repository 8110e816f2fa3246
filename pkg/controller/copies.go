package controller

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/preflight"
)

// A source VM migrated once must not be migrated again without a word
// (issue 50): its copy runs with its MAC addresses. The VMs a migration
// made carry their source's identity (the source annotations) and the
// mark of the migration (its labels while it exists, AnnotationMigratedBy
// and AnnotationOutcome once handed over). The name cache of the VMs
// keeps both (a madeEntry's madeMark), so that a migration finds, in every
// watched namespace, the VMs already made from its source. It reads them
// only while it validates: no index is kept for it (one per migrated VM
// would cost more than the VM's entry itself).

// madeMark is what a name cache keeps of an object a migration made,
// beyond its UID label.
type madeMark struct {
	// migration is the migration that made it: the value of its
	// migration name label (a name, in the object's namespace) while it
	// carries the migration's UID label, else AnnotationMigratedBy
	// (namespace/name).
	migration string
	// outcome is AnnotationOutcome.
	outcome string
	// source is the source VM's identity (sourceKey), "" when it carries
	// none (a DataVolume, a claim).
	source string
}

// madeMarkOf is the mark of o, if a migration made it (madeByMigration)
// and it carries more of it than the UID label: a source identity or a
// hand-over annotation.
func madeMarkOf(o metav1.Object) (madeMark, bool) {
	if !madeByMigration(o) {
		return madeMark{}, false
	}
	a := o.GetAnnotations()
	mark := madeMark{outcome: a[v1alpha1.AnnotationOutcome], source: sourceKey(a)}
	if v1alpha1.MigrationUIDOf(o) != "" {
		mark.migration = o.GetLabels()[v1alpha1.LabelMigrationName]
	} else {
		mark.migration = a[v1alpha1.AnnotationMigratedBy]
	}
	return mark, mark.source != "" || v1alpha1.MigrationUIDOf(o) == ""
}

// markOf is the mark of a cached object: a madeEntry's, or, for any
// other object (a nameEntry, or metadata a test put in the cache), what
// madeMarkOf reads of it.
func markOf(obj any) (madeMark, bool) {
	if e, ok := obj.(*madeEntry); ok {
		return e.mark, true
	}
	if _, ok := obj.(*nameEntry); ok {
		return madeMark{}, false
	}
	acc, err := meta.Accessor(obj)
	if err != nil {
		return madeMark{}, false
	}
	return madeMarkOf(acc)
}

// madeByMigration reports whether a migration made the object: it carries
// a migration's UID label, or was handed over by one.
func madeByMigration(o metav1.Object) bool {
	return v1alpha1.MigrationUIDOf(o) != "" || o.GetAnnotations()[v1alpha1.AnnotationMigratedBy] != ""
}

// sourceKey is the source identity source annotations give:
// "instance/<instance UUID>", or, on a VM an earlier version made (no
// instance UUID annotation), "bios/<BIOS UUID>/<server UUID>"; "" for
// none.
func sourceKey(annotations map[string]string) string {
	if id := annotations[v1alpha1.AnnotationSourceInstanceUUID]; id != "" {
		return instanceKey(id)
	}
	if bios, server := annotations[v1alpha1.AnnotationSourceUUID], annotations[v1alpha1.AnnotationSourceServer]; bios != "" && server != "" {
		return biosKey(bios, server)
	}
	return ""
}

func instanceKey(uuid string) string { return "instance/" + strings.ToLower(uuid) }

func biosKey(bios, server string) string {
	return "bios/" + strings.ToLower(bios) + "/" + strings.ToLower(server)
}

// identity says a source key for a person.
func identity(key string) string {
	if id, ok := strings.CutPrefix(key, "instance/"); ok {
		return "instance UUID " + id
	}
	bios, server, _ := strings.Cut(strings.TrimPrefix(key, "bios/"), "/")
	return fmt.Sprintf("BIOS UUID %s on server %s", bios, server)
}

// sourceCopies lists the VMs that migrations other than m made from the
// source inv describes, in the watched namespaces, sorted by namespace
// and name.
func (c *Controller) sourceCopies(m *v1alpha1.VirtualMachineMigration, inv *v1alpha1.SourceInventory) ([]v1alpha1.MigratedCopy, error) {
	informer, ok := c.names[vmsResource.Resource]
	if !ok {
		return nil, fmt.Errorf("no name cache of %s", vmsResource.Resource)
	}
	var keys []string
	if inv.InstanceUUID != "" {
		keys = append(keys, instanceKey(inv.InstanceUUID))
	}
	if inv.BIOSUUID != "" && inv.Server != "" {
		keys = append(keys, biosKey(inv.BIOSUUID, inv.Server))
	}
	var out []v1alpha1.MigratedCopy
	for _, obj := range informer.GetIndexer().List() {
		mark, ok := markOf(obj)
		if !ok || mark.source == "" || !slices.Contains(keys, mark.source) {
			continue
		}
		acc, err := meta.Accessor(obj)
		if err != nil || v1alpha1.MigrationUIDOf(acc) == m.UID {
			continue
		}
		out = append(out, c.copyOf(acc, mark))
	}
	slices.SortFunc(out, func(a, b v1alpha1.MigratedCopy) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return out, nil
}

// copyOf is what a VM a migration made says of itself: the migration
// that made it, how that migration ended (AnnotationOutcome once handed
// over, else the phase of the migration, while it exists) and the source
// identity it carries.
func (c *Controller) copyOf(vm metav1.Object, mark madeMark) v1alpha1.MigratedCopy {
	cp := v1alpha1.MigratedCopy{Namespace: vm.GetNamespace(), Name: vm.GetName(), MigratedBy: mark.migration,
		Outcome: mark.outcome, Identity: identity(mark.source)}
	uid := v1alpha1.MigrationUIDOf(vm)
	if uid == "" || mark.migration == "" {
		return cp
	}
	cp.MigratedBy = vm.GetNamespace() + "/" + mark.migration
	if mig, err := c.migrations.VirtualMachineMigrations(vm.GetNamespace()).Get(mark.migration); err == nil && mig.UID == uid {
		switch mig.Status.Phase {
		case v1alpha1.PhaseSucceeded:
			cp.Outcome = v1alpha1.OutcomeSucceeded
		case v1alpha1.PhaseFailed:
			cp.Outcome = v1alpha1.OutcomeFailed
		default:
			cp.Outcome = v1alpha1.OutcomeInProgress
		}
	}
	return cp
}

// madeBy names the migration that made the object of that resource and
// name in m's namespace, when a migration other than m did: "" when none
// did, or it is m's, or absent.
func (c *Controller) madeBy(m *v1alpha1.VirtualMachineMigration, resource, name string) (string, error) {
	informer, ok := c.names[resource]
	if !ok {
		return "", fmt.Errorf("no name cache of %s", resource)
	}
	obj, exists, err := informer.GetIndexer().GetByKey(m.Namespace + "/" + name)
	if err != nil || !exists {
		return "", err
	}
	acc, err := meta.Accessor(obj)
	if err != nil {
		return "", fmt.Errorf("reading %s %s from the cache: %w", resource, name, err)
	}
	uid := v1alpha1.MigrationUIDOf(acc)
	if uid == m.UID {
		return "", nil
	}
	mark, marked := markOf(obj)
	switch {
	case marked && uid == "":
		return mark.migration, nil
	case marked && mark.migration != "":
		return m.Namespace + "/" + mark.migration, nil
	case uid != "":
		return "another migration", nil
	}
	return "", nil
}

// takenMigrated reports whether any of the taken names ("Kind/name") is
// of an object a migration made.
func (c *Controller) takenMigrated(m *v1alpha1.VirtualMachineMigration, taken []string) (bool, error) {
	resources := map[string]string{"PersistentVolumeClaim": claimsResource.Resource, "DataVolume": dataVolumesResource.Resource,
		"VirtualMachine": vmsResource.Resource}
	for _, t := range taken {
		kind, name, _ := strings.Cut(t, "/")
		resource, ok := resources[kind]
		if !ok {
			continue
		}
		by, err := c.madeBy(m, resource, name)
		if err != nil {
			return false, err
		}
		if by != "" {
			return true, nil
		}
	}
	return false, nil
}

// migratedFacts adds to the preflight facts what migrations made that
// concerns m: the VMs made from its source (SourceCopies), the migration
// that made the VM holding its target name (TargetMadeBy), and whether a
// migration made any other object whose name it needs (TakenMigrated).
func (c *Controller) migratedFacts(m *v1alpha1.VirtualMachineMigration, inv *v1alpha1.SourceInventory, facts *preflight.ClusterFacts) error {
	var err error
	if facts.SourceCopies, err = c.sourceCopies(m, inv); err != nil {
		return err
	}
	if facts.TargetNameTaken {
		if facts.TargetMadeBy, err = c.madeBy(m, vmsResource.Resource, facts.TargetName); err != nil {
			return err
		}
	}
	facts.TakenMigrated, err = c.takenMigrated(m, facts.TakenNames)
	return err
}
