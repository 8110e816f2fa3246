package statemachine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/test/builders"
)

func TestRecordedSourceStandsForAReadOnlyWhileValidatingChecksTheCluster(t *testing.T) {
	now := builders.T0.Add(time.Hour)
	validating := func(mods ...func(*v1alpha1.VirtualMachineMigration)) *v1alpha1.VirtualMachineMigration {
		m := builders.Migration()
		m.Generation = 3
		m.Status.Phase = v1alpha1.PhaseValidating
		m.Status.ObservedGeneration = 3
		m.Status.Source = &v1alpha1.SourceInventory{Name: "web-01", PowerState: "poweredOn", ToolsRunningStatus: "guestToolsRunning", Snapshots: []string{"before-upgrade"}}
		m.Status.DryRun = &v1alpha1.DryRunStatus{ObservedGeneration: 3, Phase: v1alpha1.PhaseValidating, CheckedAt: metav1.NewTime(now.Add(-time.Minute))}
		for _, f := range mods {
			f(m)
		}
		return m
	}
	got := RecordedSource(validating(), now)
	require.NotNil(t, got, "a dry run of this pass a minute ago: its inventory stands")
	assert.True(t, got.Observed)
	assert.Equal(t, "web-01", got.Inventory.Name)
	assert.Equal(t, "poweredOn", got.PowerState)
	assert.True(t, got.ToolsRunning)
	assert.Equal(t, []string{"before-upgrade"}, got.Snapshots)

	for name, change := range map[string]func(*v1alpha1.VirtualMachineMigration){
		"no dry run yet": func(m *v1alpha1.VirtualMachineMigration) { m.Status.DryRun = nil },
		"the dry run is too old": func(m *v1alpha1.VirtualMachineMigration) {
			m.Status.DryRun.CheckedAt = metav1.NewTime(now.Add(-ValidatingDryRunTTL))
		},
		"the spec changed":           func(m *v1alpha1.VirtualMachineMigration) { m.Generation = 4 },
		"a dry run of an older spec": func(m *v1alpha1.VirtualMachineMigration) { m.Status.DryRun.ObservedGeneration = 2 },
		"the dry run made in Queued": func(m *v1alpha1.VirtualMachineMigration) { m.Status.DryRun.Phase = v1alpha1.PhaseQueued },
		"past Validating":            func(m *v1alpha1.VirtualMachineMigration) { m.Status.Phase = v1alpha1.PhaseQueued },
		"nothing recorded":           func(m *v1alpha1.VirtualMachineMigration) { m.Status.Source = nil },
		"being deleted":              func(m *v1alpha1.VirtualMachineMigration) { m.DeletionTimestamp = ptrTime(now) },
	} {
		assert.Nil(t, RecordedSource(validating(change), now), "%s: the source is read", name)
	}
}

func ptrTime(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t)
	return &mt
}
