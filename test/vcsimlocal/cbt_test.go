package vcsimlocal

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/vsphere"
)

// thinVM is a VM with one thin disk of 24 MiB, a quarter of it written.
func thinVM(name string, cbt, on bool) VMSpec {
	spec := SmallVM(name, 5)
	spec.Disks = []DiskSpec{{SizeBytes: 24 * MiB, Seed: 5, AllocatedPercent: 25}}
	spec.ChangeTracking, spec.PoweredOn = cbt, on
	return spec
}

// TestChangedDiskAreas asks the simulator for the allocated areas of thin
// disks as the transfer does: with change tracking on and the VM off they
// are the flat extent's runs of data, whatever the page size; the faults
// are ESXi's; the datastore reports the extent's allocation as its size.
func TestChangedDiskAreas(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Start(ctx, Options{})
	require.NoError(t, err, "starting the simulator")
	defer s.Close()
	sess, err := vsphere.Connect(ctx, vsphere.Endpoint{URL: s.URL, Datacenter: Datacenter},
		vsphere.Credentials{Username: s.Username, Password: s.Password, Thumbprint: s.Thumbprint})
	require.NoError(t, err)
	defer func() { _ = sess.Logout(context.Background()) }()
	c := sess.Client()

	thin, err := s.AddVM(ctx, thinVM("thin", true, false))
	require.NoError(t, err)
	disk := thin.Disks[0]
	var want []vsphere.DiskArea
	var written int64
	for _, r := range ThinRuns(disk.SizeBytes, 5, 25) {
		written += r[1] - r[0]
		if n := len(want); n > 0 && want[n-1].End() == r[0] {
			want[n-1].Length += r[1] - r[0]
			continue
		}
		want = append(want, vsphere.DiskArea{Start: r[0], Length: r[1] - r[0]})
	}
	t.Logf("%d runs, %d of %d bytes written", len(want), written, disk.SizeBytes)
	assert.InDelta(t, 0.25, float64(written)/float64(disk.SizeBytes), 0.1, "share of the disk written")

	for _, pageAreas := range []int{DefaultPageAreas, 5, 1} {
		s.ChangeTracking().SetPageAreas(pageAreas)
		before := s.ChangeTracking().Calls()
		got, err := vsphere.AllocatedAreas(ctx, c, thin.Ref(), disk.Key, disk.SizeBytes)
		require.NoError(t, err, "%d areas per page", pageAreas)
		assert.Equal(t, want, got, "%d areas per page", pageAreas)
		calls := s.ChangeTracking().Calls() - before
		assert.GreaterOrEqual(t, calls, (len(want)+pageAreas-1)/pageAreas, "calls with %d areas per page", pageAreas)
		t.Logf("%d areas per page: %d calls", pageAreas, calls)
	}
	s.ChangeTracking().SetPageAreas(0)

	var vm mo.VirtualMachine
	require.NoError(t, property.DefaultCollector(c).RetrieveOne(ctx, thin.Ref(), []string{"layoutEx", "config.changeTrackingEnabled", "config.hardware.device"}, &vm))
	require.True(t, *vm.Config.ChangeTrackingEnabled)
	for _, f := range vm.LayoutEx.File {
		if f.Type == string(types.VirtualMachineFileLayoutExFileTypeDiskExtent) {
			assert.InDelta(t, written, f.Size, float64(MiB), "the extent's size as the datastore reports it: its allocation")
		}
	}
	inv, err := vsphere.Inventory(ctx, sess, vsphereVM(t, ctx, sess, "thin"))
	require.NoError(t, err)
	assert.True(t, inv.CBTEnabled)
	assert.NotEmpty(t, inv.Disks[0].ChangeID, "a disk of a VM with change tracking has a change ID")

	faults := map[string]struct {
		vm   string
		key  int32
		want types.BaseMethodFault
	}{
		"change tracking off": {vm: "plain", key: disk.Key, want: &types.FileFault{}},
		"unknown device":      {vm: "thin", key: 4242, want: &types.InvalidArgument{}},
		"powered on":          {vm: "running", key: disk.Key, want: &types.InvalidPowerState{}},
	}
	_, err = s.AddVM(ctx, thinVM("plain", false, false))
	require.NoError(t, err)
	_, err = s.AddVM(ctx, thinVM("running", true, true))
	require.NoError(t, err)
	for name, tc := range faults {
		t.Run(name, func(t *testing.T) {
			v := s.vms[tc.vm]
			_, err := vsphere.AllocatedAreas(ctx, c, v.Ref(), tc.key, disk.SizeBytes)
			require.Error(t, err)
			assert.True(t, fault.Is(err, tc.want), "%v is not a %T", err, tc.want)
		})
	}

	s.ChangeTracking().Underreport(thin.Ref(), true)
	got, err := vsphere.AllocatedAreas(ctx, c, thin.Ref(), disk.Key, disk.SizeBytes)
	require.NoError(t, err)
	assert.Less(t, vsphere.AreasBytes(got), written, "an underreporting map covers less than the disk holds")
}

// vsphereVM finds a VM as the controller does.
func vsphereVM(t *testing.T, ctx context.Context, sess *vsphere.Session, name string) *object.VirtualMachine {
	t.Helper()
	vm, err := vsphere.FindVM(ctx, sess, v1alpha1.VMSelector{Name: name})
	require.NoError(t, err)
	return vm
}
