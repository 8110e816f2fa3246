package cli

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsyaml "sigs.k8s.io/yaml"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/name.golden, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading %s (run go test ./pkg/cli -update to create it): %v", path, err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (run go test ./pkg/cli -update and review the diff):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// fixtureNames are the fixtures' names, sorted.
func fixtureNames() []string {
	var names []string
	for name := range fixtures() {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// allFixtures returns every fixture, in name order.
func allFixtures() []v1alpha1.VirtualMachineMigration {
	all := fixtures()
	var items []v1alpha1.VirtualMachineMigration
	for _, name := range fixtureNames() {
		items = append(items, *all[name])
	}
	return items
}

func TestGoldenTable(t *testing.T) {
	cases := map[string]tableOptions{
		"table":        {},
		"table-wide":   {wide: true},
		"table-all-ns": {withNamespace: true},
	}
	for name, opts := range cases {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := printTable(&buf, allFixtures(), opts, testNow); err != nil {
				t.Fatal(err)
			}
			golden(t, name, buf.Bytes())
		})
	}
}

func TestGoldenProgress(t *testing.T) {
	all := fixtures()
	for _, name := range fixtureNames() {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := printProgress(&buf, all[name], testNow); err != nil {
				t.Fatal(err)
			}
			buf.WriteString("--- as a line:\n" + progressLine(all[name]) + "\n")
			golden(t, "progress-"+name, buf.Bytes())
		})
	}
}

func TestGoldenDescribe(t *testing.T) {
	all := fixtures()
	for _, name := range fixtureNames() {
		t.Run(name, func(t *testing.T) {
			m := all[name]
			var buf bytes.Buffer
			if err := printDescribe(&buf, m, fixtureEvents(m), testNow); err != nil {
				t.Fatal(err)
			}
			golden(t, "describe-"+name, buf.Bytes())
		})
	}
}

// fixtureEvents are events as the controller records them for a
// migration: one per checkpoint reached.
func fixtureEvents(m *v1alpha1.VirtualMachineMigration) []corev1.Event {
	var events []corev1.Event
	for i, e := range m.Status.Evidence {
		events = append(events, corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: m.Name + "-event-" + string(rune('a'+i)), Namespace: m.Namespace},
			InvolvedObject: corev1.ObjectReference{Kind: "VirtualMachineMigration", Name: m.Name, Namespace: m.Namespace, UID: m.UID},
			Type:           corev1.EventTypeNormal, Reason: "PhaseChanged", Count: 1,
			Message:       string(e.Phase) + " reached: " + e.Observed,
			LastTimestamp: metav1.NewTime(e.ReachedAt.Add(time.Millisecond)),
		})
	}
	return events
}

// yamlOf renders an object as YAML, for comparisons that show a diff.
func yamlOf(obj any) (string, error) {
	b, err := sigsyaml.Marshal(obj)
	return string(b), err
}
