package vsphere

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
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
		"span longer than the disk": {
			page: types.DiskChangeInfo{StartOffset: 4096, Length: math.MaxInt64, ChangedArea: []types.DiskChangeExtent{area(8192, 4096)}},
			off:  4096, want: []DiskArea{{Start: 0, Length: 4096}, {Start: 8192, Length: 4096}},
		},
		"area starts past the disk, its end wraps": {
			page: types.DiskChangeInfo{StartOffset: 4096, Length: capacity - 4096, ChangedArea: []types.DiskChangeExtent{area(capacity+4096, math.MaxInt64)}},
			off:  4096, problem: "starts at or past byte 1048576, the end of the answer's span or the disk",
		},
		"area near 2^63, its end wraps": {
			page: types.DiskChangeInfo{StartOffset: 4096, Length: capacity - 4096, ChangedArea: []types.DiskChangeExtent{area(1<<62, 1<<62)}},
			off:  4096, problem: "starts at or past byte 1048576",
		},
		"area inside the disk, its end wraps": {
			page: types.DiskChangeInfo{StartOffset: 4096, Length: capacity - 4096, ChangedArea: []types.DiskChangeExtent{area(8192, math.MaxInt64)}},
			off:  4096, problem: "ends past the answer's span or the disk",
		},
		"span wraps, an area past the disk": {
			page: types.DiskChangeInfo{StartOffset: 4096, Length: math.MaxInt64, ChangedArea: []types.DiskChangeExtent{area(capacity, 4096)}},
			off:  4096, problem: "starts at or past byte 1048576",
		},
		"a wrapping area, then one that goes backwards": {
			page: types.DiskChangeInfo{StartOffset: 4096, Length: capacity - 4096, ChangedArea: []types.DiskChangeExtent{area(1<<62, 1<<62), area(math.MinInt64+1, math.MaxInt64)}},
			off:  4096, problem: "starts at or past byte 1048576",
		},
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

// pagedAnswers answers QueryChangedDiskAreas from a table of answers by
// the offset asked from, as a faulty or hostile server could.
type pagedAnswers map[int64]types.DiskChangeInfo

func (p pagedAnswers) RoundTrip(_ context.Context, req, res soap.HasFault) error {
	off := req.(*methods.QueryChangedDiskAreasBody).Req.StartOffset
	page, ok := p[off]
	if !ok {
		return fmt.Errorf("no answer from byte %d", off)
	}
	res.(*methods.QueryChangedDiskAreasBody).Res = &types.QueryChangedDiskAreasResponse{Returnval: page}
	return nil
}

// TestAllocatedAreasRefusesWhatCannotBeTrusted follows a map over its
// answers: a span that goes beyond the disk, even one whose end would wrap
// past 2^63, is cut at the disk's end, so the query is never sent back
// before the disk's start to map again what was mapped (before, the
// areas came back twice, overlapping); an area past the disk in any
// answer refuses the map.
func TestAllocatedAreasRefusesWhatCannotBeTrusted(t *testing.T) {
	const capacity = 1 << 20
	vm := types.ManagedObjectReference{Type: "VirtualMachine", Value: "vm-1"}
	area := func(start, length int64) types.DiskChangeExtent {
		return types.DiskChangeExtent{Start: start, Length: length}
	}
	// A span from 8192 of this length ends, wrapped, at back: the next
	// answer is asked for from there.
	const back = math.MinInt64 + 4097
	tests := map[string]struct {
		answers pagedAnswers
		want    []DiskArea
		problem string
	}{
		"two answers": {
			answers: pagedAnswers{
				0:    {StartOffset: 0, Length: 8192, ChangedArea: []types.DiskChangeExtent{area(0, 4096)}},
				8192: {StartOffset: 8192, Length: math.MaxInt64, ChangedArea: []types.DiskChangeExtent{area(8192, 4096), area(capacity-4096, 4096)}},
			},
			want: []DiskArea{{Start: 0, Length: 4096}, {Start: 8192, Length: 4096}, {Start: capacity - 4096, Length: 4096}},
		},
		"a span that would wrap is cut at the disk's end, the map does not start over": {
			answers: pagedAnswers{
				0:    {StartOffset: 0, Length: 8192, ChangedArea: []types.DiskChangeExtent{area(0, 4096)}},
				8192: {StartOffset: 8192, Length: back - 8192 - math.MinInt64 - math.MinInt64},
				back: {StartOffset: back, Length: math.MaxInt64, ChangedArea: []types.DiskChangeExtent{area(0, 4096)}},
				4096: {StartOffset: 4096, Length: capacity - 4096, ChangedArea: []types.DiskChangeExtent{area(4096, capacity-4096)}},
			},
			want: []DiskArea{{Start: 0, Length: 4096}},
		},
		"an area past the disk in a later answer": {
			answers: pagedAnswers{
				0:    {StartOffset: 0, Length: 8192, ChangedArea: []types.DiskChangeExtent{area(0, 4096)}},
				8192: {StartOffset: 8192, Length: math.MaxInt64 - 8192, ChangedArea: []types.DiskChangeExtent{area(capacity, 1<<62)}},
			},
			problem: "starts at or past byte 1048576",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := AllocatedAreas(context.Background(), tc.answers, vm, 2000, capacity)
			if tc.problem != "" {
				require.Error(t, err, "map %v (%d bytes)", got, AreasBytes(got))
				assert.True(t, errors.Is(err, ErrInconsistentAreas), "%v", err)
				assert.Contains(t, err.Error(), tc.problem)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestCheckAreasAndTheirSum checks the last word on a map before it is
// returned: in order, not overlapping, inside the disk, its sum at most
// the capacity; and that AreasBytes never wraps, whatever it is given.
func TestCheckAreasAndTheirSum(t *testing.T) {
	const capacity = 1 << 20
	tests := map[string]struct {
		areas   []DiskArea
		problem string
	}{
		"a map":            {areas: []DiskArea{{0, 4096}, {8192, capacity - 8192}}},
		"empty":            {},
		"empty area":       {areas: []DiskArea{{0, 0}}, problem: "has length 0"},
		"before the disk":  {areas: []DiskArea{{-4096, 8192}}, problem: "starts before byte 0"},
		"overlapping":      {areas: []DiskArea{{0, 8192}, {4096, 10}}, problem: "starts before byte 8192"},
		"past the disk":    {areas: []DiskArea{{capacity, 1}}, problem: "starts at or past the disk's end"},
		"end past the end": {areas: []DiskArea{{capacity - 1, math.MaxInt64}}, problem: "ends past the disk's end"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := checkAreas(tc.areas, capacity)
			if tc.problem == "" {
				require.NoError(t, err)
				assert.LessOrEqual(t, AreasBytes(tc.areas), int64(capacity))
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.problem)
		})
	}
	assert.Equal(t, int64(math.MaxInt64), AreasBytes([]DiskArea{{0, math.MaxInt64}, {0, 2}}), "a sum past the largest int64 stops there")
}
