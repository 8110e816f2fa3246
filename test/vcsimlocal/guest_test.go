package vcsimlocal

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/vsphere"
)

// ops are the kinds of the operations, in order.
func ops(list []PowerOp) []string {
	var out []string
	for _, o := range list {
		out = append(out, o.Op)
	}
	return out
}

// TestSimulatedGuestShutsDownSlowly: a guest asked to shut down stays on
// for ShutdownTakes, then powers off; a power-on is recorded with the
// state it found; the calls come through the controller's own library.
func TestSimulatedGuestShutsDownSlowly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Start(ctx, Options{})
	require.NoError(t, err)
	defer s.Close()
	_, err = s.AddVM(ctx, SmallVM("slow-01", 5))
	require.NoError(t, err)
	const takes = 700 * time.Millisecond
	require.NoError(t, s.SimulateGuest(ctx, "slow-01", GuestOptions{ShutdownTakes: takes}))
	require.Error(t, s.SimulateGuest(ctx, "slow-01", GuestOptions{}), "a second guest for the same VM")

	sess := connect(ctx, t, s, Datacenter)
	defer func() { _ = sess.Logout(context.Background()) }()
	vm, err := vsphere.FindVM(ctx, sess, v1alpha1.VMSelector{Name: "slow-01"})
	require.NoError(t, err)
	obs, err := vsphere.ObservePower(ctx, vm)
	require.NoError(t, err)
	require.True(t, obs.ToolsRunning, "the simulated guest runs VMware Tools")

	require.NoError(t, vsphere.ShutdownGuest(ctx, vm))
	st, err := vsphere.PowerState(ctx, vm)
	require.NoError(t, err)
	assert.Equal(t, types.VirtualMachinePowerStatePoweredOn, st, "still on right after the request: the guest is shutting down")
	require.NoError(t, vsphere.WaitForPowerState(ctx, vm, types.VirtualMachinePowerStatePoweredOff, 20*time.Millisecond))
	require.NoError(t, vsphere.PowerOn(ctx, vm))

	got := s.PowerOps("slow-01")
	require.Equal(t, []string{OpShutdownGuest, OpGuestOff, OpPowerOn}, ops(got))
	assert.GreaterOrEqual(t, got[1].At.Sub(got[0].At), takes, "the guest took its time")
	assert.Equal(t, "poweredOn", got[0].State)
	assert.Equal(t, "poweredOff", got[2].State)
	assert.Nil(t, s.PowerOps("no-such-vm"))
}

// TestSimulatedGuestShutdownVoidAfterReboot: a shutdown asked before the
// VM was powered off and on again does not power off the new boot.
func TestSimulatedGuestShutdownVoidAfterReboot(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Start(ctx, Options{})
	require.NoError(t, err)
	defer s.Close()
	_, err = s.AddVM(ctx, SmallVM("reboot-01", 6))
	require.NoError(t, err)
	const takes = 300 * time.Millisecond
	require.NoError(t, s.SimulateGuest(ctx, "reboot-01", GuestOptions{ShutdownTakes: takes}))
	sess := connect(ctx, t, s, Datacenter)
	defer func() { _ = sess.Logout(context.Background()) }()
	vm, err := vsphere.FindVM(ctx, sess, v1alpha1.VMSelector{Name: "reboot-01"})
	require.NoError(t, err)

	require.NoError(t, vsphere.ShutdownGuest(ctx, vm))
	require.NoError(t, vsphere.PowerOff(ctx, vm))
	require.NoError(t, vsphere.PowerOn(ctx, vm))
	time.Sleep(3 * takes) // longer than the void shutdown would take
	st, err := vsphere.PowerState(ctx, vm)
	require.NoError(t, err)
	assert.Equal(t, types.VirtualMachinePowerStatePoweredOn, st)
	assert.Equal(t, []string{OpShutdownGuest, OpPowerOff, OpPowerOn}, ops(s.PowerOps("reboot-01")))
}

// TestPaceExtentReads: a paced extent cannot arrive faster than its pace;
// removing the pace lets it through at once.
func TestPaceExtentReads(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Start(ctx, Options{})
	require.NoError(t, err)
	defer s.Close()
	vm, err := s.AddVM(ctx, SmallVM("paced-01", 8))
	require.NoError(t, err)
	sess := connect(ctx, t, s, Datacenter)
	defer func() { _ = sess.Logout(context.Background()) }()
	var cookie string
	for _, c := range sess.Client().Client.Jar.Cookies(sess.Client().URL()) {
		if c.Name == soap.SessionCookieName {
			cookie = c.Value
		}
	}
	url := s.URL[:len(s.URL)-len("/sdk")] + "/folder/paced-01/paced-01-flat.vmdk?dcPath=DC0&dsName=" + Datastore
	get := func() (int64, time.Duration) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		require.NoError(t, err)
		req.AddCookie(&http.Cookie{Name: soap.SessionCookieName, Value: cookie})
		start := time.Now()
		resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: insecureTLS()}}).Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		n, err := io.Copy(io.Discard, resp.Body)
		require.NoError(t, err)
		return n, time.Since(start)
	}
	size := vm.Disks[0].SizeBytes
	const rate = 8 << 20
	s.PaceExtentReads("paced-01", rate)
	n, took := get()
	require.Equal(t, size, n)
	// The first slice goes after its own share of time, the last at the
	// end of the whole extent's: never sooner than size/rate.
	assert.GreaterOrEqual(t, took, time.Duration(size*int64(time.Second)/rate), "served faster than its pace")
	s.PaceExtentReads("paced-01", 0)
	n, _ = get()
	require.Equal(t, size, n)
	// The server counts a write once it returned: the client may have
	// the last bytes a moment before.
	assert.Eventually(t, func() bool { return s.ExtentBytesServed("paced-01") == 2*size }, 10*time.Second, 5*time.Millisecond,
		"served %d bytes, want %d", s.ExtentBytesServed("paced-01"), 2*size)
}
