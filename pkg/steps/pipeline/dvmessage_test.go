package pipeline

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/test/builders"
)

// TestPendingDataVolumeMessage: the observation of a DataVolume that
// waits carries what CDI says of it (its conditions that are not true),
// which the Importing wait and its failure quote.
func TestPendingDataVolumeMessage(t *testing.T) {
	m := builders.Migration(builders.Reached("Importing"))
	name := m.Status.Disks[0].DataVolume
	dv := builders.DataVolume(m, name, cdiv1.Pending, nil)
	dv.Status.Conditions = []cdiv1.DataVolumeCondition{
		{Type: cdiv1.DataVolumeBound, Status: corev1.ConditionFalse, Reason: "Pending", Message: "PVC " + name + " Pending"},
		{Type: cdiv1.DataVolumeRunning, Status: corev1.ConditionFalse, Reason: "ErrExceededQuota",
			Message: `persistentvolumeclaims "` + name + `" is forbidden: exceeded quota: storage, requested: requests.storage=10Gi`},
		{Type: cdiv1.DataVolumeReady, Status: corev1.ConditionFalse},
		{Type: "Other", Status: corev1.ConditionTrue, Message: "not a problem"},
	}
	f := newFakeStep(t, dv)
	var obs statemachine.Observation
	require.NoError(t, f.step.Observe(m, &obs))
	got, ok := obs.DataVolumes[name]
	require.True(t, ok, "the DataVolume is observed: %+v", obs.DataVolumes)
	assert.Equal(t, "Pending", got.Phase)
	assert.Equal(t, "Pending: PVC "+name+" Pending; ErrExceededQuota: persistentvolumeclaims \""+name+
		"\" is forbidden: exceeded quota: storage, requested: requests.storage=10Gi", got.Message)
}
