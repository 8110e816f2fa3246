//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/test/builders"
)

// TestOnePassFitsAQuotaOfItsDisks: the namespace's ResourceQuota holds
// exactly one claim per disk. The one-pass data path makes no other: the
// transfer writes into the claims the VM uses, the conversion runs in
// them, and CDI adopts them (the clone path needed twice as many, and
// stopped in Importing here). The migration succeeds within the quota.
func TestOnePassFitsAQuotaOfItsDisks(t *testing.T) {
	s := newStack(t, stackOptions{})
	const name = "one-pass-01"
	vm := s.addVM(name, 97)
	s.createQuota("disks-only", corev1.ResourceList{corev1.ResourcePersistentVolumeClaims: *resource.NewQuantity(int64(len(vm.Disks)), resource.DecimalSI)})
	m := s.create(s.newMigration(name, name))
	m = s.waitPhase(m.Name, v1alpha1.PhaseSucceeded, 5*time.Minute)
	s.verifyTargetDisks(m, vm)
	q, err := s.kube.CoreV1().ResourceQuotas(s.ns).Get(s.ctx, "disks-only", metav1.GetOptions{})
	require.NoError(t, err)
	used := q.Status.Used[corev1.ResourcePersistentVolumeClaims]
	t.Logf("claims in use: %s of %d", used.String(), len(vm.Disks))
	assert.Equal(t, int64(len(vm.Disks)), used.Value(), "one claim per disk, and no other")
}

// resourceDataVolumes is the object count quota of CDI's DataVolumes.
const resourceDataVolumes corev1.ResourceName = "count/datavolumes.cdi.kubevirt.io"

// TestRefusedDataVolumesFailAndRestore: once the source is stopped, the
// namespace's ResourceQuota admits no DataVolume (set after the dry runs,
// which would refuse them before the stop), so the transfer and the
// conversion run into the target claims, and then the API server refuses
// every DataVolume that would adopt them. The migration waits in Importing saying so, fails
// there once its retry deadline passed, and the rollback powers the
// source on again; no VM is created. The claims stay for inspection;
// deleting the failed migration removes them (no DataVolume adopted them).
func TestRefusedDataVolumesFailAndRestore(t *testing.T) {
	s := newStack(t, stackOptions{})
	const name = "dv-quota-01"
	s.addVM(name, 98)
	mig := s.newMigration(name, name)
	builders.RetryDeadline(20 * time.Second)(mig)
	m := s.create(mig)
	// After the dry runs before the stop, which would refuse the
	// DataVolumes (DryRunRefused) with the source untouched.
	s.waitPhase(m.Name, v1alpha1.PhaseTransferringDisks, 3*time.Minute)
	s.createQuota("no-datavolumes", corev1.ResourceList{resourceDataVolumes: *resource.NewQuantity(0, resource.DecimalSI)})

	m = s.waitPhase(m.Name, v1alpha1.PhaseFailed, 5*time.Minute)
	e := m.Status.LastError
	require.NotNil(t, e, describe(m))
	t.Logf("the migration's last error: %s: %s", e.Reason, e.Message)
	assert.Equal(t, v1alpha1.PhaseImporting, e.Phase, "failed after the transfer and conversion, in the import: %+v", e)
	assert.Contains(t, e.Message, "CreateDataVolumes failed")
	assert.Contains(t, e.Message, "exceeded quota: no-datavolumes")
	assert.Equal(t, "poweredOn", s.powerState(name), "the source is powered on again")
	if sc := m.Status.SourceControl; assert.NotNil(t, sc) {
		assert.NotNil(t, sc.PoweredOffAt, "the source was stopped before the import")
		assert.NotNil(t, sc.RestoredAt, "the restore is recorded: %+v", sc)
	}
	_, err := s.kv.KubevirtV1().VirtualMachines(s.ns).Get(s.ctx, name, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "no VirtualMachine was created: %v", err)
	for _, d := range m.Status.Disks {
		_, err := s.kube.CoreV1().PersistentVolumeClaims(s.ns).Get(s.ctx, d.StagingClaim, metav1.GetOptions{})
		assert.NoError(t, err, "the failed migration keeps claim %s for inspection", d.StagingClaim)
	}
	require.NoError(t, s.mig.MigrationV1alpha1().VirtualMachineMigrations(s.ns).Delete(s.ctx, name, metav1.DeleteOptions{}))
	s.waitGone(name, 2*time.Minute)
	s.waitNoLeftovers(m, 2*time.Minute)
	s.waitNoClaims(m, 2*time.Minute)
}

// waitNoClaims waits until no claim of the migration is left, its target
// claims included.
func (s *stack) waitNoClaims(m *v1alpha1.VirtualMachineMigration, timeout time.Duration) {
	s.t.Helper()
	var left []string
	err := wait.PollUntilContextTimeout(s.ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		pvcs, err := s.kube.CoreV1().PersistentVolumeClaims(s.ns).List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelMigrationUID + "=" + string(m.UID)})
		if err != nil {
			return false, nil
		}
		left = left[:0]
		for _, p := range pvcs.Items {
			left = append(left, p.Name)
		}
		return len(left) == 0, nil
	})
	require.NoError(s.t, err, "claims of migration %s left after %s: %v", m.Name, timeout, left)
}

// holdDataVolumes makes the namespace admit no DataVolume until the
// returned release is called: a migration past its dry runs (which would
// refuse its DataVolumes before the stop) then waits in Importing, its
// disks written and converted in their claims.
func (s *stack) holdDataVolumes() (release func()) {
	s.t.Helper()
	s.createQuota("hold-datavolumes", corev1.ResourceList{resourceDataVolumes: *resource.NewQuantity(0, resource.DecimalSI)})
	return func() {
		s.t.Helper()
		require.NoError(s.t, s.kube.CoreV1().ResourceQuotas(s.ns).Delete(s.ctx, "hold-datavolumes", metav1.DeleteOptions{}))
	}
}
