package statemachine

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/untrusted"
	"platform.example/vm-migration/test/builders"
	"platform.example/vm-migration/test/crdschema"
)

// hugeInventory is the default inventory with 100 KB in every string a
// source (vSphere, VMware Tools from inside the guest) fills: the VM's
// name (in accented letters, two bytes each), its inventory path, guest
// OS names and ids, snapshot names, its disks' labels, backing files and
// datastores, its NICs' labels and networks.
func hugeInventory() *v1alpha1.SourceInventory {
	huge, accented := strings.Repeat("x", 100<<10), strings.Repeat("é", 50<<10)
	return builders.Inventory(func(inv *v1alpha1.SourceInventory) {
		inv.Name, inv.InventoryPath, inv.Datacenter, inv.Host = accented, "/dc1/vm/"+huge, huge, huge
		inv.GuestID, inv.GuestFamily, inv.GuestFullName = huge, huge, huge
		inv.DetectedGuestID, inv.DetectedGuestFullName, inv.ToolsRunningStatus = huge, accented, huge
		inv.Snapshots = []string{huge, huge}
		for i := range inv.Disks {
			d := &inv.Disks[i]
			d.Label, d.FileName, d.Datastore, d.DatastoreURL, d.DiskMode, d.ChangeID = huge, "[ds1] "+huge, huge, huge, huge, huge
		}
		for i := range inv.NICs {
			n := &inv.NICs[i]
			n.Label, n.Network, n.AdapterType = huge, huge, huge
		}
	})
}

// boundedFed are the fields hugeInventory fills, as status keeps them.
var boundedFed = regexp.MustCompile(`^status\.source\.(name|inventoryPath|datacenter|host|guestID|guestFamily|guestFullName|` +
	`detectedGuestID|detectedGuestFullName|toolsRunningStatus|snapshots\[\d+\]|` +
	`disks\[\d+\]\.(label|fileName|datastore|datastoreURL|diskMode|changeID)|nics\[\d+\]\.(label|network|adapterType))$`)

// TestInventoryOf100KBStringsIsStoredBound: a source that reports 100 KB
// names, paths and guest OS names gets a status the API server stores:
// every value within the schema's maxLength, each one fed cut with the
// marker, and the target VM's name derived from the name as stored.
func TestInventoryOf100KBStringsIsStoredBound(t *testing.T) {
	schema, err := crdschema.Load()
	require.NoError(t, err)
	m := newMigration(builders.Reached(v1alpha1.PhaseValidating), builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
		s.Source, s.Target = nil, nil
	}))
	obs := newObs(sourceInventory)
	obs.Source.Inventory = hugeInventory()

	d := decide(m, obs)

	require.NotNil(t, d.Status.Source, "status.source")
	violations, err := schema.Violations("status", &d.Status)
	require.NoError(t, err)
	assert.Empty(t, violations, "what the API server would refuse")
	values, err := schema.Strings("status", &d.Status)
	require.NoError(t, err)
	fed := 0
	for _, v := range values {
		if !boundedFed.MatchString(v.Path) {
			continue
		}
		fed++
		max, _ := v.Schema.Int("maxLength")
		assert.LessOrEqual(t, len(v.Text), max, "%s: bytes", v.Path)
		assert.True(t, strings.HasSuffix(v.Text, untrusted.CutMarker), "%s: the cut is not marked: %.40q", v.Path, v.Text)
	}
	assert.Equal(t, 30, fed, "values fed and seen in status")
	assert.Equal(t, TargetName(&m.Spec, d.Status.Source), d.Status.Target.Name, "the target's name, from the name as stored")
	assert.LessOrEqual(t, len(evidenceFor(d.Status, v1alpha1.PhaseValidating).Observed), v1alpha1.MaxMessage, "the evidence quoting the name")
}

// TestFailureOf100KBIsStoredBoundOnce: a 100 KB failure message (a
// vSphere fault, a peer's message) is kept cut with the marker, in
// status.lastError and in the conditions that say it; seen again, it
// writes nothing new (lastError's time stays).
func TestFailureOf100KBIsStoredBoundOnce(t *testing.T) {
	schema, err := crdschema.Load()
	require.NoError(t, err)
	huge := "vSphere says: " + strings.Repeat("fault ", 100<<10/6)
	m := newMigration(builders.Reached(v1alpha1.PhaseValidating))
	obs := newObs(func(o *Observation) {
		o.Source = SourceObservation{Error: &ObservedError{Class: ErrorNeedsUser, Reason: "CredentialsSecretMissing", Message: huge}}
	})

	d := decide(m, obs)

	violations, err := schema.Violations("status", &d.Status)
	require.NoError(t, err)
	assert.Empty(t, violations, "what the API server would refuse")
	require.NotNil(t, d.Status.LastError)
	assert.Len(t, d.Status.LastError.Message, v1alpha1.MaxMessage)
	assert.True(t, strings.HasSuffix(d.Status.LastError.Message, untrusted.CutMarker), "lastError.message: the cut is not marked")
	for _, c := range d.Status.Conditions {
		assert.LessOrEqual(t, len(c.Message), v1alpha1.MaxConditionMessage, "condition %s", c.Type)
	}
	progressing := wantCond(t, d, ConditionProgressing, metav1.ConditionFalse, "CredentialsSecretMissing")
	assert.True(t, strings.HasSuffix(progressing.Message, untrusted.CutMarker), "the Progressing condition: the cut is not marked")

	again := decideAt(after(m, d), obs, time.Minute)
	assertSemanticEqual(t, d.Status.LastError, again.Status.LastError, "the same failure seen again")
	assertSemanticEqual(t, d.Status, again.Status, "the status, written once")
}
