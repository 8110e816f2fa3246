package statemachine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/test/builders"
)

// A manifest applied again after its time to live deleted it (issue 50,
// item 2): its target VM exists, made from the same source by the
// migration that succeeded before. It ends Succeeded at once, reason
// AlreadyMigrated, touching nothing; no failure, no advice to delete.

// earlierCopy is the target VM an earlier migration of the same source
// made, in the migration's namespace, under the target name, as the
// controller finds it; mods change it.
func earlierCopy(mods ...func(*v1alpha1.MigratedCopy)) obsOpt {
	c := v1alpha1.MigratedCopy{
		Namespace: builders.Namespace, Name: builders.DefaultTarget, MigratedBy: builders.Namespace + "/" + builders.Name,
		Outcome: v1alpha1.OutcomeSucceeded, Identity: "instance UUID " + builders.Inventory().InstanceUUID,
	}
	for _, mod := range mods {
		mod(&c)
	}
	return func(o *Observation) { o.SourceCopies = append(o.SourceCopies, c) }
}

// takenByCopy is what preflight finds of that VM and its disks: their
// names taken.
func takenByCopy(o *Observation) {
	preflight(v1alpha1.SeverityBlocking, "TargetNameTaken")(o)
	preflight(v1alpha1.SeverityBlocking, "ChildNameTaken")(o)
}

// reapplied is the same migration created again: in Validating, its
// finalizer set, nothing else of it on record.
func reapplied(mods ...builders.MigrationMod) *v1alpha1.VirtualMachineMigration {
	return newMigration(append([]builders.MigrationMod{builders.Reached(v1alpha1.PhaseValidating)}, mods...)...)
}

// reasonAlreadyMigrated is the reason of the calm outcome, as the API
// carries it (kstatus, Argo CD and scripts read it).
const reasonAlreadyMigrated = "AlreadyMigrated"

func secondCopy(s *v1alpha1.VirtualMachineMigrationSpec) { s.Target.SecondCopy = true }

func TestAlreadyMigratedEndsCalm(t *testing.T) {
	m := reapplied()
	d := decide(m, newObs(sourceInventory, earlierCopy(), takenByCopy))

	require.Equal(t, v1alpha1.PhaseSucceeded, d.Status.Phase, "phase (lastError %+v)", d.Status.LastError)
	assert.Equal(t, ActionNone, d.Action.Type, "an action: nothing is to be done")
	assert.Nil(t, d.Status.LastError, "lastError: nothing failed")
	assert.Nil(t, d.Status.SourceControl, "status.sourceControl: the source is not touched")
	assert.Empty(t, d.Status.Disks, "status.disks: nothing is transferred")
	assert.Empty(t, d.Status.Preflight, "status.preflight: the names are taken by the migrated VM itself, which is no finding")
	if assert.NotNil(t, d.Status.AlreadyMigrated, "status.alreadyMigrated") {
		assert.Equal(t, builders.DefaultTarget, d.Status.AlreadyMigrated.Name)
		assert.Equal(t, builders.Namespace+"/"+builders.Name, d.Status.AlreadyMigrated.MigratedBy)
	}
	wantTime(t, "completionTime", d.Status.CompletionTime, 0)
	wantEvidence(t, d, v1alpha1.PhaseValidating, 0)

	for _, typ := range []string{ConditionReady, ConditionSucceeded} {
		c := wantCond(t, d, typ, metav1.ConditionTrue, reasonAlreadyMigrated)
		assert.Contains(t, c.Message, "already migrated", "%s message", typ)
		assert.Contains(t, c.Message, builders.DefaultTarget, "%s message names the VM", typ)
		assert.NotContains(t, c.Message, "delete", "%s message advises deleting migrated data", typ)
	}
	wantCond(t, d, ConditionFailed, metav1.ConditionFalse, "")
	wantCond(t, d, ConditionProgressing, metav1.ConditionFalse, reasonAlreadyMigrated)
	if c := condOf(d, ConditionStalled); c != nil {
		assert.Equal(t, metav1.ConditionFalse, c.Status, "Stalled")
	}
	for _, e := range d.Events {
		assert.False(t, e.Warning, "a Warning event: %s %s", e.Reason, e.Message)
		assert.NotContains(t, e.Message, "delete", "an event advises deleting migrated data: %s", e.Message)
	}

	// Terminal: it stays so, and its time to live does not delete it
	// (the GitOps tool would only create it again).
	done := after(m, d)
	again := decideAt(done, newObs(), time.Hour)
	assert.Equal(t, v1alpha1.PhaseSucceeded, again.Status.Phase, "the next decision")
	assert.Equal(t, ActionNone, again.Action.Type, "the next decision's action")
	ttl := int32(0)
	done.Spec.TTLSecondsAfterFinished = &ttl
	_, ok := TTLExpiry(done, time.Minute)
	assert.False(t, ok, "a time to live applies to the already-migrated outcome")
}

// condOf is the decision's condition of that type, nil when absent.
func condOf(d Decision, typ string) *metav1.Condition {
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == typ {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}

// TestAlreadyMigratedOnlyForASucceededCopy: the calm outcome needs the
// target VM itself to be the same source's copy, made by a migration
// that succeeded (or handed over by an earlier version, which did not
// say), and no second copy asked for; otherwise the preflight findings
// refuse the migration as before.
func TestAlreadyMigratedOnlyForASucceededCopy(t *testing.T) {
	for name, tc := range map[string]struct {
		m    *v1alpha1.VirtualMachineMigration
		copy func(*v1alpha1.MigratedCopy)
		want v1alpha1.Phase
	}{
		"handed over by an earlier version": {m: reapplied(), copy: func(c *v1alpha1.MigratedCopy) { c.Outcome = "" }, want: v1alpha1.PhaseSucceeded},
		"its migration failed, the started VM kept": {m: reapplied(), copy: func(c *v1alpha1.MigratedCopy) { c.Outcome = v1alpha1.OutcomeFailed },
			want: v1alpha1.PhaseFailed},
		"its migration was cancelled": {m: reapplied(), copy: func(c *v1alpha1.MigratedCopy) { c.Outcome = v1alpha1.OutcomeCancelled },
			want: v1alpha1.PhaseFailed},
		"another name":      {m: reapplied(), copy: func(c *v1alpha1.MigratedCopy) { c.Name = "other" }, want: v1alpha1.PhaseFailed},
		"another namespace": {m: reapplied(), copy: func(c *v1alpha1.MigratedCopy) { c.Namespace = "other" }, want: v1alpha1.PhaseFailed},
		"a second copy asked for": {m: reapplied(builders.WithSpec(secondCopy)), copy: func(*v1alpha1.MigratedCopy) {},
			want: v1alpha1.PhaseFailed},
	} {
		t.Run(name, func(t *testing.T) {
			d := decide(tc.m, newObs(sourceInventory, earlierCopy(tc.copy), takenByCopy))
			assert.Equal(t, tc.want, d.Status.Phase, "phase (lastError %+v)", d.Status.LastError)
			assert.Equal(t, tc.want == v1alpha1.PhaseSucceeded, d.Status.AlreadyMigrated != nil, "status.alreadyMigrated %+v", d.Status.AlreadyMigrated)
			if tc.want == v1alpha1.PhaseFailed {
				wantLastError(t, d, v1alpha1.PhaseValidating, ReasonPreflightFailed)
				assert.Nil(t, d.Status.SourceControl, "refused before the source was touched")
			}
		})
	}
}

// TestAlreadyMigratedValidatesAgainOnASpecChange: the manifest changed
// (another target name, a second copy asked for): the migration, which
// touched nothing, validates again, as one refused before the stop does.
func TestAlreadyMigratedValidatesAgainOnASpecChange(t *testing.T) {
	m := reapplied()
	done := after(m, decide(m, newObs(sourceInventory, earlierCopy(), takenByCopy)))
	require.Equal(t, v1alpha1.PhaseSucceeded, done.Status.Phase)

	changed := done.DeepCopy()
	changed.Generation++
	changed.Spec.Target.Name = "web-01-copy"
	d := decideAt(changed, newObs(), time.Minute)
	require.Equal(t, v1alpha1.PhaseValidating, d.Status.Phase, "the phase after the spec changed")
	assert.Nil(t, d.Status.AlreadyMigrated, "status.alreadyMigrated of the outcome before")
	assert.Nil(t, d.Status.CompletionTime, "completionTime of the outcome before")
	wantNoCond(t, d, ConditionSucceeded)
	wantCond(t, d, ConditionReady, metav1.ConditionFalse, "")

	// Under the other name the copy elsewhere refuses it (preflight:
	// SourceAlreadyMigrated), before anything is touched.
	v := after(changed, d)
	d = decideAt(v, newObs(sourceInventory, earlierCopy(), preflight(v1alpha1.SeverityBlocking, "SourceAlreadyMigrated")), 2*time.Minute)
	assert.Equal(t, v1alpha1.PhaseFailed, d.Status.Phase, "phase under another target name")
	assert.Nil(t, d.Status.AlreadyMigrated, "status.alreadyMigrated under another target name")
	assert.Nil(t, d.Status.SourceControl, "refused before the source was touched")
}
