package vsphere

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/types"
)

// TestAppendPageRefusesWhatCannotBeTrusted checks one answer of
// QueryChangedDiskAreas at a time: it must describe the span asked for
// and list its areas in order, inside that span and the disk. The whole
// query is tested against the simulator in test/vcsimlocal.
func TestAppendPageRefusesWhatCannotBeTrusted(t *testing.T) {
	const capacity = 1 << 20
	area := func(start, length int64) types.DiskChangeExtent {
		return types.DiskChangeExtent{Start: start, Length: length}
	}
	tests := map[string]struct {
		page    types.DiskChangeInfo
		off     int64
		want    []DiskArea
		problem string
	}{
		"areas in order, touching ones merged": {
			page: types.DiskChangeInfo{StartOffset: 4096, Length: capacity - 4096, ChangedArea: []types.DiskChangeExtent{area(4096, 4096), area(8192, 100), area(65536, 10)}},
			off:  4096, want: []DiskArea{{Start: 0, Length: 8192 + 100}, {Start: 65536, Length: 10}},
		},
		"nothing in use":          {page: types.DiskChangeInfo{StartOffset: 4096, Length: 8192}, off: 4096, want: []DiskArea{{Start: 0, Length: 4096}}},
		"answer starts elsewhere": {page: types.DiskChangeInfo{StartOffset: 0, Length: capacity}, off: 4096, problem: "asked from byte 4096, the answer starts at 0"},
		"answer does not advance": {page: types.DiskChangeInfo{StartOffset: 4096}, off: 4096, problem: "has length 0"},
		"empty area":              {page: types.DiskChangeInfo{StartOffset: 4096, Length: 8192, ChangedArea: []types.DiskChangeExtent{area(5000, 0)}}, off: 4096, problem: "has length 0"},
		"area before the span":    {page: types.DiskChangeInfo{StartOffset: 4096, Length: 8192, ChangedArea: []types.DiskChangeExtent{area(0, 8192)}}, off: 4096, problem: "starts before byte 4096"},
		"areas overlap":           {page: types.DiskChangeInfo{StartOffset: 4096, Length: 8192, ChangedArea: []types.DiskChangeExtent{area(4096, 4096), area(6000, 10)}}, off: 4096, problem: "starts before byte 8192"},
		"area past the span":      {page: types.DiskChangeInfo{StartOffset: 4096, Length: 8192, ChangedArea: []types.DiskChangeExtent{area(8192, 8192)}}, off: 4096, problem: "ends past the answer's span"},
		"area past the disk":      {page: types.DiskChangeInfo{StartOffset: 4096, Length: 2 * capacity, ChangedArea: []types.DiskChangeExtent{area(capacity-10, 20)}}, off: 4096, problem: "ends past the answer's span or the disk"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := appendPage([]DiskArea{{Start: 0, Length: 4096}}, tc.page, tc.off, capacity)
			if tc.problem != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.problem)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}
