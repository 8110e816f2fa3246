package v1alpha1_test

import (
	"reflect"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/untrusted"
	"platform.example/vm-migration/test/crdschema"
)

// TestBoundsMatchCRD holds the Go bounds and the CRD's together: each
// field's maxLength (or its items', or its maxItems) in
// manifests/crd is the constant the code cuts it to.
func TestBoundsMatchCRD(t *testing.T) {
	schema, err := crdschema.Load()
	require.NoError(t, err)
	const maxLength, maxItems = "maxLength", "maxItems"
	for _, tc := range []struct {
		path, keyword string
		want          int
	}{
		{"status.source.name", maxLength, v1alpha1.MaxSourceName},
		{"status.source.moRef", maxLength, v1alpha1.MaxSourceID},
		{"status.source.inventoryPath", maxLength, v1alpha1.MaxInventoryPath},
		{"status.source.biosUUID", maxLength, v1alpha1.MaxSourceID},
		{"status.source.instanceUUID", maxLength, v1alpha1.MaxSourceID},
		{"status.source.server", maxLength, v1alpha1.MaxSourceID},
		{"status.source.datacenter", maxLength, v1alpha1.MaxSourceName},
		{"status.source.host", maxLength, v1alpha1.MaxSourceName},
		{"status.source.hostMoRef", maxLength, v1alpha1.MaxSourceID},
		{"status.source.hostUUID", maxLength, v1alpha1.MaxSourceID},
		{"status.source.guestID", maxLength, v1alpha1.MaxSourceID},
		{"status.source.guestFamily", maxLength, v1alpha1.MaxSourceID},
		{"status.source.guestFullName", maxLength, v1alpha1.MaxGuestOSName},
		{"status.source.detectedGuestID", maxLength, v1alpha1.MaxSourceID},
		{"status.source.detectedGuestFullName", maxLength, v1alpha1.MaxGuestOSName},
		{"status.source.toolsRunningStatus", maxLength, v1alpha1.MaxSourceID},
		{"status.source.powerState", maxLength, v1alpha1.MaxSourceID},
		{"status.source.snapshots", maxItems, v1alpha1.MaxSnapshots},
		{"status.source.snapshots[]", maxLength, v1alpha1.MaxSourceName},
		{"status.source.guestNetworkRejected[]", maxLength, v1alpha1.MaxShortMessage},
		{"status.source.disks", maxItems, v1alpha1.MaxDisks},
		{"status.source.disks[].label", maxLength, v1alpha1.MaxDeviceLabel},
		{"status.source.disks[].fileName", maxLength, v1alpha1.MaxDatastorePath},
		{"status.source.disks[].datastore", maxLength, v1alpha1.MaxSourceName},
		{"status.source.disks[].datastoreURL", maxLength, v1alpha1.MaxDatastoreURL},
		{"status.source.disks[].provisioning", maxLength, v1alpha1.MaxSourceID},
		{"status.source.disks[].controllerType", maxLength, v1alpha1.MaxSourceID},
		{"status.source.disks[].controllerModel", maxLength, v1alpha1.MaxSourceID},
		{"status.source.disks[].diskMode", maxLength, v1alpha1.MaxSourceID},
		{"status.source.disks[].sharing", maxLength, v1alpha1.MaxSourceID},
		{"status.source.disks[].changeID", maxLength, v1alpha1.MaxSourceID},
		{"status.source.nics", maxItems, v1alpha1.MaxNICs},
		{"status.source.nics[].label", maxLength, v1alpha1.MaxDeviceLabel},
		{"status.source.nics[].mac", maxLength, v1alpha1.MaxSourceID},
		{"status.source.nics[].network", maxLength, v1alpha1.MaxSourceName},
		{"status.source.nics[].adapterType", maxLength, v1alpha1.MaxSourceID},
		{"status.conditions[].message", maxLength, v1alpha1.MaxConditionMessage},
		{"status.alreadyMigrated.namespace", maxLength, v1alpha1.MaxObjectName},
		{"status.alreadyMigrated.name", maxLength, v1alpha1.MaxObjectName},
		{"status.alreadyMigrated.migratedBy", maxLength, v1alpha1.MaxShortMessage},
		{"status.alreadyMigrated.outcome", maxLength, v1alpha1.MaxWord},
		{"status.alreadyMigrated.identity", maxLength, v1alpha1.MaxShortMessage},
		{"status.preflight[].message", maxLength, v1alpha1.MaxMessage},
		{"status.sourceControl.originalPowerState", maxLength, v1alpha1.MaxSourceID},
		{"status.sourceControl.powerOffTask", maxLength, v1alpha1.MaxSourceID},
		{"status.sourceControl.restoreAbandonedReason", maxLength, v1alpha1.MaxMessage},
		{"status.sourceControl.snapshots[].moRef", maxLength, v1alpha1.MaxSourceID},
		{"status.disks", maxItems, v1alpha1.MaxDisks},
		{"status.disks[].sha256", maxLength, v1alpha1.MaxSHA256},
		{"status.disks[].fullCopyReason", maxLength, v1alpha1.MaxShortMessage},
		{"status.disks[].importPhase", maxLength, v1alpha1.MaxWord},
		{"status.disks[].importProgress", maxLength, v1alpha1.MaxWord},
		{"status.disks[].checksums.converted", maxLength, v1alpha1.MaxSHA256},
		{"status.disks[].checksums.target", maxLength, v1alpha1.MaxSHA256},
		{"status.conversion.operatingSystem", maxLength, v1alpha1.MaxGuestOSName},
		{"status.conversion.warnings[]", maxLength, v1alpha1.MaxConversionWarning},
		{"status.conversion.interfaces[].source", maxLength, v1alpha1.MaxWord},
		{"status.conversion.interfaces[].message", maxLength, v1alpha1.MaxShortMessage},
		{"status.target.vmiPhase", maxLength, v1alpha1.MaxWord},
		{"status.target.interfaces[].name", maxLength, v1alpha1.MaxGuestReported},
		{"status.target.interfaces[].mac", maxLength, v1alpha1.MaxGuestReported},
		{"status.target.interfaces[].interfaceName", maxLength, v1alpha1.MaxGuestReported},
		{"status.target.interfaces[].infoSource", maxLength, v1alpha1.MaxGuestReported},
		{"status.target.interfaces[].ipAddresses[]", maxLength, v1alpha1.MaxGuestReported},
		{"status.evidence[].observed", maxLength, v1alpha1.MaxMessage},
		{"status.lastError.reason", maxLength, v1alpha1.MaxWord},
		{"status.lastError.message", maxLength, v1alpha1.MaxMessage},
		{"status.podWaiting.reason", maxLength, v1alpha1.MaxWord},
		{"status.podWaiting.message", maxLength, v1alpha1.MaxPodMessage},
		{"status.dryRun.objects[].message", maxLength, v1alpha1.MaxClusterMessage},
		{"status.imageProofs[].reason", maxLength, v1alpha1.MaxWord},
		{"status.imageProofs[].message", maxLength, v1alpha1.MaxClusterMessage},
		{"status.imageProofs[].output", maxLength, v1alpha1.MaxProofOutput},
	} {
		node := schema.At(tc.path)
		if !assert.NotNil(t, node, "%s: not in %s", tc.path, crdschema.File) {
			continue
		}
		got, ok := node.Int(tc.keyword)
		if assert.True(t, ok, "%s has no %s in %s", tc.path, tc.keyword, crdschema.File) {
			assert.Equal(t, tc.want, got, "%s: %s in %s, and the Go bound", tc.path, tc.keyword, crdschema.File)
		}
	}
}

// sourceChecked are the bounded strings Bound leaves as they are, as
// their sources check them whole (a value past the bound is refused
// there) or the controller writes them itself, each with why.
var sourceChecked = map[string]string{
	"status.source.nics[].guest.ipAddresses[].ip":      "an address in its canonical form (untrusted.Addr)",
	"status.source.nics[].guest.gateway":               "an address in its canonical form (untrusted.Addr)",
	"status.source.nics[].guest.dnsServers[]":          "an address in its canonical form (untrusted.Addr)",
	"status.conversion.interfaces[].name":              "an interface name (untrusted.InterfaceName)",
	"status.conversion.interfaces[].staticAddresses[]": "an address in its canonical form (untrusted.Addr)",
	"status.lastError.summary":                         "the message's short form (naming.Summarize), 80 characters",
	"status.downtime.duration":                         "status.downtime.seconds as the controller formats it (naming.Duration)",
	"status.disks[].targetClaimUID":                    "the UID the API server gave the claim, which the controller records",
	"status.disks[].checksumScheme":                    "a scheme the controller knows (the transfer's result is refused otherwise)",
	"status.conditions[].type":                         "the controller's constants",
	"status.conditions[].reason":                       "the controller's constants",
}

var index = regexp.MustCompile(`\[\d+\]`)

// TestBoundCutsEveryBoundedString fills every string of a status with
// 100 KB: once Bound, each one the schema bounds (but those sources check
// whole) is within its maxLength, in characters and in bytes, and ends
// with the cut marker; and a bound status is bound again unchanged.
func TestBoundCutsEveryBoundedString(t *testing.T) {
	schema, err := crdschema.Load()
	require.NoError(t, err)
	var st v1alpha1.VirtualMachineMigrationStatus
	fill(reflect.ValueOf(&st).Elem(), strings.Repeat("x", 100<<10))
	st.AppliedSpec = nil // the spec, which the API server validated

	st.Bound()

	values, err := schema.Strings("status", &st)
	require.NoError(t, err)
	bounded := 0
	for _, v := range values {
		max, ok := v.Schema.Int("maxLength")
		field := index.ReplaceAllString(v.Path, "[]")
		if !ok || sourceChecked[field] != "" {
			continue
		}
		bounded++
		assert.LessOrEqual(t, len(v.Text), max, "%s: bytes", v.Path)
		assert.LessOrEqual(t, utf8.RuneCountInString(v.Text), max, "%s: characters", v.Path)
		assert.True(t, strings.HasSuffix(v.Text, untrusted.CutMarker), "%s: the cut is not marked", v.Path)
	}
	assert.Greater(t, bounded, 60, "bounded strings seen")

	again := st.DeepCopy()
	again.Bound()
	assert.Equal(t, &st, again, "a bound status, bound again")
}

// TestBoundKeepsWhatFits: values within their bounds stay whole.
func TestBoundKeepsWhatFits(t *testing.T) {
	var st v1alpha1.VirtualMachineMigrationStatus
	fill(reflect.ValueOf(&st).Elem(), "web-01")
	want := st.DeepCopy()
	st.Bound()
	assert.Equal(t, want, &st)
}

// TestInventoryBoundSnapshots: past MaxSnapshots, the last name kept
// says how many more there are.
func TestInventoryBoundSnapshots(t *testing.T) {
	inv := &v1alpha1.SourceInventory{}
	for range v1alpha1.MaxSnapshots + 9 {
		inv.Snapshots = append(inv.Snapshots, "nightly")
	}
	inv.Bound()
	require.Len(t, inv.Snapshots, v1alpha1.MaxSnapshots)
	assert.Equal(t, "... and 10 more", inv.Snapshots[v1alpha1.MaxSnapshots-1])
	assert.Equal(t, "nightly", inv.Snapshots[v1alpha1.MaxSnapshots-2])
}

// TestInventoryCheckCounts: a VM with more disks or NICs than status
// keeps is refused, not cut.
func TestInventoryCheckCounts(t *testing.T) {
	inv := &v1alpha1.SourceInventory{Disks: make([]v1alpha1.SourceDisk, v1alpha1.MaxDisks), NICs: make([]v1alpha1.SourceNIC, v1alpha1.MaxNICs)}
	assert.NoError(t, inv.CheckCounts())
	inv.Disks = append(inv.Disks, v1alpha1.SourceDisk{})
	assert.EqualError(t, inv.CheckCounts(), "the VM has 257 disks, more than the 256 a migration takes")
	inv.Disks = inv.Disks[:1]
	inv.NICs = append(inv.NICs, v1alpha1.SourceNIC{})
	assert.EqualError(t, inv.CheckCounts(), "the VM has 17 NICs, more than the 16 a migration takes")
}

// fill sets every exported string under v to s, allocating pointers and
// giving lists two items.
func fill(v reflect.Value, s string) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fill(v.Elem(), s)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[metav1.Time]() {
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), s)
			}
		}
	case reflect.Slice:
		items := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			fill(items.Index(i), s)
		}
		v.Set(items)
	}
}
