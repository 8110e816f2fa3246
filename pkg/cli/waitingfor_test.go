package cli

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/pkg/statemachine"
)

// TestWaitingForKeepsWholeWords: list -o wide's WAITING FOR is cut to
// naming.MaxSummary characters after a whole word, with "...", and the
// reason a pod has not started stays whole however long its Job's name
// (issue 50 item 8: a 63-character migration's cell read "pod of job...",
// the reason cut away).
func TestWaitingForKeepsWholeWords(t *testing.T) {
	long := strings.Repeat("wave-3-", 8) + "web-0001" // 64 characters
	long = long[:63]
	podWaits := func(reason string) func(*v1alpha1.VirtualMachineMigration) {
		return func(m *v1alpha1.VirtualMachineMigration) {
			m.Status.PodWaiting = &v1alpha1.PodWaiting{Job: naming.TransferJob(m.Name, 1), Reason: reason, Since: at(22 * time.Minute)}
		}
	}
	progressing := func(message string) func(*v1alpha1.VirtualMachineMigration) {
		return func(m *v1alpha1.VirtualMachineMigration) {
			setCondition(m, statemachine.ConditionProgressing, metav1.ConditionTrue, statemachine.ReasonWorking, message)
		}
	}
	cases := map[string]struct {
		m *v1alpha1.VirtualMachineMigration
		// ends is how the cell ends; message, when set, is the text whose
		// start the cell shows.
		ends, message string
	}{
		"a pod of a long-named migration: the reason stays": {
			m:    inPhase(long, v1alpha1.PhaseTransferringDisks, transferring(0, 0, 0), podWaits("ImagePullBackOff")),
			ends: ": ImagePullBackOff",
		},
		"a long reason too": {
			m:    inPhase(long, v1alpha1.PhaseTransferringDisks, transferring(0, 0, 0), podWaits("CreateContainerConfigError")),
			ends: ": CreateContainerConfigError",
		},
		"a long message: cut after a word": {
			m: inPhase("web-01", v1alpha1.PhaseTransferringDisks, transferring(0, 0, 0), progressing(
				"transferring disks (job web-01-transfer-1, attempt 1); waiting for the claims web-01-disk-0 and web-01-disk-1 to bind")),
			message: "transferring disks (job web-01-transfer-1, attempt 1); waiting for the claims web-01-disk-0 and web-01-disk-1 to bind",
			ends:    "...",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := cell(t, tableRow(tc.m, tableOptions{wide: true}, testNow), "WAITING FOR")
			assert.LessOrEqual(t, utf8.RuneCountInString(got), naming.MaxSummary, "%q", got)
			assert.True(t, strings.HasSuffix(got, tc.ends), "%q, want it to end %q", got, tc.ends)
			if tc.message != "" {
				kept := strings.TrimSuffix(got, "...")
				assert.True(t, strings.HasPrefix(tc.message, kept), "%q is not the start of the message", got)
				next := tc.message[len(kept):]
				assert.True(t, next == "" || strings.HasPrefix(next, " ") || strings.HasPrefix(next, ", ") || strings.HasPrefix(next, "; "),
					"%q is cut inside a word (%q follows)", got, next)
			}
		})
	}
}
