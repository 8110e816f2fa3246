package wire

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStreamsPerDisk(t *testing.T) {
	tests := map[string]struct {
		want, budget, transfers, disks int
		streams                        int
	}{
		"defaults: 4 transfers of 2 disks in 20 connections": {want: DefaultStreamsPerDisk, budget: DefaultHostConnections, transfers: 4, disks: DefaultParallelDisks, streams: 2},
		"one transfer per host gets what it wants":           {want: 4, budget: 20, transfers: 1, disks: 2, streams: 4},
		"a roomy budget is capped by want":                   {want: 3, budget: 1000, transfers: 2, disks: 2, streams: 3},
		"a tight budget still leaves one stream":             {want: 8, budget: 4, transfers: 4, disks: 2, streams: 1},
		"no bound on transfers per host":                     {want: 4, budget: 20, transfers: 0, disks: 2, streams: 1},
		"one stream wanted":                                  {want: 1, budget: 48, transfers: 1, disks: 1, streams: 1},
		"nothing wanted":                                     {want: 0, budget: 48, transfers: 1, disks: 1, streams: 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, tc.streams, StreamsPerDisk(tc.want, tc.budget, tc.transfers, tc.disks),
				"StreamsPerDisk(%d, %d, %d, %d)", tc.want, tc.budget, tc.transfers, tc.disks)
		})
	}
}
