package vsphere

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/soap"

	"platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// TestFindVMByNameReusesTheListing: lookups by name within
// VMNameListingTTL of a listing cost one call (the found VM's name read
// again) instead of a listing of every VM; a VM created, renamed or
// duplicated since is still found right, from a new listing, except a
// namesake created within the TTL of a name found once (documented).
func TestFindVMByNameReusesTheListing(t *testing.T) {
	env := newSim(t, vpx, nil)
	var calls atomic.Int32
	s := env.connect(t, WithRoundTripper(func(next soap.RoundTripper) soap.RoundTripper {
		return &countingRoundTripper{next: next, n: &calls}
	}))
	clock := time.Now()
	s.now = func() time.Time { return clock }
	ctx := testCtx(t)
	first := firstVM(t, s)
	second := readSimVM(t, s, createVMIn(t, s, nil, "second-vm"))
	find := func(name string) (string, int32, error) {
		before := calls.Load()
		vm, err := FindVM(ctx, s, v1alpha1.VMSelector{Name: name})
		if err != nil {
			return "", calls.Load() - before, err
		}
		return vm.Reference().Value, calls.Load() - before, nil
	}

	got, listing, err := find(first.name)
	require.NoError(t, err)
	assert.Equal(t, first.ref.Value, got)
	got, n, err := find(second.name)
	require.NoError(t, err)
	assert.Equal(t, second.ref.Value, got)
	assert.Equal(t, int32(1), n, "a name the listing holds costs one call")
	assert.Greater(t, listing, n, "the first lookup listed the VMs")

	fresh := readSimVM(t, s, createVMIn(t, s, nil, "created-after-the-listing"))
	got, _, err = find(fresh.name)
	require.NoError(t, err, "a name missing from the listing is looked up in a new one")
	assert.Equal(t, fresh.ref.Value, got)

	task, err := KnownVM(s, second.ref.Value).Rename(ctx, "second-vm-renamed")
	require.NoError(t, err)
	require.NoError(t, task.Wait(ctx))
	_, _, err = find(second.name)
	assert.Equal(t, ClassNotFound, Classify(err), "a renamed VM is not found under its old name: %v", err)
	got, _, err = find("second-vm-renamed")
	require.NoError(t, err)
	assert.Equal(t, second.ref.Value, got)

	namesake := createVMIn(t, s, nil, fresh.name)
	got, _, err = find(fresh.name)
	require.NoError(t, err, "within the TTL, a name found once is confirmed, not listed again")
	assert.Equal(t, fresh.ref.Value, got)
	clock = clock.Add(VMNameListingTTL + time.Second)
	_, _, err = find(fresh.name)
	var amb *AmbiguousError
	require.ErrorAs(t, err, &amb, "past the TTL a new listing sees both")
	assert.Len(t, amb.Candidates, 2)
	assert.NotEqual(t, fresh.ref, namesake.Reference())
}
