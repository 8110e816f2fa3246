package controller

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/test/builders"
)

// Issue 50, items 2 and 3, through the controller's caches: a VM a
// migration made from the source VM is found by the source's identity
// (its instance UUID; on a VM an earlier version handed over, its BIOS
// UUID and server), whatever watched namespace holds it.

// migratedVM is a VirtualMachine an earlier migration of the default
// inventory's VM made and handed over (its labels removed), in ns,
// named name; mods change its annotations.
func migratedVM(ns, name string, mods ...func(map[string]string)) *kubevirtv1.VirtualMachine {
	inv := builders.Inventory()
	a := map[string]string{
		v1alpha1.AnnotationSourceVM:           inv.Name,
		v1alpha1.AnnotationSourceUUID:         inv.BIOSUUID,
		v1alpha1.AnnotationSourceInstanceUUID: inv.InstanceUUID,
		v1alpha1.AnnotationSourceServer:       "0f9e8d7c-6b5a-4c3d-2e1f-0a9b8c7d6e5f",
		v1alpha1.AnnotationMigratedBy:         ns + "/" + builders.Name,
		v1alpha1.AnnotationOutcome:            v1alpha1.OutcomeSucceeded,
	}
	for _, mod := range mods {
		mod(a)
	}
	return &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("vm-uid-" + name), Annotations: a}}
}

// withServer is the default inventory read from the vCenter of migratedVM.
func withServer(inv *v1alpha1.SourceInventory) { inv.Server = "0f9e8d7c-6b5a-4c3d-2e1f-0a9b8c7d6e5f" }

// alreadyMigratedFixture is a fixture whose source step reads the
// default inventory, with objs in the cluster beside the migration.
func alreadyMigratedFixture(t *testing.T, m *v1alpha1.VirtualMachineMigration, objs ...*kubevirtv1.VirtualMachine) (*fixture, *fakeSource) {
	t.Helper()
	src := &fakeSource{obs: statemachine.SourceObservation{Observed: true, Inventory: builders.Inventory(withServer),
		PowerState: statemachine.PowerStateOff}}
	f := newFixture(t, src, m, builders.StorageClass("standard", true))
	for _, o := range objs {
		f.add(o)
	}
	return f, src
}

// terminal syncs m until it ends.
func (f *fixture) terminal(m *v1alpha1.VirtualMachineMigration) *v1alpha1.VirtualMachineMigration {
	f.t.Helper()
	return f.syncUntilTrue(m, "ended", func(m *v1alpha1.VirtualMachineMigration) bool { return statemachine.IsTerminal(m.Status.Phase) })
}

// touchedNothing requires that the source was only read, and that no
// object was created but the migration's own status and events.
func (f *fixture) touchedNothing(src *fakeSource, m *v1alpha1.VirtualMachineMigration) {
	f.t.Helper()
	for _, c := range src.calls {
		assert.Equal(f.t, "observe", c, "a call on the source VM: %v", src.calls)
	}
	assert.Nil(f.t, m.Status.SourceControl, "status.sourceControl: the source was touched")
	jobs, err := f.kube.BatchV1().Jobs("").List(f.ctx, metav1.ListOptions{})
	require.NoError(f.t, err)
	assert.Empty(f.t, jobs.Items, "Jobs created")
	dvs, err := f.cdi.CdiV1beta1().DataVolumes("").List(f.ctx, metav1.ListOptions{})
	require.NoError(f.t, err)
	assert.Empty(f.t, dvs.Items, "DataVolumes created")
	claims, err := f.kube.CoreV1().PersistentVolumeClaims("").List(f.ctx, metav1.ListOptions{})
	require.NoError(f.t, err)
	assert.Empty(f.t, claims.Items, "claims created")
}

// TestReappliedMigrationFindsItsVMAlreadyMigrated (item 2): the migration
// applied again after its time to live deleted it finds the VM it made,
// handed over, under its target name: it ends Succeeded, reason
// AlreadyMigrated, the source untouched.
func TestReappliedMigrationFindsItsVMAlreadyMigrated(t *testing.T) {
	for name, vm := range map[string]*kubevirtv1.VirtualMachine{
		"handed over by this version": migratedVM(builders.Namespace, builders.DefaultTarget),
		"handed over by an earlier version, without the instance UUID and the outcome": migratedVM(builders.Namespace, builders.DefaultTarget,
			func(a map[string]string) {
				delete(a, v1alpha1.AnnotationSourceInstanceUUID)
				delete(a, v1alpha1.AnnotationOutcome)
			}),
	} {
		t.Run(name, func(t *testing.T) {
			m := validatingMigration()
			f, src := alreadyMigratedFixture(t, m, vm)
			got := f.terminal(m)
			require.Equal(t, v1alpha1.PhaseSucceeded, got.Status.Phase, "phase (lastError %+v, preflight %+v)", got.Status.LastError, got.Status.Preflight)
			for _, typ := range []string{statemachine.ConditionReady, statemachine.ConditionSucceeded} {
				c := condition(got, typ)
				if assert.NotNil(t, c, typ) {
					assert.Equal(t, metav1.ConditionTrue, c.Status, "%s: %s", typ, c.Message)
					assert.Equal(t, "AlreadyMigrated", c.Reason, "%s: %s", typ, c.Message)
				}
			}
			if c := condition(got, statemachine.ConditionFailed); c != nil {
				assert.Equal(t, metav1.ConditionFalse, c.Status, "Failed: %s", c.Message)
			}
			f.touchedNothing(src, got)
			for _, e := range f.events {
				assert.False(t, strings.HasPrefix(e, "Warning"), "a Warning event: %s", e)
			}
		})
	}
}

// TestSecondMigrationOfAMigratedSourceIsRefused (item 3): the source VM
// was migrated into another namespace; a migration of it under another
// name is refused before anything is touched (SourceAlreadyMigrated),
// naming that VM.
func TestSecondMigrationOfAMigratedSourceIsRefused(t *testing.T) {
	for name, vm := range map[string]*kubevirtv1.VirtualMachine{
		"handed over": migratedVM("team-b", "web-01"),
		"still its migration's": migratedVM("team-b", "web-01", func(a map[string]string) {
			delete(a, v1alpha1.AnnotationMigratedBy)
			delete(a, v1alpha1.AnnotationOutcome)
		}),
	} {
		t.Run(name, func(t *testing.T) {
			if name == "still its migration's" {
				vm.Labels = map[string]string{v1alpha1.LabelMigrationUID: "uid-of-the-first", v1alpha1.LabelMigrationName: "web-01",
					v1alpha1.LabelComponent: v1alpha1.ComponentVM}
			}
			m := validatingMigration()
			f, src := alreadyMigratedFixture(t, m, vm)
			got := f.terminal(m)
			require.Equal(t, v1alpha1.PhaseFailed, got.Status.Phase, "phase (preflight %+v)", got.Status.Preflight)
			var found *v1alpha1.PreflightFinding
			for i := range got.Status.Preflight {
				if got.Status.Preflight[i].Reason == "SourceAlreadyMigrated" {
					found = &got.Status.Preflight[i]
				}
			}
			if assert.NotNil(t, found, "no SourceAlreadyMigrated finding in %+v", got.Status.Preflight) {
				assert.Equal(t, v1alpha1.SeverityBlocking, found.Severity)
				assert.Contains(t, found.Message, "team-b/web-01", "the finding names the VM")
				assert.Contains(t, found.Message, "spec.target.secondCopy", "the finding says how to ask for a second copy")
				assert.NotContains(t, found.Message, "delete", "the finding advises deleting migrated data")
			}
			f.touchedNothing(src, got)
		})
	}
}

// TestNameCacheKeepsWhatAMigrationMade: the VM name cache keeps, of a VM
// a migration made, the migration, how it ended and the source identity,
// and nothing else of its metadata; of a VM no migration made, nothing
// of the kind, whatever annotations it carries.
func TestNameCacheKeepsWhatAMigrationMade(t *testing.T) {
	cached := func(vm *kubevirtv1.VirtualMachine) any {
		t.Helper()
		got, err := stripNameMetadata(&metav1.PartialObjectMetadata{ObjectMeta: vm.ObjectMeta})
		require.NoError(t, err)
		return got
	}
	vm := migratedVM("team-b", "web-01")
	vm.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = `{"a":"long document"}`
	vm.Labels = map[string]string{"app": "web"}
	got := cached(vm)
	acc, err := meta.Accessor(got)
	require.NoError(t, err)
	assert.Equal(t, &metav1.ObjectMeta{Namespace: "team-b", Name: "web-01"}, acc, "the metadata kept")
	mark, ok := markOf(got)
	require.True(t, ok, "no mark kept")
	assert.Equal(t, madeMark{migration: "team-b/" + builders.Name, outcome: v1alpha1.OutcomeSucceeded,
		source: "instance/" + builders.Inventory().InstanceUUID}, mark)

	mark, ok = markOf(cached(migratedVM("team-b", "web-01", func(a map[string]string) { delete(a, v1alpha1.AnnotationSourceInstanceUUID) })))
	require.True(t, ok, "no mark kept of a VM an earlier version made")
	assert.Equal(t, "bios/"+builders.Inventory().BIOSUUID+"/0f9e8d7c-6b5a-4c3d-2e1f-0a9b8c7d6e5f", mark.source,
		"the source identity of a VM an earlier version made")

	labelled := migratedVM("team-b", "web-01", func(a map[string]string) {
		delete(a, v1alpha1.AnnotationMigratedBy)
		delete(a, v1alpha1.AnnotationOutcome)
	})
	labelled.Labels = map[string]string{v1alpha1.LabelMigrationUID: "u1", v1alpha1.LabelMigrationName: "web-01", "app": "web"}
	got = cached(labelled)
	mark, ok = markOf(got)
	require.True(t, ok, "no mark kept of a VM its migration still labels")
	assert.Equal(t, madeMark{migration: "web-01", source: "instance/" + builders.Inventory().InstanceUUID}, mark)
	acc, err = meta.Accessor(got)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{v1alpha1.LabelMigrationUID: "u1"}, acc.GetLabels(), "the labels kept")

	_, ok = markOf(cached(migratedVM("apps", "web-01", func(a map[string]string) { delete(a, v1alpha1.AnnotationMigratedBy) })))
	assert.False(t, ok, "a mark kept of a VM no migration made (its source annotations copied by hand)")
}
