package cli

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
		require.NoError(t, os.WriteFile(path, got, 0o644), "writing %s", path)
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "reading %s (run go test ./pkg/cli -update to create it)", path)
	// As strings, so that a difference shows as a text diff.
	assert.Equal(t, string(want), string(got), "%s differs (run go test ./pkg/cli -update and review the diff)", path)
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
			require.NoError(t, printTable(&buf, allFixtures(), opts, testNow), "printing the table")
			golden(t, name, buf.Bytes())
		})
	}
}

func TestGoldenProgress(t *testing.T) {
	all := fixtures()
	for _, name := range fixtureNames() {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, printProgress(&buf, all[name], testNow), "printing the progress")
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
			require.NoError(t, printDescribe(&buf, m, fixtureEvents(m), testNow), "printing the description")

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
