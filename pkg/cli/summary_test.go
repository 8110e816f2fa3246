package cli

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
)

func TestGoldenSummary(t *testing.T) {
	s := newWaveSummary()
	for _, m := range allFixtures() {
		s.add(&m)
	}
	var buf bytes.Buffer
	require.NoError(t, s.print(&buf), "printing the summary")
	golden(t, "summary", buf.Bytes())
}

// TestSummaryOfAWave: 5,000 migrations summarise in a few lines, counted
// by phase and by what they wait on or why they failed.
func TestSummaryOfAWave(t *testing.T) {
	all := fixtures()
	s := newWaveSummary()
	for i := range 5000 {
		var m *v1alpha1.VirtualMachineMigration
		switch {
		case i < 4000:
			m = all["validating"]
		case i < 4600:
			m = all["queued"]
		case i < 4700:
			m = all["pull-backoff"]
		case i < 4900:
			m = all["succeeded"]
		case i < 4950:
			m = all["failed"]
		default:
			m = all["refused"]
		}
		s.add(m)
	}
	var buf bytes.Buffer
	require.NoError(t, s.print(&buf), "printing the summary")
	assert.Equal(t, `PHASE               COUNT   WHY (count by reason)
Validating           4000   4000 Working
Queued                600   600 WaitingForTransferSlot
TransferringDisks     100   100 pod ImagePullBackOff
Succeeded             200
Failed                100   50 PreflightFailed (DryRunRefused), 50 PreflightFailed (RDMDisk)
TOTAL                5000
Before the stop: 600 waiting, their source running: 600 for a transfer slot
`, buf.String())
}

// TestSummaryWaitsBeforeTheStop (issue 50 item 4): a wave paced by
// conversion capacity shows how many wait before their stop, their source
// running, and for what, with how many conversion slots are taken; the
// conversions run without a pod waiting for a node.
func TestSummaryWaitsBeforeTheStop(t *testing.T) {
	queued := fixtures()["queued"]
	s := newWaveSummary()
	for i := range 25 {
		m := queued.DeepCopy()
		switch {
		case i < 19:
			setCondition(m, "Progressing", metav1.ConditionFalse, statemachine.ReasonWaitingForConversionCapacity,
				"4 of 4 conversion slots taken: a migration holds one from the stop of its source to the end of its conversion (--max-conversions=4)")
		case i < 21:
		default:
			m.Status.Phase = v1alpha1.PhaseConverting
			setCondition(m, "Progressing", metav1.ConditionTrue, statemachine.ReasonWorking, "converting the guest")
		}
		s.add(m)
	}
	deleting := queued.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{}
	s.add(deleting)
	var buf bytes.Buffer
	require.NoError(t, s.print(&buf), "printing the summary")
	assert.Equal(t, `PHASE        COUNT   WHY (count by reason)
Queued          22   19 WaitingForConversionCapacity, 2 WaitingForTransferSlot, 1 cancelling
Converting       4   4 Working
TOTAL           26
Before the stop: 21 waiting, their source running: 19 for conversion capacity (4 of 4 conversion slots taken), 2 for a transfer slot
`, buf.String())

	held := queued.DeepCopy()
	setCondition(held, "Progressing", metav1.ConditionFalse, statemachine.ReasonWaitingForConversionCapacity,
		"conversion pods of this controller wait for a node with room (the scheduler: Insufficient cpu, Insufficient memory): no source is stopped until they run")
	s = newWaveSummary()
	s.add(held)
	assert.Equal(t, "Before the stop: 1 waiting, their source running: 1 for conversion capacity (a conversion pod waits for room: Insufficient cpu, Insufficient memory)\n", s.beforeStopLine())
}

func TestSummaryReasonsAreBounded(t *testing.T) {
	s := newWaveSummary()
	m := fixtures()["queued"]
	for i := range 9 {
		for range 9 - i {
			c := m.DeepCopy()
			setCondition(c, "Progressing", metav1.ConditionFalse, fmt.Sprintf("Reason%d", i), "waiting")
			s.add(c)
		}
	}
	var buf bytes.Buffer
	require.NoError(t, s.print(&buf), "printing the summary")
	assert.Contains(t, buf.String(), "Queued      45   9 Reason0, 8 Reason1, 7 Reason2, 6 Reason3, 5 Reason4, 10 in 4 other reasons\n")
}

func TestGetSummaryCommand(t *testing.T) {
	all := fixtures()
	other := all["succeeded"].DeepCopy()
	other.Namespace = "web"
	cases := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string
		wantErr  string
	}{
		{name: "namespace", args: []string{"get", "--summary"}, wantOut: "PHASE               COUNT   WHY (count by reason)\nQueued                  1   1 WaitingForTransferSlot\nTransferringDisks       1   1 Working\nSucceeded               1\nFailed                  1   1 PreflightFailed (RDMDisk)\nTOTAL                   4\n"},
		{name: "all namespaces", args: []string{"list", "-A", "--summary"}, wantOut: "Succeeded               2\n"},
		{name: "selector", args: []string{"get", "-l", "wave=none", "--summary"}, wantOut: "PHASE   COUNT   WHY (count by reason)\nTOTAL       0\n"},
		{name: "with a name", args: []string{"get", "queued", "--summary"}, wantCode: 1, wantErr: "--summary counts a list of migrations: it takes no migration name"},
		{name: "with an output", args: []string{"get", "--summary", "-o", "yaml"}, wantCode: 1, wantErr: "--summary prints a table of its own: it cannot go with -o"},
		{name: "with watch", args: []string{"get", "--summary", "-w"}, wantCode: 1, wantErr: "--summary cannot go with --watch"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, objects(all["transferring"], all["queued"], all["succeeded"], all["failed"], other))
			code := h.run(context.Background(), tc.args...)
			require.Equal(t, tc.wantCode, code, "exit code (stderr %q)", h.errOut)
			assert.Contains(t, h.out.String(), tc.wantOut, "stdout")
			assert.Contains(t, h.errOut.String(), tc.wantErr, "stderr")
		})
	}
}

// TestSummaryListsInPages: the summary reads the migrations in pages of
// summaryPageSize and keeps only counts, so 5,000 cost a few list calls
// and no more memory than a page.
func TestSummaryListsInPages(t *testing.T) {
	all := fixtures()
	h := newHarness(t, nil)
	var limits []int64
	var continues []string
	h.factory.mig.PrependReactor("list", "virtualmachinemigrations", func(a k8stesting.Action) (bool, runtime.Object, error) {
		opts := a.(k8stesting.ListActionImpl).ListOptions
		limits, continues = append(limits, opts.Limit), append(continues, opts.Continue)
		page := &v1alpha1.VirtualMachineMigrationList{}
		switch opts.Continue {
		case "":
			page.Items = []v1alpha1.VirtualMachineMigration{*all["queued"], *all["queued"]}
			page.Continue = "page-2"
		case "page-2":
			page.Items = []v1alpha1.VirtualMachineMigration{*all["failed"]}
		}
		return true, page, nil
	})
	require.Equal(t, 0, h.run(context.Background(), "get", "-A", "--summary"), "exit code (stderr %q)", h.errOut)
	assert.Equal(t, []int64{summaryPageSize, summaryPageSize}, limits, "the pages' limits")
	assert.Equal(t, []string{"", "page-2"}, continues, "the pages' continue tokens")
	assert.Contains(t, h.out.String(), "Queued       2   2 WaitingForTransferSlot\n", "stdout")
	assert.Contains(t, h.out.String(), "TOTAL        3\n", "stdout")
}

// TestExplainWaitForConversionCapacity: kubectl vmm explain says the wait
// for conversion capacity comes before the stop and ends on its own (not
// at a retry deadline, which a migration in Queued has none of).
func TestExplainWaitForConversionCapacity(t *testing.T) {
	m := fixtures()["queued"].DeepCopy()
	msg := "4 of 4 conversion slots taken: a migration holds one from the stop of its source to the end of its conversion (--max-conversions=4)"
	setCondition(m, "Progressing", metav1.ConditionFalse, statemachine.ReasonWaitingForConversionCapacity, msg)
	assert.Equal(t, "The controller waits for conversion capacity before it stops the source ("+msg+"); the migration starts on its own when a conversion ends, and its source stays untouched meanwhile.",
		waitingStep(m, statemachine.ReasonWaitingForConversionCapacity, msg))
}
