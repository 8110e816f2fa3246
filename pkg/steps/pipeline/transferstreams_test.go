package pipeline

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
			job, err := RenderTransferJob(linuxBIOS(), 1, cfg)
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
