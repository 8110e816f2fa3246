//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	kubevirtv1 "kubevirt.io/api/core/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/test/builders"
	"platform.example/vm-migration/test/vcsimlocal"
)

// TestCancelWhileGuestShutsDown deletes a migration while the source's
// guest is still shutting down (StoppingSource, the guest takes its time
// as a real one does): the controller reads the source still on, and must
// not count it restored; it waits until the guest is off, powers it on,
// and only then releases the finalizer. The source ends poweredOn.
func TestCancelWhileGuestShutsDown(t *testing.T) {
	s := newStack(t, stackOptions{})
	const vm, shutdown = "guest-01", 8 * time.Second
	s.addVM(vm, 51)
	require.NoError(t, s.vc.SimulateGuest(s.ctx, vm, vcsimlocal.GuestOptions{ShutdownTakes: shutdown}))
	mig := s.newMigration(vm, vm)
	// The controller would power the VM off after this; the guest is done long before.
	builders.ShutdownTimeout(5 * time.Minute)(mig)
	m := s.create(mig)

	asked := s.waitPowerOp(vm, vcsimlocal.OpShutdownGuest, time.Minute)
	require.Equal(t, "poweredOn", s.powerState(vm), "the guest is shutting down")
	s.deleteMigration(m.Name)

	// While the guest shuts down, the migration stays, Cancelling, and says it waits for the stop.
	waiting := s.waitFor(m.Name, shutdown, "cancelling, waiting for the requested stop", func(m *v1alpha1.VirtualMachineMigration) bool {
		c := condition(m, statemachine.ConditionProgressing)
		return m.Status.Phase == v1alpha1.PhaseCancelling && c != nil && containsAll(c.Message, "the source VM is still on", "may still be under way")
	})
	sawWaiting := time.Now()
	assert.True(t, hasCondition(waiting, statemachine.ConditionProgressing, metav1.ConditionTrue, statemachine.ReasonWorking), describe(waiting))
	sc := waiting.Status.SourceControl
	require.NotNil(t, sc)
	assert.NotNil(t, sc.ShutdownRequestedAt)
	assert.Nil(t, sc.PowerOffRequestedAt, "the controller powered the source off itself")
	assert.Nil(t, sc.RestoredAt, "counted restored while the guest was still shutting down")
	assert.Equal(t, statemachine.PowerStateOn, sc.OriginalPowerState)

	s.waitGone(m.Name, 2*time.Minute)
	assert.Equal(t, "poweredOn", s.powerState(vm), "the source after the cancellation")
	ops := s.vc.PowerOps(vm)
	require.Equal(t, []string{vcsimlocal.OpShutdownGuest, vcsimlocal.OpGuestOff, vcsimlocal.OpPowerOn}, opNames(ops),
		"one guest shutdown, which ends, then one power-on")
	assert.GreaterOrEqual(t, ops[1].At.Sub(asked.At), shutdown, "the guest took its time")
	assert.True(t, sawWaiting.Before(ops[1].At), "the controller was seen waiting before the guest was off")
	assert.Equal(t, "poweredOff", ops[2].State, "powered on only once the guest was off")
	s.waitEvent(m, corev1.EventTypeNormal, statemachine.ReasonCancelled, "cancelling")
	s.waitEvent(m, corev1.EventTypeNormal, statemachine.ReasonSourceRestored, "powered on again")
	// The image proofs are shared by the namespace, no migration's: not its leftovers.
	s.waitNoLeftovers(m, time.Minute)
}

// TestDeleteAfterSucceeded deletes a migration that succeeded (staging
// objects retained): the staging objects go; the VM, still running, and
// its DataVolumes stay, even one a user took from the VM (no controller
// owner any more, still labelled for the migration); the source stays off.
func TestDeleteAfterSucceeded(t *testing.T) {
	s := newStack(t, stackOptions{})
	const name = "keep-01"
	s.addVM(name, 61)
	mig := s.newMigration(name, name)
	builders.Retain(mig)
	m := s.waitPhase(s.create(mig).Name, v1alpha1.PhaseSucceeded, 3*time.Minute)
	require.NotEmpty(t, s.leftovers(m), "staging objects retained after success")

	vm, err := s.kv.KubevirtV1().VirtualMachines(s.ns).Get(s.ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	dvUIDs := map[string]types.UID{}
	for _, d := range m.Status.Disks {
		dv, err := s.cdi.CdiV1beta1().DataVolumes(s.ns).Get(s.ctx, d.DataVolume, metav1.GetOptions{})
		require.NoError(t, err)
		dvUIDs[dv.Name] = dv.UID
	}
	// A user takes the first disk from the VM: it keeps the migration's label, loses its owner.
	taken := m.Status.Disks[0].DataVolume
	_, err = s.cdi.CdiV1beta1().DataVolumes(s.ns).Patch(s.ctx, taken, types.MergePatchType,
		[]byte(`{"metadata":{"ownerReferences":null}}`), metav1.PatchOptions{})
	require.NoError(t, err)

	s.deleteMigration(m.Name)
	s.waitGone(m.Name, time.Minute)
	s.waitNoLeftovers(m, time.Minute)

	got, err := s.kv.KubevirtV1().VirtualMachines(s.ns).Get(s.ctx, name, metav1.GetOptions{})
	require.NoError(t, err, "the migrated VM is gone with its migration")
	assert.Equal(t, vm.UID, got.UID)
	require.NotNil(t, got.Spec.RunStrategy)
	assert.Equal(t, kubevirtv1.RunStrategyAlways, *got.Spec.RunStrategy, "the migrated VM was halted")
	vmi, err := s.kv.KubevirtV1().VirtualMachineInstances(s.ns).Get(s.ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, kubevirtv1.Running, vmi.Status.Phase)
	for dvName, uid := range dvUIDs {
		dv, err := s.cdi.CdiV1beta1().DataVolumes(s.ns).Get(s.ctx, dvName, metav1.GetOptions{})
		if assert.NoError(t, err, "data volume %s is gone with the migration", dvName) {
			assert.Equal(t, uid, dv.UID, "data volume %s was replaced", dvName)
			// Handed over with the VM, the one a user took too.
			assert.NotContains(t, dv.Labels, v1alpha1.LabelMigrationUID, "data volume %s: the deleted migration's label", dvName)
			assert.Equal(t, s.ns+"/"+m.Name, dv.Annotations[v1alpha1.AnnotationMigratedBy], "data volume %s: where it came from", dvName)
		}
		_, err = s.kube.CoreV1().PersistentVolumeClaims(s.ns).Get(s.ctx, dvName, metav1.GetOptions{})
		assert.NoError(t, err, "the claim of data volume %s", dvName)
	}
	assert.Equal(t, "poweredOff", s.powerState(name), "the source after deleting the succeeded migration")
}

// TestForeignTransferAccessSurvives: ServiceAccounts, Roles and
// RoleBindings named as a migration's transfer attempt (naming.TransferAccess)
// but not labelled with its UID are never deleted. One migration finds
// its first attempt's names taken: it fails (NameTaken) with its source on
// again, and is deleted. Another is cancelled while its first attempt
// runs, with its second attempt's names taken by look-alikes (its name and
// component labels, no UID label). Both foreign sets survive untouched.
func TestForeignTransferAccessSurvives(t *testing.T) {
	s := newStack(t, stackOptions{})
	const taken, cancelled = "fa-taken", "fa-cancel"
	s.addVM(taken, 71)
	s.addVM(cancelled, 72)
	release := s.vc.HoldExtentReads(cancelled)
	t.Cleanup(release)
	foreign := append(
		s.createForeignAccess(nameOfAttempt(taken, 1), map[string]string{v1alpha1.LabelMigrationUID: "another-migration"}),
		s.createForeignAccess(nameOfAttempt(cancelled, 2), map[string]string{
			v1alpha1.LabelMigrationName: cancelled, v1alpha1.LabelComponent: v1alpha1.ComponentTransfer})...)

	mt := s.create(s.newMigration(taken, taken))
	mc := s.create(s.newMigration(cancelled, cancelled))

	mt = s.waitPhase(mt.Name, v1alpha1.PhaseFailed, 2*time.Minute)
	require.NotNil(t, mt.Status.LastError, describe(mt))
	assert.Equal(t, "NameTaken", mt.Status.LastError.Reason)
	assert.Equal(t, v1alpha1.PhaseTransferringDisks, mt.Status.LastError.Phase)
	assert.Contains(t, mt.Status.LastError.Message, "service account "+s.ns+"/"+nameOfAttempt(taken, 1)+" exists and does not belong to migration "+taken)
	assert.True(t, hasCondition(mt, statemachine.ConditionFailed, metav1.ConditionTrue, "NameTaken"), describe(mt))
	assert.Equal(t, "poweredOn", s.powerState(taken), "the source after the failure")

	mc = s.waitPhase(mc.Name, v1alpha1.PhaseTransferringDisks, 2*time.Minute)
	s.waitPodRunning(mc)
	own := s.leftovers(mc)
	assert.Subset(t, own, []string{"serviceaccount", "role", "rolebinding"}, "the running attempt's own access objects")

	s.deleteMigration(mt.Name)
	s.deleteMigration(mc.Name)
	s.waitGone(mt.Name, time.Minute)
	s.waitGone(mc.Name, time.Minute)
	s.waitNoLeftovers(mt, time.Minute)
	s.waitNoLeftovers(mc, time.Minute)
	for _, f := range foreign {
		assert.NoError(t, s.sameObject(f), "foreign %s", f.describe())
	}
	assert.Equal(t, "poweredOn", s.powerState(taken))
	assert.Equal(t, "poweredOn", s.powerState(cancelled), "the source after the cancellation")
}

// TestSecondMigrationOfSameSourceRefused: while one migration of a VM
// runs (its transfer held), a second migration of the same VM, into
// another target, is refused in Validating with SourceVMClaimed naming the
// first, before any power operation: the source's power operations are
// the first migration's only, before and after.
func TestSecondMigrationOfSameSourceRefused(t *testing.T) {
	s := newStack(t, stackOptions{})
	const vm = "shared-01"
	s.addVM(vm, 81)
	require.NoError(t, s.vc.SimulateGuest(s.ctx, vm, vcsimlocal.GuestOptions{}))
	release := s.vc.HoldExtentReads(vm)
	t.Cleanup(release)
	first := s.create(s.newMigration(vm, vm))
	first = s.waitPhase(first.Name, v1alpha1.PhaseTransferringDisks, 2*time.Minute)
	stopped := s.vc.PowerOps(vm)
	require.Equal(t, []string{vcsimlocal.OpShutdownGuest, vcsimlocal.OpGuestOff}, opNames(stopped), "the first migration stopped the source")

	second := s.newMigration(vm+"-again", vm)
	builders.TargetName(vm + "-b")(second)
	second = s.waitPhase(s.create(second).Name, v1alpha1.PhaseFailed, 2*time.Minute)
	require.NotNil(t, second.Status.LastError, describe(second))
	e := second.Status.LastError
	assert.Equal(t, statemachine.ReasonSourceVMClaimed, e.Reason)
	assert.Equal(t, v1alpha1.PhaseValidating, e.Phase)
	assert.Contains(t, e.Message, "migration "+s.ns+"/"+first.Name+" already migrates the source VM "+vm)
	assert.True(t, hasCondition(second, statemachine.ConditionFailed, metav1.ConditionTrue, statemachine.ReasonSourceVMClaimed), describe(second))
	assert.Nil(t, second.Status.SourceControl, "the refused migration recorded a power intent")
	s.waitEvent(second, corev1.EventTypeWarning, statemachine.ReasonSourceVMClaimed, s.ns+"/"+first.Name)
	s.waitEvent(second, corev1.EventTypeWarning, statemachine.PhaseChangedReason(v1alpha1.PhaseFailed), "Validating -> Failed", "before the source VM was touched: nothing to roll back")
	assert.Equal(t, stopped, s.vc.PowerOps(vm), "power operations after the refusal")
	// Its image proofs' pods, if any, go with the garbage collector.
	s.waitNoLeftovers(second, time.Minute)
	_, err := s.kv.KubevirtV1().VirtualMachines(s.ns).Get(s.ctx, vm+"-b", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the refused migration's target VM: %v", err)

	release()
	first = s.waitPhase(first.Name, v1alpha1.PhaseSucceeded, 3*time.Minute)
	assert.Equal(t, int32(0), first.Status.Retries)
	assert.Equal(t, stopped, s.vc.PowerOps(vm), "power operations at the end: the first migration's stop only")
	assert.Equal(t, "poweredOff", s.powerState(vm))
}

// TestCancelAfterStartKeepsTarget deletes a migration in Starting, once
// its target VM was asked to run (its instance held Scheduling): the
// target holds migrated data, so it is halted and kept with its
// DataVolumes, named in a TargetKept event; the staging objects go and
// the source is powered on again.
func TestCancelAfterStartKeepsTarget(t *testing.T) {
	s := newStack(t, stackOptions{vmiStartDelay: time.Hour})
	const name = "started-01"
	s.addVM(name, 121)
	m := s.create(s.newMigration(name, name))
	m = s.waitFor(m.Name, 2*time.Minute, "the target asked to run", func(m *v1alpha1.VirtualMachineMigration) bool {
		return m.Status.Phase == v1alpha1.PhaseStarting && m.Status.Target != nil && m.Status.Target.StartRequestedAt != nil
	})
	vm, err := s.kv.KubevirtV1().VirtualMachines(s.ns).Get(s.ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	var dvs []string
	dvUIDs := map[string]types.UID{}
	for _, d := range m.Status.Disks {
		dv, err := s.cdi.CdiV1beta1().DataVolumes(s.ns).Get(s.ctx, d.DataVolume, metav1.GetOptions{})
		require.NoError(t, err)
		dvs, dvUIDs[dv.Name] = append(dvs, dv.Name), dv.UID
	}

	s.deleteMigration(m.Name)
	s.waitGone(m.Name, 3*time.Minute)
	s.waitNoLeftovers(m, time.Minute)
	got, err := s.kv.KubevirtV1().VirtualMachines(s.ns).Get(s.ctx, name, metav1.GetOptions{})
	require.NoError(t, err, "the started target VM is gone with its migration")
	assert.Equal(t, vm.UID, got.UID)
	require.NotNil(t, got.Spec.RunStrategy)
	assert.Equal(t, kubevirtv1.RunStrategyHalted, *got.Spec.RunStrategy, "the kept target runs beside the restored source")
	// Handed over: no label of the deleted migration, an annotation
	// naming it (issue 25).
	released := func(o metav1.Object) {
		assert.NotContains(t, o.GetLabels(), v1alpha1.LabelMigrationUID, "%s: the deleted migration's label", o.GetName())
		assert.NotContains(t, o.GetLabels(), v1alpha1.LabelMigrationName, "%s: the deleted migration's label", o.GetName())
		assert.Equal(t, s.ns+"/"+m.Name, o.GetAnnotations()[v1alpha1.AnnotationMigratedBy], "%s: where it came from", o.GetName())
	}
	released(got)
	assert.NotContains(t, got.Spec.Template.ObjectMeta.Labels, v1alpha1.LabelMigrationUID, "the kept VM's template")
	s.waitNoVMI(name, time.Minute)
	for dvName, uid := range dvUIDs {
		dv, err := s.cdi.CdiV1beta1().DataVolumes(s.ns).Get(s.ctx, dvName, metav1.GetOptions{})
		if assert.NoError(t, err, "data volume %s is gone with the migration", dvName) {
			assert.Equal(t, uid, dv.UID, "data volume %s was replaced", dvName)
			released(dv)
		}
	}
	assert.Equal(t, "poweredOn", s.powerState(name), "the source after the cancellation")
	s.waitEvent(m, corev1.EventTypeWarning, statemachine.ReasonTargetKept,
		"VirtualMachine "+s.ns+"/"+name+" and its DataVolumes "+strings.Join(dvs, ", ")+" hold migrated data and are kept, halted")
	s.waitEvent(m, corev1.EventTypeNormal, statemachine.ReasonSourceRestored, "powered on again")
}

// waitNoVMI waits until the VM's instance is gone.
func (s *stack) waitNoVMI(name string, timeout time.Duration) {
	s.t.Helper()
	err := wait.PollUntilContextTimeout(s.ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		_, err := s.kv.KubevirtV1().VirtualMachineInstances(s.ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	require.NoError(s.t, err, "the instance of VM %s still exists after %s", name, timeout)
}
