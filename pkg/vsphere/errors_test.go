package vsphere

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/task"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	"platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

func soapFault(f types.BaseMethodFault) error {
	sf := &soap.Fault{Code: "ServerFaultCode", String: "fault"}
	sf.Detail.Fault = f
	return soap.WrapSoapFault(sf)
}

func TestClassify(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("doing a thing: %w", fmt.Errorf("deeper: %w", err)) }
	tests := map[string]struct {
		err  error
		want Class
	}{
		"nil":                      {nil, ClassNone},
		"our not found":            {&NotFoundError{Kind: "virtual machine", Key: "name x"}, ClassNotFound},
		"ambiguous":                {&AmbiguousError{Kind: "virtual machine", Key: "name x", Candidates: []string{"/a", "/b"}}, ClassPermanent},
		"managed object not found": {soapFault(&types.ManagedObjectNotFound{}), ClassNotFound},
		"not authenticated":        {soapFault(&types.NotAuthenticated{}), ClassAuth},
		"invalid login":            {soapFault(&types.InvalidLogin{}), ClassAuth},
		"no permission":            {soapFault(&types.NoPermission{PrivilegeId: "VirtualMachine.Interact.PowerOff"}), ClassPermission},
		"invalid power state":      {soapFault(&types.InvalidPowerState{}), ClassInvalidState},
		"invalid state":            {soapFault(&types.InvalidState{}), ClassInvalidState},
		"tools unavailable":        {soapFault(&types.ToolsUnavailable{}), ClassInvalidState},
		"task in progress":         {soapFault(&types.TaskInProgress{}), ClassTransient},
		"host communication":       {soapFault(&types.HostCommunication{}), ClassTransient},
		"invalid argument":         {soapFault(&types.InvalidArgument{}), ClassPermanent},
		"vim fault":                {soap.WrapVimFault(&types.InvalidPowerState{}), ClassInvalidState},
		"task error":               {task.Error{LocalizedMethodFault: &types.LocalizedMethodFault{Fault: &types.NoPermission{}}}, ClassPermission},
		"deadline":                 {context.DeadlineExceeded, ClassTransient},
		"canceled":                 {context.Canceled, ClassTransient},
		"url error with deadline":  {&url.Error{Op: "Post", URL: "https://vc/sdk", Err: context.DeadlineExceeded}, ClassTransient},
		"connection refused":       {&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, ClassTransient},
		"eof":                      {io.ErrUnexpectedEOF, ClassTransient},
		"unknown authority":        {&url.Error{Op: "Post", URL: "https://vc/sdk", Err: x509.UnknownAuthorityError{}}, ClassPermanent},
		"thumbprint mismatch":      {errors.New(`host "vc:443" thumbprint does not match "AB:CD"`), ClassPermanent},
		"tools not running":        {ErrToolsNotRunning, ClassInvalidState},
		"session closed":           {ErrSessionClosed, ClassTransient},
		"something else":           {errors.New("boom"), ClassPermanent},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, Classify(tc.err))
			if tc.err != nil {
				assert.Equal(t, tc.want, Classify(wrap(tc.err)), "wrapped")
			}
		})
	}
}

// TestConcurrentCallsAfterExpiryLogInOnce runs many calls at once on an
// expired session: one re-login serves them all.
func TestConcurrentCallsAfterExpiryLogInOnce(t *testing.T) {
	env := newSim(t, vpx, nil)
	s := env.connect(t)
	ctx := testCtx(t)
	ref := firstVM(t, s).ref
	terminate(t, env, s)

	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			vm, err := FindVM(ctx, s, v1alpha1.VMSelector{MoRef: ref.Value})
			if err == nil {
				_, err = PowerState(ctx, object.NewVirtualMachine(s.Client(), vm.Reference()))
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.Equal(t, 1, s.Relogins())
}
