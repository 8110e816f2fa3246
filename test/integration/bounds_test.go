//go:build integration

package integration

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	migrationv1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/untrusted"
	"platform.example/vm-migration/test/framework"
)

// TestStatusBoundsAtTheAPIServer: the API server refuses a status holding
// a 100 KB guest OS name, NIC label, VM name, disk path or failure
// message, or more NICs than the schema keeps, naming the field; the same
// status cut by Bound, as the controller writes it, is stored with each
// cut marked.
func TestStatusBoundsAtTheAPIServer(t *testing.T) {
	env := framework.Env(t)
	ns := env.Namespace(t)
	ctx := testContext(t)
	client := migrationClient(t, env).MigrationV1alpha1().VirtualMachineMigrations(ns)
	createAndGet(t, env, ns, newMigration("bounds-01"))
	vmm, err := client.Get(ctx, "bounds-01", metav1.GetOptions{})
	require.NoError(t, err, "getting bounds-01")

	huge := strings.Repeat("x", 100<<10)
	long := func(s *migrationv1alpha1.VirtualMachineMigrationStatus) {
		s.Source.Name, s.Source.GuestFullName, s.Source.DetectedGuestFullName = huge, huge, huge
		s.Source.Disks = []migrationv1alpha1.SourceDisk{{Key: 2000, Label: huge, FileName: "[ds1] " + huge, CapacityBytes: 1 << 30}}
		s.Source.NICs = []migrationv1alpha1.SourceNIC{{Key: 4000, Label: huge, Network: huge}}
		s.LastError = &migrationv1alpha1.MigrationError{Phase: migrationv1alpha1.PhaseValidating, Reason: "SourceError", Message: huge, Time: metav1.Now()}
	}
	for name, tc := range map[string]struct {
		mutate func(*migrationv1alpha1.VirtualMachineMigrationStatus)
		field  string
	}{
		"guest OS name": {func(s *migrationv1alpha1.VirtualMachineMigrationStatus) { s.Source.DetectedGuestFullName = huge }, "status.source.detectedGuestFullName"},
		"VM name":       {func(s *migrationv1alpha1.VirtualMachineMigrationStatus) { s.Source.Name = huge }, "status.source.name"},
		"NIC label": {func(s *migrationv1alpha1.VirtualMachineMigrationStatus) {
			s.Source.NICs = []migrationv1alpha1.SourceNIC{{Key: 4000, Label: huge}}
		}, "status.source.nics[0].label"},
		"disk path": {func(s *migrationv1alpha1.VirtualMachineMigrationStatus) {
			s.Source.Disks = []migrationv1alpha1.SourceDisk{{Key: 2000, FileName: huge}}
		}, "status.source.disks[0].fileName"},
		"failure message":   {func(s *migrationv1alpha1.VirtualMachineMigrationStatus) { long(s); s.Source = sampleStatus().Source }, "status.lastError.message"},
		"condition message": {func(s *migrationv1alpha1.VirtualMachineMigrationStatus) { s.Conditions[0].Message = huge }, "status.conditions[0].message"},
		"more NICs than kept": {func(s *migrationv1alpha1.VirtualMachineMigrationStatus) {
			s.Source.NICs = manyNICs(migrationv1alpha1.MaxNICs + 1)
		}, "status.source.nics"},
	} {
		t.Run(name, func(t *testing.T) {
			bad := vmm.DeepCopy()
			bad.Status = sampleStatus()
			tc.mutate(&bad.Status)
			_, err := client.UpdateStatus(ctx, bad, metav1.UpdateOptions{})
			assert.True(t, apierrors.IsInvalid(err), "want 422 (Invalid), got %v", err)
			assert.ErrorContains(t, err, tc.field)
		})
	}

	cut := vmm.DeepCopy()
	cut.Status = sampleStatus()
	long(&cut.Status)
	cut.Status.Conditions[0].Message = huge
	cut.Status.Bound()
	got, err := client.UpdateStatus(ctx, cut, metav1.UpdateOptions{})
	require.NoError(t, err, "the status cut by Bound")
	for field, v := range map[string]string{
		"status.source.name": got.Status.Source.Name, "status.source.guestFullName": got.Status.Source.GuestFullName,
		"status.source.detectedGuestFullName": got.Status.Source.DetectedGuestFullName,
		"status.source.disks[0].label":        got.Status.Source.Disks[0].Label, "status.source.disks[0].fileName": got.Status.Source.Disks[0].FileName,
		"status.source.nics[0].label": got.Status.Source.NICs[0].Label, "status.source.nics[0].network": got.Status.Source.NICs[0].Network,
		"status.lastError.message": got.Status.LastError.Message, "status.conditions[0].message": got.Status.Conditions[0].Message,
	} {
		assert.True(t, strings.HasSuffix(v, untrusted.CutMarker), "%s: stored without the cut marked (%d bytes)", field, len(v))
	}
	assert.Len(t, got.Status.Source.DetectedGuestFullName, migrationv1alpha1.MaxGuestOSName)
}

// manyNICs are n NICs with distinct keys.
func manyNICs(n int) []migrationv1alpha1.SourceNIC {
	nics := make([]migrationv1alpha1.SourceNIC, n)
	for i := range nics {
		nics[i] = migrationv1alpha1.SourceNIC{Key: int32(4000 + i), Label: "Network adapter"}
	}
	return nics
}
