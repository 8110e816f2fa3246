package cli

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// TestDescribeFailedWithoutStartTime: a migration that failed with a
// completion time and no start time (issue 46: written so by a controller
// of another version) is described; its end is shown without a duration,
// which nothing measures.
func TestDescribeFailedWithoutStartTime(t *testing.T) {
	m := fixtures()["failed"]
	m.Status.StartTime = nil
	require.NotNil(t, m.Status.CompletionTime, "the fixture has ended")
	var buf bytes.Buffer
	require.NotPanics(t, func() { require.NoError(t, printDescribe(&buf, m, fixtureEvents(m), testNow)) })
	assert.Contains(t, buf.String(), "Started:      -\n")
	assert.Contains(t, buf.String(), "Completed:    2026-11-30T10:41:00Z\n")
}

// optionalFields visits every pointer in v, depth first, with its path.
func optionalFields(v reflect.Value, path string, visit func(path string, p reflect.Value)) {
	switch v.Kind() {
	case reflect.Pointer:
		visit(path, v)
		if !v.IsNil() {
			optionalFields(v.Elem(), path, visit)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() {
				optionalFields(v.Field(i), path+"."+f.Name, visit)
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			optionalFields(v.Index(i), fmt.Sprintf("%s[%d]", path, i), visit)
		}
	}
}

// statusVariant is a fixture with one optional field of its status
// changed: absent (nil), or present with nothing in it.
type statusVariant struct {
	name string
	m    *v1alpha1.VirtualMachineMigration
}

// statusVariants are, for every fixture and every pointer of its status,
// the fixture with that pointer nil and with it pointing at a zero value.
func statusVariants() []statusVariant {
	all := fixtures()
	var out []statusVariant
	for _, name := range fixtureNames() {
		var paths []string
		optionalFields(reflect.ValueOf(&all[name].Status).Elem(), "status", func(path string, _ reflect.Value) { paths = append(paths, path) })
		for i, path := range paths {
			for _, zero := range []bool{false, true} {
				m := all[name].DeepCopy()
				n := 0
				optionalFields(reflect.ValueOf(&m.Status).Elem(), "status", func(_ string, p reflect.Value) {
					if n++; n-1 != i {
						return
					}
					if zero {
						p.Set(reflect.New(p.Type().Elem()))
					} else {
						p.SetZero()
					}
				})
				how := "nil"
				if zero {
					how = "empty"
				}
				out = append(out, statusVariant{name: fmt.Sprintf("%s, %s %s", name, path, how), m: m})
			}
		}
	}
	return out
}

// TestViewsTakeAnyStatus: every view shows every status the API server
// can hold, whichever optional field a controller (of this version or
// another) left out or wrote empty (issue 46: describe crashed on a
// failure with a completion time and no start time).
func TestViewsTakeAnyStatus(t *testing.T) {
	others := allFixtures()
	variants := statusVariants()
	require.Greater(t, len(variants), 500, "variants")
	for _, v := range variants {
		m := v.m
		views := map[string]func(w *bytes.Buffer) error{
			"describe": func(w *bytes.Buffer) error { return printDescribe(w, m, fixtureEvents(m), testNow) },
			"get":      func(w *bytes.Buffer) error { return printProgress(w, m, testNow) },
			"watch line": func(w *bytes.Buffer) error {
				_, err := w.WriteString(progressLine(m))
				return err
			},
			"list": func(w *bytes.Buffer) error {
				return printTable(w, []v1alpha1.VirtualMachineMigration{*m}, tableOptions{wide: true, withNamespace: true}, testNow)
			},
			"summary": func(w *bytes.Buffer) error {
				s := newWaveSummary()
				s.add(m)
				return s.print(w)
			},
			"cancel": func(w *bytes.Buffer) error {
				_, err := w.WriteString(cancelEffect(m))
				return err
			},
			"plan": func(w *bytes.Buffer) error {
				switch {
				case m.Status.Plan != nil:
					if err := printPlanRecord(w, m); err != nil {
						return err
					}
					return printPlanSummary(w, m, nil, "", downtimeEstimate(m, others, nil))
				case m.Status.DryRun != nil:
					return printDryRun(w, m)
				}
				_, err := w.WriteString(downtimeEstimate(m, others, nil))
				return err
			},
		}
		for view, print := range views {
			var buf bytes.Buffer
			if !assert.NotPanics(t, func() { assert.NoError(t, print(&buf)) }, "%s of %s", view, v.name) {
				continue
			}
			assert.NotContains(t, buf.String(), "%!", "%s of %s: a formatting error", view, v.name)
			// A time left empty is not shown as year 1, nor counted from it.
			assert.NotContains(t, buf.String(), "0001-01-01", "%s of %s", view, v.name)
			assert.NotContains(t, buf.String(), "2562047h", "%s of %s: a duration from year 1", view, v.name)
		}
	}
}
