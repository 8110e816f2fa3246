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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
)

// TestTransferFailsOnceThenRetried: the datastore refuses every download of
// the first transfer run (vcsim answers 503); the transfer Job fails, the
// controller starts a second attempt under a new name, and that one
// succeeds with the right bytes.
func TestTransferFailsOnceThenRetried(t *testing.T) {
	s := newStack(t, stackOptions{})
	src := s.addVM("app-01", 21)
	s.vc.FailExtentReads("app-01", 1)
	m := s.create(s.newMigration("app-01", "app-01"))
	m = s.waitPhase(m.Name, v1alpha1.PhaseSucceeded, 3*time.Minute)
	assert.NotZero(t, s.vc.RefusedReads("app-01"), "no download was refused: the fault did not fire")
	if assert.NotNil(t, m.Status.Transfer, "transfer status, want attempt 2 after one retry") {
		assert.Equal(t, int32(2), m.Status.Transfer.Attempt, "transfer %+v, want attempt 2 after one retry", m.Status.Transfer)
	}
	assert.Equal(t, int32(1), m.Status.Retries, "retries, want one")
	// The refused download is history once the retry succeeded: its
	// Retrying event tells it, status.lastError no longer does.
	assert.Nil(t, m.Status.LastError, "the error the retry recovered from")
	s.waitEvent(m, corev1.EventTypeWarning, statemachine.ReasonRetrying, statemachine.ReasonTransferFailed, "503")
	s.verifyTargetDisks(m, src)
	s.waitNoLeftovers(m, time.Minute)
}

// TestTransferAlwaysFails: every download fails; once the retry budget is
// spent the migration ends Failed, the source is powered on again as it
// was found, and deleting the migration removes what it left for
// inspection.
func TestTransferAlwaysFails(t *testing.T) {
	s := newStack(t, stackOptions{})
	s.addVM("db-01", 31)
	s.vc.FailExtentReads("db-01", -1)
	mig := s.newMigration("db-01", "db-01")
	mig.Spec.Policy.Retry.Limit = ptr.To[int32](1)
	m := s.create(mig)
	m = s.waitPhase(m.Name, v1alpha1.PhaseFailed, 3*time.Minute)
	if assert.NotNil(t, m.Status.Transfer, "transfer status, want 2 attempts (1 retry)") {
		assert.Equal(t, int32(2), m.Status.Transfer.Attempt, "transfer %+v, want 2 attempts (1 retry)", m.Status.Transfer)
	}
	if assert.NotNil(t, m.Status.LastError, "last error, want one in TransferringDisks") {
		assert.Equal(t, v1alpha1.PhaseTransferringDisks, m.Status.LastError.Phase, "last error %+v, want one in TransferringDisks", m.Status.LastError)
	}
	assert.Equal(t, "poweredOn", s.powerState("db-01"), "source after the failure, want poweredOn (as found)")
	if sc := m.Status.SourceControl; assert.NotNil(t, sc, "source control, want a restore recorded") {
		assert.NotNil(t, sc.RestoredAt, "source control %+v, want a restore recorded", sc)
	}
	_, err := s.kv.KubevirtV1().VirtualMachines(s.ns).Get(s.ctx, "db-01", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "a target VM exists after a failed transfer: %v", err)
	s.deleteMigration(m.Name)
	s.waitGone(m.Name, time.Minute)
	s.waitNoLeftovers(m, time.Minute)
	assert.Equal(t, "poweredOn", s.powerState("db-01"), "source after deleting the failed migration, want poweredOn")
}

// TestCancel deletes a migration while it is in each of several phases:
// the finalizer is released, no child is left (the claims the disks were
// written into, Jobs and their pods, ConfigMaps, transfer access), no transfer keeps
// running, and the source is powered on again. A target VM that never ran
// goes with its DataVolumes; one that was started (Starting) holds
// migrated data: it is halted and kept with its DataVolumes.
func TestCancel(t *testing.T) {
	cases := []struct {
		phase v1alpha1.Phase
		opts  stackOptions
		// vm is the source VM's name: "hold-conversion" in it keeps the
		// simulated conversion running (test/images).
		vm string
		// holdTransfer keeps the transfer's downloads waiting.
		holdTransfer bool
		// holdImport keeps the DataVolumes from being created (a quota):
		// the disks sit written and converted in their claims.
		holdImport bool
	}{
		{phase: v1alpha1.PhaseTransferringDisks, vm: "web-02", holdTransfer: true},
		{phase: v1alpha1.PhaseConverting, vm: "web-02-hold-conversion"},
		{phase: v1alpha1.PhaseImporting, vm: "web-02", holdImport: true},
		// Starting: the started target is kept (TestCancelAfterStartKeepsTarget).
	}
	for _, tc := range cases {
		t.Run(string(tc.phase), func(t *testing.T) {
			s := newStack(t, tc.opts)
			s.addVM(tc.vm, 41)
			if tc.holdTransfer {
				release := s.vc.HoldExtentReads(tc.vm)
				t.Cleanup(release)
			}
			m := s.create(s.newMigration(tc.vm, tc.vm))
			if tc.holdImport {
				s.waitPhase(m.Name, v1alpha1.PhaseTransferringDisks, 2*time.Minute)
				s.holdDataVolumes()
			}
			m = s.waitPhase(m.Name, tc.phase, 2*time.Minute)
			switch tc.phase {
			case v1alpha1.PhaseTransferringDisks, v1alpha1.PhaseConverting:
				s.waitPodRunning(m)
			case v1alpha1.PhaseImporting:
				s.waitEvent(m, corev1.EventTypeWarning, statemachine.ReasonActionFailed, "CreateDataVolumes failed", "exceeded quota")
			}
			s.deleteMigration(m.Name)
			s.waitGone(m.Name, time.Minute)
			s.waitNoLeftovers(m, time.Minute)
			dvs, err := s.cdi.CdiV1beta1().DataVolumes(s.ns).List(s.ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelMigrationUID + "=" + string(m.UID)})
			require.NoError(t, err, "listing the data volumes of migration %s", m.Name)
			assert.Empty(t, dvs.Items, "data volumes left")
			s.waitNoClaims(m, time.Minute)
			s.waitNoVM(tc.vm, time.Minute)
			assert.Equal(t, "poweredOn", s.powerState(tc.vm), "source after the cancellation, want poweredOn (as found)")
		})
	}
}

// waitPodRunning waits until a pod of one of the migration's Jobs runs.
func (s *stack) waitPodRunning(m *v1alpha1.VirtualMachineMigration) {
	s.t.Helper()
	err := wait.PollUntilContextTimeout(s.ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := s.kube.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelMigrationUID + "=" + string(m.UID)})
		if err != nil {
			return false, nil
		}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(s.t, err, "no pod of migration %s runs", m.Name)
}

// waitNoVM waits until neither the VM nor its instance exists.
func (s *stack) waitNoVM(name string, timeout time.Duration) {
	s.t.Helper()
	err := wait.PollUntilContextTimeout(s.ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		_, err1 := s.kv.KubevirtV1().VirtualMachines(s.ns).Get(ctx, name, metav1.GetOptions{})
		_, err2 := s.kv.KubevirtV1().VirtualMachineInstances(s.ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err1) && apierrors.IsNotFound(err2), nil
	})
	assert.NoError(s.t, err, "VM or VMI %s still exists after %s", name, timeout)
}
