package cli

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/jsonpath"
	sigsyaml "sigs.k8s.io/yaml"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
)

// crdPath is the CustomResourceDefinition the controller installs.
const crdPath = "../../manifests/crd/migration.platform.example_virtualmachinemigrations.yaml"

// printerColumns are the CRD's additionalPrinterColumns (what kubectl get
// -o wide shows), JSONPath by name.
func printerColumns(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(crdPath)
	require.NoError(t, err, "reading the CRD")
	var crd struct {
		Spec struct {
			Versions []struct {
				AdditionalPrinterColumns []struct {
					Name     string `json:"name"`
					JSONPath string `json:"jsonPath"`
				} `json:"additionalPrinterColumns"`
			} `json:"versions"`
		} `json:"spec"`
	}
	require.NoError(t, sigsyaml.Unmarshal(data, &crd), "decoding the CRD")
	require.NotEmpty(t, crd.Spec.Versions)
	cols := map[string]string{}
	for _, c := range crd.Spec.Versions[0].AdditionalPrinterColumns {
		cols[c.Name] = c.JSONPath
	}
	return cols
}

// kubectlCell is what kubectl get prints in a column of JSONPath path for
// m: the values found, or nothing (the API server's table has no cell
// for a field that is not there; kubectl vmm's table writes such a cell
// as "-").
func kubectlCell(t *testing.T, m *v1alpha1.VirtualMachineMigration, path string) string {
	t.Helper()
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(m)
	require.NoError(t, err)
	jp := jsonpath.New("column").AllowMissingKeys(true)
	require.NoError(t, jp.Parse("{"+path+"}"), "parsing %s", path)
	var buf bytes.Buffer
	require.NoError(t, jp.Execute(&buf, obj), "evaluating %s", path)
	return buf.String()
}

// cell is the cell of column name in a row of the wide table.
func cell(t *testing.T, row []string, name string) string {
	t.Helper()
	header := tableHeader(tableOptions{wide: true})
	for i, h := range header {
		if h == name {
			return row[i]
		}
	}
	require.Failf(t, "no such column", "%s in %v", name, header)
	return ""
}

// TestTableMatchesKubectl: kubectl vmm list's REASON and LAST ERROR show
// what kubectl get vmm -o wide shows in its Reason and Last Error columns
// (the CRD's printer columns), for every fixture; LAST ERROR is the
// message's short form, not the reason again (issue 34).
func TestTableMatchesKubectl(t *testing.T) {
	cols := printerColumns(t)
	all := fixtures()
	for _, name := range fixtureNames() {
		t.Run(name, func(t *testing.T) {
			m := all[name]
			row := tableRow(m, tableOptions{wide: true}, testNow)
			assert.Equal(t, orEmpty(kubectlCell(t, m, cols["Reason"])), cell(t, row, "REASON"), "REASON, want kubectl get -o wide's")
			assert.Equal(t, orEmpty(kubectlCell(t, m, cols["Last Error"])), cell(t, row, "LAST ERROR"), "LAST ERROR, want kubectl get -o wide's")
			if e := m.Status.LastError; e != nil {
				assert.NotEqual(t, e.Reason, cell(t, row, "LAST ERROR"), "LAST ERROR shows the message, not the reason")
			}
		})
	}
}

// TestLastErrorOfAnOlderController: a lastError without a summary (an
// older controller's) is shown short all the same.
func TestLastErrorOfAnOlderController(t *testing.T) {
	m := fixtures()["failed"]
	m.Status.LastError.Summary = ""
	row := tableRow(m, tableOptions{wide: true}, testNow)
	assert.Equal(t, naming.Summarize(m.Status.LastError.Message), cell(t, row, "LAST ERROR"))
}

// TestViewsSayWhyTheyWait: a transfer whose pod cannot pull its image
// says so in get, in its --watch line, in the Next sentence and in list
// -o wide's WAITING FOR column (issue 34: 20 minutes of ImagePullBackOff
// showed only "waits for transfer Job ... to copy 3 disks (0%)").
func TestViewsSayWhyTheyWait(t *testing.T) {
	m := fixtures()["pull-backoff"]
	var view bytes.Buffer
	require.NoError(t, printProgress(&view, m, testNow))
	assert.Contains(t, view.String(), `Waiting: ImagePullBackOff for 20m: the pod of transfer Job pull-backoff-transfer-1 has not started: Back-off pulling image "registry.example/vm-migration-controller:v0.1.1"`, "get")
	assert.Contains(t, view.String(), "the attempt counts as failed at 2026-11-30T10:52:00Z (in 10m)", "get")
	assert.Contains(t, progressLine(m), `waiting: ImagePullBackOff: the pod of transfer Job pull-backoff-transfer-1 has not started since 2026-11-30T10:22:00Z`, "the --watch line")
	next := nextStep(m)
	assert.Contains(t, next, "kubectl describe pod -n apps -l job-name=pull-backoff-transfer-1", "Next")
	assert.NotContains(t, next, "to copy", "Next: the copy is not what it waits for")
	row := tableRow(m, tableOptions{wide: true}, testNow)
	assert.Equal(t, "pod of job pull-backoff-transfer-1: ImagePullBackOff", cell(t, row, "WAITING FOR"))
}

// TestWaitingForColumn: list -o wide says what each migration waits for,
// in the controller's words, short; nothing once it ended.
func TestWaitingForColumn(t *testing.T) {
	all := fixtures()
	for name, want := range map[string]string{
		"queued":       "4 of 4 transfers from host esxi-01.example.com run",
		"transferring": "working toward TransferringDisks",
		"stalled":      "no progress in TransferringDisks since 2026-11-30T10:05:00Z",
		"paused":       "held at Converting by spec.policy.paused; running jobs are not interrupted",
		"unreachable":  "connecting to https://vcenter.example.com/sdk: dial tcp: i/o timeout",
		"succeeded":    emptyCell,
		"failed":       emptyCell,
	} {
		t.Run(name, func(t *testing.T) {
			got := cell(t, tableRow(all[name], tableOptions{wide: true}, testNow), "WAITING FOR")
			assert.Equal(t, want, got)
			assert.LessOrEqual(t, len([]rune(got)), naming.MaxSummary)
		})
	}
	// The non-wide table keeps a stall visible though REASON is kubectl's.
	assert.True(t, strings.HasSuffix(tableRow(all["stalled"], tableOptions{}, testNow)[1], " (stalled)"), "the stalled migration's PHASE cell")
}

// TestFailedProgressIsNotDone: a migration that failed after its
// transfer does not show 100% (issue 34), whatever an older controller
// left in status.progress.
func TestFailedProgressIsNotDone(t *testing.T) {
	all := fixtures()
	for _, name := range []string{"failed-converting", "rolling-back"} {
		t.Run(name, func(t *testing.T) {
			m := all[name]
			require.NotEmpty(t, m.Status.Progress, "the fixture keeps a progress figure")
			row := tableRow(m, tableOptions{}, testNow)
			assert.Equal(t, emptyCell, row[2], "PROGRESS")
			var view bytes.Buffer
			require.NoError(t, printProgress(&view, m, testNow))
			head, _, _ := strings.Cut(view.String(), "\n")
			assert.NotContains(t, head, "%", "the view's first line")
			assert.NotContains(t, progressLine(m), m.Name+" "+string(m.Status.Phase)+" "+m.Status.Progress, "the --watch line")
		})
	}
}
