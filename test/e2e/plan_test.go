//go:build e2e

package e2e

import (
	"bytes"
	"fmt"
	"io"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// TestPlanThenMigrate asks for a dry run: the migration validates, stores
// its plan and rests in Planned with the source untouched (still on, no
// intent recorded, no child but the plan). Turning planOnly off runs the
// real migration, and every object it creates is the object the plan
// listed: the same set, and every field the plan renders (metadata, spec,
// data, rules) the same in the created object; only what the API server
// sets (uid, resourceVersion, timestamps, defaults of fields we leave out)
// is not compared.
func TestPlanThenMigrate(t *testing.T) {
	s := newStack(t, stackOptions{})
	s.addVM("plan-01", 77)
	creations := s.watchCreations(t)
	m := s.newMigration("plan-01", "plan-01")
	m.Spec.PlanOnly = true
	m = s.create(m)
	m = s.waitFor(m.Name, 2*time.Minute, "a stored plan", func(m *v1alpha1.VirtualMachineMigration) bool {
		return m.Status.Phase == v1alpha1.PhasePlanned && m.Status.Plan != nil && len(m.Status.Plan.Objects) > 0
	})
	assert.Equal(t, "poweredOn", s.powerState("plan-01"), "a plan never touches the source")
	assert.Nil(t, m.Status.SourceControl, "a plan records no power intent")
	planKey := "ConfigMap/" + m.Status.Plan.ConfigMapName
	// The watches deliver creations asynchronously: wait until they saw
	// the plan's, then nothing else may be there.
	seen := creations.waitSeen(s, string(m.UID), m.Name, map[string]int{planKey: 1})
	assert.Equal(t, map[string]int{planKey: 1}, seen, "a plan creates nothing of its own but itself (its image proofs are shared by the namespace, no migration's)")
	cm, err := s.kube.CoreV1().ConfigMaps(s.ns).Get(s.ctx, m.Status.Plan.ConfigMapName, metav1.GetOptions{})
	require.NoError(t, err)
	planned := decodePlan(t, cm.Data[v1alpha1.PlanKeyObjects])
	require.Len(t, planned, len(m.Status.Plan.Objects))

	m.Spec.PlanOnly = false
	_, err = s.mig.MigrationV1alpha1().VirtualMachineMigrations(s.ns).Update(s.ctx, m, metav1.UpdateOptions{})
	require.NoError(t, err)
	m = s.waitPhase(m.Name, v1alpha1.PhaseSucceeded, 3*time.Minute)

	every := map[string]int{planKey: 1}
	for key := range planned {
		every[key] = 1
	}
	// The DataVolumes adopt the claims the controller made (planned):
	// CDI creates none.
	created := creations.waitSeen(s, string(m.UID), m.Name, every)
	want := map[string]int{planKey: 1}
	for key := range planned {
		want[key] = 1
	}
	assert.Equal(t, want, created, "the run creates exactly what the plan lists, each once")
	for key, p := range planned {
		obj := creations.created(string(m.UID), key)
		require.NotNil(t, obj, "%s was planned and never created", key)
		c, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		require.NoError(t, err)
		assert.Empty(t, notIn(normalize(p), normalize(c), ""), "%s differs from its plan", key)
	}
}

// decodePlan reads objects.yaml into objects by "Kind/name".
func decodePlan(t *testing.T, doc string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewBufferString(doc), 4096)
	for {
		var obj map[string]any
		err := dec.Decode(&obj)
		if err == io.EOF {
			return out
		}
		require.NoError(t, err)
		meta := obj["metadata"].(map[string]any)
		out[fmt.Sprintf("%s/%s", obj["kind"], meta["name"])] = obj
	}
}

// normalize drops what the API server sets, and the type, of an object.
func normalize(obj map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range obj {
		switch k {
		case "apiVersion", "kind", "status":
			continue
		}
		out[k] = v
	}
	if meta, ok := out["metadata"].(map[string]any); ok {
		m := map[string]any{}
		for k, v := range meta {
			switch k {
			case "uid", "resourceVersion", "creationTimestamp", "managedFields", "generation":
				continue
			}
			m[k] = v
		}
		out["metadata"] = m
	}
	return out
}

// notIn says where planned has a value that created does not hold ("" when
// every field of planned is in created with the same value).
func notIn(planned, created any, path string) string {
	switch p := planned.(type) {
	case map[string]any:
		c, ok := created.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s: planned %v, created %v", path, planned, created)
		}
		for k, v := range p {
			if v == nil {
				continue
			}
			if d := notIn(v, c[k], path+"."+k); d != "" {
				return d
			}
		}
		return ""
	case []any:
		c, ok := created.([]any)
		if !ok || len(c) != len(p) {
			return fmt.Sprintf("%s: planned %v, created %v", path, planned, created)
		}
		for i := range p {
			if d := notIn(p[i], c[i], fmt.Sprintf("%s[%d]", path, i)); d != "" {
				return d
			}
		}
		return ""
	}
	if !reflect.DeepEqual(fmt.Sprint(planned), fmt.Sprint(created)) {
		return fmt.Sprintf("%s: planned %v, created %v", path, planned, created)
	}
	return ""
}
