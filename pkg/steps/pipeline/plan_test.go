package pipeline

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
)

// TestPlanIsWhatTheStepsCreate: for each fixture, the objects of the plan
// are, in order, exactly the objects the step's creates send to the API
// server when the migration runs (UIDs the server assigns aside).
func TestPlanIsWhatTheStepsCreate(t *testing.T) {
	for name, build := range map[string]func() *v1alpha1.VirtualMachineMigration{
		"linux-bios": linuxBIOS, "windows-efi": windowsEFI, "ignored-nic": ignoredNIC,
	} {
		t.Run(name, func(t *testing.T) {
			m := build()
			m.Spec.PlanOnly = true
			cfg := testConfig
			cfg.TransferProgress = true
			plan, err := RenderPlan(m, cfg)
			require.NoError(t, err)

			f := newFakeStep(t)
			f.step.Config = cfg
			run := m.DeepCopy()
			run.Status = statemachine.PlannedStatus(m)
			ctx := context.Background()
			require.NoError(t, f.step.CreateStagingClaims(ctx, run))
			require.NoError(t, f.step.CreateTransferJob(ctx, run, 1))
			require.NoError(t, f.step.CreateConversionJob(ctx, run, 1))
			require.NoError(t, f.step.CreateDataVolumes(ctx, run))
			// The conversion reported every converted checksum.
			for i := range run.Status.Disks {
				run.Status.Disks[i].Checksums = &v1alpha1.DiskChecksums{Converted: "planned"}
			}
			require.NoError(t, f.step.CreateVerificationJob(ctx, run, 1))
			require.NoError(t, f.step.CreateVM(ctx, run))
			var created []runtime.Object
			for _, a := range f.Actions() {
				if a.GetVerb() == "create" {
					created = append(created, a.(interface{ GetObject() runtime.Object }).GetObject())
				}
			}
			require.Len(t, created, len(plan), "the plan lists every object the run creates")
			for i := range plan {
				assert.Equal(t, normalized(t, plan[i]), normalized(t, created[i]), "object %d", i)
			}
		})
	}
}

// normalized is an object as YAML without the UID the server assigns.
func normalized(t *testing.T, o runtime.Object) string {
	t.Helper()
	o = o.DeepCopyObject()
	acc, err := meta.Accessor(o)
	require.NoError(t, err)
	acc.SetUID("")
	data, err := yaml.Marshal(o)
	require.NoError(t, err)
	return string(data)
}

// TestPlanConfigMap: the stored plan holds the objects, their index and
// the conversion's domain, labelled and owned as a child of the migration.
func TestPlanConfigMap(t *testing.T) {
	m := windowsEFI()
	cm, err := RenderPlanConfigMap(m, testConfig)
	require.NoError(t, err)
	assert.Equal(t, "sql-02-plan", cm.Name)
	assert.Equal(t, v1alpha1.ComponentPlan, cm.Labels[v1alpha1.LabelComponent])
	assert.Equal(t, string(m.UID), cm.Labels[v1alpha1.LabelMigrationUID])
	require.Len(t, cm.OwnerReferences, 1)
	var index []v1alpha1.PlannedObject
	require.NoError(t, json.Unmarshal([]byte(cm.Data[v1alpha1.PlanKeyIndex]), &index))
	kinds := map[string]int{}
	for _, o := range index {
		kinds[o.Kind]++
	}
	assert.Equal(t, map[string]int{"PersistentVolumeClaim": 3, "ConfigMap": 2, "Job": 3, "DataVolume": 3, "VirtualMachine": 1}, kinds)
	assert.Equal(t, "VirtualMachine", index[len(index)-1].Kind)
	assert.Contains(t, cm.Data[v1alpha1.PlanKeyDomain], "<domain")
	assert.Contains(t, cm.Data[v1alpha1.PlanKeyObjects], "kind: VirtualMachine")
}
