package pipeline

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/preflight"
	"platform.example/vm-migration/pkg/statemachine"
)

func TestLauncherFacts(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps", Labels: map[string]string{LabelPodSecurityEnforce: "restricted"}}}
	kv := &kubevirtv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: "kubevirt"}}
	f := newFakeStep(t, ns, kv)
	clock := clocktesting.NewFakePassiveClock(t0)
	f.step.Clock = clock
	got, err := f.step.LauncherFacts(context.Background(), "apps")
	require.NoError(t, err)
	assert.Equal(t, preflight.LauncherFacts{NamespaceEnforce: "restricted", KubeVirt: "kubevirt/kubevirt"}, got)

	kv.Spec.Configuration.SeccompConfiguration = &kubevirtv1.SeccompConfiguration{VirtualMachineInstanceProfile: &kubevirtv1.VirtualMachineInstanceProfile{
		CustomProfile: &kubevirtv1.CustomProfile{LocalhostProfile: ptr.To("kubevirt/kubevirt.json")}}}
	_, err = f.KV.KubevirtV1().KubeVirts("kubevirt").Update(context.Background(), kv, metav1.UpdateOptions{})
	require.NoError(t, err)
	got, err = f.step.LauncherFacts(context.Background(), "apps")
	require.NoError(t, err)
	assert.False(t, got.LauncherSeccomp, "read once a minute: the cached answer")
	clock.SetTime(t0.Add(2 * time.Minute))
	got, err = f.step.LauncherFacts(context.Background(), "apps")
	require.NoError(t, err)
	assert.True(t, got.LauncherSeccomp, "a localhost profile for virt-launcher")

	denied := newFakeStep(t, ns)
	denied.Kube.PrependReactor("get", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "apps", nil)
	})
	got, err = denied.step.LauncherFacts(context.Background(), "apps")
	require.NoError(t, err, "what the controller may not read is unknown, not an error")
	assert.Equal(t, preflight.LauncherFacts{}, got, "no KubeVirt resource, no namespace: nothing said")
}

// TestJobRefusalsAfterTheStop: a transfer Job without a pod whose pod the
// API server refused gets the refusal as its start problem.
func TestJobRefusalsAfterTheStop(t *testing.T) {
	m := linuxBIOS()
	m.Status.Phase = v1alpha1.PhaseTransferringDisks
	m.Status.Transfer = &v1alpha1.JobStatus{JobName: "web-01-migration-transfer-1", Attempt: 1}
	job, err := RenderTransferJob(m, 1, testConfig, nil)
	require.NoError(t, err)
	job.UID, job.CreationTimestamp = "job-1", metav1.NewTime(t0)
	event := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: m.Namespace},
		InvolvedObject: corev1.ObjectReference{Kind: "Job", Name: job.Name, UID: job.UID}, Reason: ReasonFailedCreate,
		Message: `Error creating: pods "x" is forbidden: exceeded quota: no-pods`, LastTimestamp: metav1.NewTime(t0)}
	f := newFakeStep(t, job, event)
	f.step.Clock, f.step.Config.ClusterFacts = clocktesting.NewFakePassiveClock(t0.Add(10*time.Second)), true
	obs := statemachine.Observation{}
	require.NoError(t, f.step.Observe(m, &obs))
	require.NotNil(t, obs.TransferJob)
	_, err = f.step.ObserveCluster(context.Background(), m, m.Status.Source, &obs)
	require.NoError(t, err)
	require.NotNil(t, obs.TransferJob.StartProblem)
	assert.Equal(t, ReasonFailedCreate, obs.TransferJob.StartProblem.Reason)
	assert.Contains(t, obs.TransferJob.StartProblem.Message, "exceeded quota: no-pods")
}

func TestStorageProfiles(t *testing.T) {
	known := &cdiv1.StorageProfile{ObjectMeta: metav1.ObjectMeta{Name: "fast"}, Status: cdiv1.StorageProfileStatus{
		Provisioner: ptr.To("csi.example.com"), ClaimPropertySets: []cdiv1.ClaimPropertySet{{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}}}}}
	unknown := &cdiv1.StorageProfile{ObjectMeta: metav1.ObjectMeta{Name: "local-path"}, Status: cdiv1.StorageProfileStatus{Provisioner: ptr.To("rancher.io/local-path")}}
	f := newFakeStep(t, known, unknown)
	clock := clocktesting.NewFakePassiveClock(t0)
	f.step.Clock = clock
	got, err := f.step.StorageProfiles(context.Background())
	require.NoError(t, err)
	assert.Equal(t, map[string]preflight.StorageProfileFact{
		"fast": {Provisioner: "csi.example.com", ClaimPropertySets: 1, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Sets: []preflight.ClaimProperties{{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}}}},
		"local-path": {Provisioner: "rancher.io/local-path"},
	}, got)

	// An admin fills the profile: read again once a minute, for every
	// migration.
	unknown.Spec.ClaimPropertySets = []cdiv1.ClaimPropertySet{{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}}}
	_, err = f.CDI.CdiV1beta1().StorageProfiles().Update(context.Background(), unknown, metav1.UpdateOptions{})
	require.NoError(t, err)
	got, _ = f.step.StorageProfiles(context.Background())
	assert.Zero(t, got["local-path"].ClaimPropertySets, "the cached answer within the minute")
	clock.SetTime(t0.Add(2 * time.Minute))
	got, _ = f.step.StorageProfiles(context.Background())
	assert.Equal(t, 1, got["local-path"].ClaimPropertySets, "the profile's spec, read again")

	denied := newFakeStep(t, known)
	denied.CDI.PrependReactor("list", "storageprofiles", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "cdi.kubevirt.io", Resource: "storageprofiles"}, "", nil)
	})
	got, err = denied.step.StorageProfiles(context.Background())
	require.NoError(t, err, "what the controller may not read is unknown, not an error")
	assert.Nil(t, got, "nothing said")
}
