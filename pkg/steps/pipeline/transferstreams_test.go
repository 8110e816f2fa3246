package pipeline

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"
)

// TestTransferStreamsArgument checks the transfer Job asks vm-transfer for
// the configured streams per disk, and says nothing for one stream.
func TestTransferStreamsArgument(t *testing.T) {
	tests := map[string]struct {
		streams int
		want    string
	}{
		"unset":        {streams: 0},
		"one stream":   {streams: 1},
		"four streams": {streams: 4, want: "--streams=4"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := testConfig
			cfg.TransferStreams = tc.streams
			job, err := RenderTransferJob(linuxBIOS(), 1, cfg, nil)
			require.NoError(t, err, "rendering the transfer job")
			args := job.Spec.Template.Spec.Containers[0].Args
			var streams []string
			for _, a := range args {
				if strings.HasPrefix(a, "--streams") {
					streams = append(streams, a)
				}
			}
			if tc.want == "" {
				assert.Empty(t, streams, "args %v: one stream per disk needs no --streams", args)
			} else {
				assert.Equal(t, []string{tc.want}, streams, "args %v: vm-transfer is asked for %s", args, tc.want)
			}
		})
	}
}

// TestTransferSpecFullCopy checks the job spec asks for a full copy only
// when the migration turns allocated-only copy off.
func TestTransferSpecFullCopy(t *testing.T) {
	for name, tc := range map[string]struct {
		allocatedOnly *bool
		fullCopy      bool
	}{
		"default": {},
		"on":      {allocatedOnly: ptr.To(true)},
		"off":     {allocatedOnly: ptr.To(false), fullCopy: true},
	} {
		t.Run(name, func(t *testing.T) {
			m := linuxBIOS()
			m.Spec.Transfer.AllocatedOnly = ptr.To(true) // changed after the cutover: not in force
			require.NotNil(t, m.Status.AppliedSpec, "the fixture has stopped its source")
			m.Status.AppliedSpec.Transfer.AllocatedOnly = tc.allocatedOnly
			js, err := RenderTransferSpec(m, nil)
			require.NoError(t, err, "rendering the job spec")
			assert.Equal(t, tc.fullCopy, js.FullCopy, "fullCopy in the job spec")
		})
	}
}
