//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/steps"
	"platform.example/vm-migration/pkg/steps/source"
	"platform.example/vm-migration/test/builders"
)

// TestQuotaRefusesStagingClaims: a ResourceQuota of the namespace allows
// no PersistentVolumeClaim, so the API server's quota admission refuses
// the staging claims once the source is off. The migration waits
// (Progressing=False, QuotaExceeded: a person can raise the quota) until
// its retry deadline, then fails and powers the source on again. The
// controller runs without its dry run before the stop, which would refuse
// the claims with the source untouched (TestRefusedBeforeStop/quota): this
// is a quota that only bites once the source is off.
func TestQuotaRefusesStagingClaims(t *testing.T) {
	s := newStack(t, stackOptions{extraControllerArgs: []string{"--dry-run-before-stop=false"}})
	const name, deadline = "quota-01", 20 * time.Second
	s.addVM(name, 91)
	s.createQuota("no-claims", corev1.ResourceList{corev1.ResourcePersistentVolumeClaims: resource.MustParse("0")})
	mig := s.newMigration(name, name)
	builders.RetryDeadline(deadline)(mig)
	m := s.create(mig)

	waiting := s.waitFor(m.Name, time.Minute, "waiting on the quota", func(m *v1alpha1.VirtualMachineMigration) bool {
		return hasCondition(m, statemachine.ConditionProgressing, metav1.ConditionFalse, steps.ReasonQuotaExceeded)
	})
	assert.Equal(t, v1alpha1.PhaseTransferringDisks, waiting.Status.Phase, describe(waiting))
	assert.Contains(t, condition(waiting, statemachine.ConditionProgressing).Message, "CreateStagingClaims failed")
	assert.Contains(t, condition(waiting, statemachine.ConditionProgressing).Message, "exceeded quota: no-claims")
	assert.Contains(t, condition(waiting, statemachine.ConditionProgressing).Message, "raise the namespace's ResourceQuota")
	s.waitEvent(waiting, corev1.EventTypeWarning, statemachine.ReasonActionFailed, "CreateStagingClaims failed", "exceeded quota: no-claims")

	m = s.waitPhase(m.Name, v1alpha1.PhaseFailed, 2*time.Minute)
	e := m.Status.LastError
	require.NotNil(t, e, describe(m))
	assert.Equal(t, steps.ReasonQuotaExceeded, e.Reason)
	assert.Equal(t, v1alpha1.PhaseTransferringDisks, e.Phase)
	assert.Contains(t, e.Message, "exceeded quota: no-claims")
	assert.Contains(t, e.Message, "retry deadline of 20s passed")
	require.NotNil(t, m.Status.StartTime)
	assert.GreaterOrEqual(t, e.Time.Sub(m.Status.StartTime.Time), deadline, "failed before the deadline: the quota is a person's to raise")
	assert.True(t, hasCondition(m, statemachine.ConditionFailed, metav1.ConditionTrue, steps.ReasonQuotaExceeded), describe(m))
	assert.Contains(t, condition(m, statemachine.ConditionFailed).Message, "failed in TransferringDisks: CreateStagingClaims failed")
	assert.Equal(t, "poweredOn", s.powerState(name), "the source after the failure")
	require.NotNil(t, m.Status.SourceControl)
	assert.NotNil(t, m.Status.SourceControl.PoweredOffAt, "the source was stopped before the claims")
	assert.NotNil(t, m.Status.SourceControl.RestoredAt)
	s.waitEvent(m, corev1.EventTypeWarning, statemachine.PhaseChangedReason(v1alpha1.PhaseFailed), "RollingBack -> Failed", "powered on again")
	claims, err := s.kube.CoreV1().PersistentVolumeClaims(s.ns).List(s.ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, claims.Items, "a claim got past the quota")
}

// createQuota creates a ResourceQuota and waits until the quota controller
// has counted its usage: until then admission refuses everything it
// covers with "status unknown", not "exceeded quota".
func (s *stack) createQuota(name string, hard corev1.ResourceList) {
	s.t.Helper()
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns}, Spec: corev1.ResourceQuotaSpec{Hard: hard}}
	_, err := s.kube.CoreV1().ResourceQuotas(s.ns).Create(s.ctx, q, metav1.CreateOptions{})
	require.NoError(s.t, err)
	err = wait.PollUntilContextTimeout(s.ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := s.kube.CoreV1().ResourceQuotas(s.ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && len(got.Status.Hard) == len(hard) && len(got.Status.Used) == len(hard), nil
	})
	require.NoError(s.t, err, "the quota controller never counted quota %s", name)
}

// TestUnlabelledCredentialsRefused: the migration names a Secret that has
// the vSphere login but not the opt-in label. The controller does not use
// it: the migration waits in Validating with CredentialsSecretNotFound, its
// message naming the label, and the source is not touched. Once the label
// is added, the migration proceeds to the end.
func TestUnlabelledCredentialsRefused(t *testing.T) {
	s := newStack(t, stackOptions{})
	const name, secretName = "cred-01", "plain-credentials"
	src := s.addVM(name, 101)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secretName, Namespace: s.ns},
		StringData: map[string]string{"username": s.vc.Username, "password": s.vc.Password, "thumbprint": s.vc.Thumbprint, "endpoints": s.vc.URL},
	}
	_, err := s.kube.CoreV1().Secrets(s.ns).Create(s.ctx, secret, metav1.CreateOptions{})
	require.NoError(t, err)
	mig := s.newMigration(name, name)
	builders.Credentials(secretName)(mig)
	m := s.create(mig)

	m = s.waitFor(m.Name, time.Minute, "refusing the unlabelled Secret", func(m *v1alpha1.VirtualMachineMigration) bool {
		return hasCondition(m, statemachine.ConditionProgressing, metav1.ConditionFalse, source.ReasonCredentialsSecretNotFound)
	})
	assert.Equal(t, v1alpha1.PhaseValidating, m.Status.Phase, describe(m))
	msg := condition(m, statemachine.ConditionProgressing).Message
	assert.Contains(t, msg, `no credentials Secret "`+secretName+`" with the label `+v1alpha1.LabelVSphereCredentials+`=true in namespace "`+s.ns+`"`)
	assert.Contains(t, msg, "label it")
	require.NotNil(t, m.Status.LastError, describe(m))
	assert.Equal(t, source.ReasonCredentialsSecretNotFound, m.Status.LastError.Reason)
	assert.Nil(t, m.Status.Source, "the source was read without credentials")
	assert.Nil(t, m.Status.SourceControl)
	assert.Equal(t, "poweredOn", s.powerState(name))

	patch := []byte(`{"metadata":{"labels":{"` + v1alpha1.LabelVSphereCredentials + `":"true"}}}`)
	_, err = s.kube.CoreV1().Secrets(s.ns).Patch(s.ctx, secretName, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
	m = s.waitPhase(m.Name, v1alpha1.PhaseSucceeded, 3*time.Minute)
	assert.Equal(t, int32(0), m.Status.Retries)
	s.verifyTargetDisks(m, src)
}
