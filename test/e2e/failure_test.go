//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
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
	if n := s.vc.RefusedReads("app-01"); n == 0 {
		t.Error("no download was refused: the fault did not fire")
	}
	if m.Status.Transfer == nil || m.Status.Transfer.Attempt != 2 || m.Status.Retries != 1 {
		t.Errorf("transfer %+v, retries %d; want attempt 2 after one retry", m.Status.Transfer, m.Status.Retries)
	}
	if m.Status.LastError == nil || !strings.Contains(m.Status.LastError.Message, "503") {
		t.Errorf("last error %+v, want the refused download", m.Status.LastError)
	}
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
	if m.Status.Transfer == nil || m.Status.Transfer.Attempt != 2 {
		t.Errorf("transfer %+v, want 2 attempts (1 retry)", m.Status.Transfer)
	}
	if m.Status.LastError == nil || m.Status.LastError.Phase != v1alpha1.PhaseTransferringDisks {
		t.Errorf("last error %+v, want one in TransferringDisks", m.Status.LastError)
	}
	if st := s.powerState("db-01"); st != "poweredOn" {
		t.Errorf("source %s after the failure, want poweredOn (as found)", st)
	}
	if sc := m.Status.SourceControl; sc == nil || sc.RestoredAt == nil {
		t.Errorf("source control %+v, want a restore recorded", sc)
	}
	if _, err := s.kv.KubevirtV1().VirtualMachines(s.ns).Get(s.ctx, "db-01", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a target VM exists after a failed transfer: %v", err)
	}
	if err := s.mig.MigrationV1alpha1().VirtualMachineMigrations(s.ns).Delete(s.ctx, m.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.waitGone(m.Name, time.Minute)
	s.waitNoLeftovers(m, time.Minute)
	if st := s.powerState("db-01"); st != "poweredOn" {
		t.Errorf("source %s after deleting the failed migration, want poweredOn", st)
	}
}

// TestCancel deletes a migration while it is in each of several phases:
// the finalizer is released, no staging child is left (staging volumes,
// Jobs and their pods, ConfigMaps, transfer access), no transfer keeps
// running, and the source is powered on again. A target VM that never ran
// goes with its DataVolumes; one that was started (Starting) holds
// migrated data: it is halted and kept with its DataVolumes.
func TestCancel(t *testing.T) {
	cases := []struct {
		phase v1alpha1.Phase
		opts  stackOptions
		// holdTransfer keeps the transfer's downloads waiting.
		holdTransfer bool
	}{
		{phase: v1alpha1.PhaseTransferringDisks, holdTransfer: true},
		{phase: v1alpha1.PhaseConverting, opts: stackOptions{conversionDuration: time.Hour}},
		{phase: v1alpha1.PhaseImporting, opts: stackOptions{cloneBytesPerSecond: 64 << 10}},
		// Starting: the started target is kept (TestCancelAfterStartKeepsTarget).
	}
	for _, tc := range cases {
		t.Run(string(tc.phase), func(t *testing.T) {
			s := newStack(t, tc.opts)
			s.addVM("web-02", 41)
			if tc.holdTransfer {
				release := s.vc.HoldExtentReads("web-02")
				t.Cleanup(release)
			}
			m := s.create(s.newMigration("web-02", "web-02"))
			m = s.waitPhase(m.Name, tc.phase, 2*time.Minute)
			switch tc.phase {
			case v1alpha1.PhaseTransferringDisks, v1alpha1.PhaseConverting:
				s.waitPodRunning(m)
			case v1alpha1.PhaseImporting:
				s.waitFor(m.Name, time.Minute, "a clone in progress", func(m *v1alpha1.VirtualMachineMigration) bool {
					for _, d := range m.Status.Disks {
						if d.ImportPhase == "CloneInProgress" {
							return true
						}
					}
					return false
				})
			}
			if err := s.mig.MigrationV1alpha1().VirtualMachineMigrations(s.ns).Delete(s.ctx, m.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			s.waitGone(m.Name, time.Minute)
			s.waitNoLeftovers(m, time.Minute)
			dvs, err := s.cdi.CdiV1beta1().DataVolumes(s.ns).List(s.ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelMigrationUID + "=" + string(m.UID)})
			if err != nil {
				t.Fatal(err)
			}
			if tc.phase == v1alpha1.PhaseStarting {
				if len(dvs.Items) != len(m.Status.Disks) {
					t.Errorf("%d data volumes kept, want the started target's %d", len(dvs.Items), len(m.Status.Disks))
				}
				s.waitHaltedVM("web-02", time.Minute)
			} else {
				if len(dvs.Items) != 0 {
					t.Errorf("%d data volumes left", len(dvs.Items))
				}
				s.waitNoVM("web-02", time.Minute)
			}
			if st := s.powerState("web-02"); st != "poweredOn" {
				t.Errorf("source %s after the cancellation, want poweredOn (as found)", st)
			}
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
	if err != nil {
		s.t.Fatalf("no pod of migration %s runs: %v", m.Name, err)
	}
}

// waitHaltedVM waits until the VM exists, halted, without an instance.
func (s *stack) waitHaltedVM(name string, timeout time.Duration) {
	s.t.Helper()
	err := wait.PollUntilContextTimeout(s.ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		vm, err1 := s.kv.KubevirtV1().VirtualMachines(s.ns).Get(ctx, name, metav1.GetOptions{})
		_, err2 := s.kv.KubevirtV1().VirtualMachineInstances(s.ns).Get(ctx, name, metav1.GetOptions{})
		return err1 == nil && vm.Spec.RunStrategy != nil && *vm.Spec.RunStrategy == kubevirtv1.RunStrategyHalted && apierrors.IsNotFound(err2), nil
	})
	if err != nil {
		s.t.Errorf("VM %s not kept halted without an instance after %s", name, timeout)
	}
}

// waitNoVM waits until neither the VM nor its instance exists.
func (s *stack) waitNoVM(name string, timeout time.Duration) {
	s.t.Helper()
	err := wait.PollUntilContextTimeout(s.ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		_, err1 := s.kv.KubevirtV1().VirtualMachines(s.ns).Get(ctx, name, metav1.GetOptions{})
		_, err2 := s.kv.KubevirtV1().VirtualMachineInstances(s.ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err1) && apierrors.IsNotFound(err2), nil
	})
	if err != nil {
		s.t.Errorf("VM or VMI %s still exists after %s", name, timeout)
	}
}
