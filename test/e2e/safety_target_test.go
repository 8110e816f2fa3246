//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	kubevirtv1 "kubevirt.io/api/core/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/test/vcsimlocal"
)

// TestCancelAfterStartWaitsForTheTargetInstance deletes a migration once
// its target VM was asked to run; the KubeVirt stand-in keeps the halted
// target's instance for a 20 s grace period, as KubeVirt does while it
// stops the guest. The source must stay off, the migration saying why,
// until the instance is gone: vcsim's record of the source's power-on
// comes after the API server deleted the instance.
func TestCancelAfterStartWaitsForTheTargetInstance(t *testing.T) {
	const grace = 20 * time.Second
	s := newStack(t, stackOptions{vmiStartDelay: time.Hour, vmiGracePeriod: grace})
	const name = "grace-01"
	s.addVM(name, 131)
	require.NoError(t, s.vc.SimulateGuest(s.ctx, name, vcsimlocal.GuestOptions{}))
	m := s.create(s.newMigration(name, name))
	s.waitFor(m.Name, 2*time.Minute, "the target asked to run", func(m *v1alpha1.VirtualMachineMigration) bool {
		return m.Status.Phase == v1alpha1.PhaseStarting && m.Status.Target != nil && m.Status.Target.StartRequestedAt != nil
	})
	vmi := s.waitVMI(name, time.Minute)
	gone := s.watchDeleted(vmi)

	s.deleteMigration(m.Name)
	waiting := s.waitFor(m.Name, grace, "waiting for the target's instance to go", func(m *v1alpha1.VirtualMachineMigration) bool {
		return hasCondition(m, statemachine.ConditionProgressing, metav1.ConditionFalse, statemachine.ReasonWaitingForTargetInstance)
	})
	assert.Contains(t, condition(waiting, statemachine.ConditionProgressing).Message, "VirtualMachineInstance "+s.ns+"/"+name)
	assert.Nil(t, waiting.Status.SourceControl.RestoreRequestedAt, "power-on requested while the instance exists: %s", describe(waiting))
	assert.Equal(t, "poweredOff", s.powerState(name), "the source while the target's instance exists")
	terminating, err := s.kv.KubevirtV1().VirtualMachineInstances(s.ns).Get(s.ctx, name, metav1.GetOptions{})
	require.NoError(t, err, "the instance is kept for its grace period")
	require.NotNil(t, terminating.DeletionTimestamp, "the halted target's instance is being deleted")
	deleteRequested := terminating.DeletionTimestamp.Time

	var deletedAt time.Time
	select {
	case deletedAt = <-gone:
	case <-time.After(grace + time.Minute):
		require.FailNow(t, "the instance was not deleted", "grace %s", grace)
	}
	s.waitGone(m.Name, time.Minute)
	assert.Equal(t, "poweredOn", s.powerState(name), "the source after the cancellation")
	ops := s.vc.PowerOps(name)
	require.NotEmpty(t, ops)
	on := ops[len(ops)-1]
	require.Equal(t, vcsimlocal.OpPowerOn, on.Op, "the last power operation: %+v", ops)
	assert.Equal(t, "poweredOff", on.State, "powered on from off")
	assert.True(t, on.At.After(deletedAt), "vcsim powered the source on at %s, before the API server deleted the instance at %s",
		on.At.Format(time.RFC3339Nano), deletedAt.Format(time.RFC3339Nano))
	// deletionTimestamp has a resolution of one second.
	assert.GreaterOrEqual(t, on.At.Sub(deleteRequested), grace-time.Second, "powered on before the instance's grace period was over")
	t.Logf("instance deletion requested %s (API server), instance deleted %s (watch), source powered on %s (vcsim): %s after the deletion",
		deleteRequested.Format(time.RFC3339), deletedAt.Format(time.RFC3339Nano), on.At.Format(time.RFC3339Nano), on.At.Sub(deletedAt))
	got, err := s.kv.KubevirtV1().VirtualMachines(s.ns).Get(s.ctx, name, metav1.GetOptions{})
	require.NoError(t, err, "the started target VM is kept")
	require.NotNil(t, got.Spec.RunStrategy)
	assert.Equal(t, kubevirtv1.RunStrategyHalted, *got.Spec.RunStrategy)
}

// waitVMI waits until the VM's instance exists and returns it.
func (s *stack) waitVMI(name string, timeout time.Duration) *kubevirtv1.VirtualMachineInstance {
	s.t.Helper()
	var vmi *kubevirtv1.VirtualMachineInstance
	err := wait.PollUntilContextTimeout(s.ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		got, err := s.kv.KubevirtV1().VirtualMachineInstances(s.ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		vmi = got
		return err == nil, nil
	})
	require.NoError(s.t, err, "the instance of VM %s does not exist after %s", name, timeout)
	return vmi
}

// watchDeleted watches an instance from its resource version and sends
// the time its deletion arrives from the API server.
func (s *stack) watchDeleted(vmi *kubevirtv1.VirtualMachineInstance) <-chan time.Time {
	s.t.Helper()
	w, err := s.kv.KubevirtV1().VirtualMachineInstances(s.ns).Watch(s.ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", vmi.Name).String(), ResourceVersion: vmi.ResourceVersion})
	require.NoError(s.t, err, "watching instance %s", vmi.Name)
	s.t.Cleanup(w.Stop)
	out := make(chan time.Time, 1)
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type == watch.Deleted {
				out <- time.Now()
				return
			}
		}
	}()
	return out
}
