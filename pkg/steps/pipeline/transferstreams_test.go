package pipeline

import (
	"slices"
	"strings"
	"testing"
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
			if err != nil {
				t.Fatal(err)
			}
			args := job.Spec.Template.Spec.Containers[0].Args
			got := slices.IndexFunc(args, func(a string) bool { return strings.HasPrefix(a, "--streams") })
			switch {
			case tc.want == "" && got >= 0:
				t.Errorf("args %v: want no --streams", args)
			case tc.want != "" && (got < 0 || args[got] != tc.want):
				t.Errorf("args %v: want %s", args, tc.want)
			}
		})
	}
}
