package transfer

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// TestUsedBytesNeverWraps checks the figure the coverage guard holds a
// map against: the datastore's sizes of a disk's extents. A negative size,
// or sizes whose sum would pass the largest int64 and wrap below the
// map's total, are no figure at all: the guard cannot trust the map on them.
func TestUsedBytesNeverWraps(t *testing.T) {
	extents := []ExtentPlan{{File: &DatastoreFile{Name: "[ds] vm/a-flat.vmdk"}}, {File: &DatastoreFile{Name: "[ds] vm/b-flat.vmdk"}}}
	vm := func(a, b int64) *mo.VirtualMachine {
		return &mo.VirtualMachine{LayoutEx: &types.VirtualMachineFileLayoutEx{File: []types.VirtualMachineFileLayoutExFileInfo{
			{Name: "[ds] vm/a-flat.vmdk", Size: a}, {Name: "[ds] vm/b-flat.vmdk", Size: b},
		}}}
	}
	tests := map[string]struct {
		a, b  int64
		want  int64
		known bool
	}{
		"two extents":           {a: 3 << 20, b: 5 << 20, want: 8 << 20, known: true},
		"nothing in use":        {known: true},
		"a negative size":       {a: 3 << 20, b: -(1 << 40)},
		"sizes that would wrap": {a: math.MaxInt64, b: 2},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			used, known := usedBytes(vm(tc.a, tc.b), extents)
			assert.Equal(t, tc.known, known, "known (used %d)", used)
			if tc.known {
				assert.Equal(t, tc.want, used)
			}
		})
	}
}
