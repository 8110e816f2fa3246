//go:build e2e

package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/test/builders"
)

// TestCDIRefusedTargetClaimsFailAndRestore: the namespace's ResourceQuota
// holds exactly the staging claims, so the transfer and the conversion run,
// and then CDI cannot make the target claim of any DataVolume the
// controller renders (with the real CDI: its DataVolume controller, whose
// claims the API server's quota admission refuses). The migration fails in
// Importing once no import progress was seen for its stall timeout past
// its retry deadline, saying what CDI said of each DataVolume; the
// rollback powers the source on again; no VM is created; deleting the
// failed migration removes its DataVolumes and staging claims.
func TestCDIRefusedTargetClaimsFailAndRestore(t *testing.T) {
	s := newStack(t, stackOptions{})
	const name = "cdi-quota-01"
	vm := s.addVM(name, 97)
	s.createQuota("staging-only", corev1.ResourceList{corev1.ResourcePersistentVolumeClaims: *resource.NewQuantity(int64(len(vm.Disks)), resource.DecimalSI)})
	mig := s.newMigration(name, name)
	builders.RetryDeadline(20 * time.Second)(mig)
	mig.Spec.Policy.StallTimeout = &v1alpha1.Duration{Duration: 30 * time.Second}
	m := s.create(mig)

	m = s.waitPhase(m.Name, v1alpha1.PhaseFailed, 5*time.Minute)
	e := m.Status.LastError
	require.NotNil(t, e, describe(m))
	t.Logf("the migration's last error: %s: %s", e.Reason, e.Message)
	assert.Equal(t, v1alpha1.PhaseImporting, e.Phase, "failed after the transfer and conversion, in the import: %+v", e)
	assert.Equal(t, statemachine.ReasonImportTimedOut, e.Reason, "%+v", e)
	assert.Contains(t, e.Message, fmt.Sprintf("0 of %d DataVolumes populated", len(vm.Disks)))
	assert.Contains(t, e.Message, "exceeded quota: staging-only", "what CDI said of its DataVolumes")
	for _, d := range m.Status.Disks {
		assert.Contains(t, e.Message, d.DataVolume, "the message names each DataVolume")
	}
	assert.Equal(t, "poweredOn", s.powerState(name), "the source is powered on again")
	if sc := m.Status.SourceControl; assert.NotNil(t, sc) {
		assert.NotNil(t, sc.PoweredOffAt, "the source was stopped before the import")
		assert.NotNil(t, sc.RestoredAt, "the restore is recorded: %+v", sc)
	}
	_, err := s.kv.KubevirtV1().VirtualMachines(s.ns).Get(s.ctx, name, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "no VirtualMachine was created: %v", err)
	// The failed migration's objects stay for inspection; deleting it
	// removes them, its DataVolumes (no VM owns them) included.
	require.NoError(t, s.mig.MigrationV1alpha1().VirtualMachineMigrations(s.ns).Delete(s.ctx, name, metav1.DeleteOptions{}))
	s.waitGone(name, 2*time.Minute)
	s.waitNoLeftovers(m, 2*time.Minute)
	dvs, err := s.cdi.CdiV1beta1().DataVolumes(s.ns).List(s.ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, dvs.Items, "the deletion removes the migration's DataVolumes")
}
