package vsphere

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// deadlineRoundTripper gives every SOAP call a deadline: the caller's, or
// the per-call timeout when the caller's is later or missing. Long polls for
// property updates (task waits) get the longer wait timeout instead.
type deadlineRoundTripper struct {
	call, wait time.Duration
	next       soap.RoundTripper
}

// RoundTrip implements soap.RoundTripper.
func (d *deadlineRoundTripper) RoundTrip(ctx context.Context, req, res soap.HasFault) error {
	limit := d.call
	switch req.(type) {
	case *methods.WaitForUpdatesExBody, *methods.WaitForUpdatesBody:
		limit = d.wait
	}
	if limit > 0 {
		if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > limit {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, limit)
			defer cancel()
		}
	}
	return d.next.RoundTrip(ctx, req, res)
}

// reloginRoundTripper logs in again once when a call fails because the
// server no longer knows the session (NotAuthenticated: idle expiry, a
// restart of vpxd, an administrator ending the session), then repeats the
// call. The server refused the first attempt before doing anything, so the
// repeat is safe even for calls that change state.
type reloginRoundTripper struct {
	s    *Session
	next soap.RoundTripper
}

// RoundTrip implements soap.RoundTripper.
func (r *reloginRoundTripper) RoundTrip(ctx context.Context, req, res soap.HasFault) error {
	gen := r.s.Relogins()
	err := r.next.RoundTrip(ctx, req, res)
	switch {
	case err == nil && !missingNotAuthenticated(res):
		return nil
	case err != nil && !isNotAuthenticated(err):
		return err
	}
	if lerr := r.s.relogin(ctx, gen); lerr != nil {
		return fmt.Errorf("logging in again after the session expired: %w", lerr)
	}
	resetBody(res)
	return r.next.RoundTrip(ctx, req, res)
}

// missingNotAuthenticated says a property collector answer has no values
// because the session is gone: vCenter (and vcsim) answer RetrieveProperties
// without a session with each property in the missing set and a
// NotAuthenticated fault, not with a SOAP fault.
func missingNotAuthenticated(res soap.HasFault) bool {
	var objs []types.ObjectContent
	switch b := res.(type) {
	case *methods.RetrievePropertiesBody:
		if b.Res != nil {
			objs = b.Res.Returnval
		}
	case *methods.RetrievePropertiesExBody:
		if b.Res != nil && b.Res.Returnval != nil {
			objs = b.Res.Returnval.Objects
		}
	case *methods.ContinueRetrievePropertiesExBody:
		if b.Res != nil {
			objs = b.Res.Returnval.Objects
		}
	}
	for _, o := range objs {
		for _, m := range o.MissingSet {
			if _, ok := m.Fault.Fault.(*types.NotAuthenticated); ok {
				return true
			}
		}
	}
	return false
}

// resetBody zeroes a response body so a repeated call does not see the
// previous attempt's fault.
func resetBody(res soap.HasFault) {
	v := reflect.ValueOf(res)
	if v.Kind() == reflect.Pointer && !v.IsNil() && v.Elem().CanSet() {
		v.Elem().Set(reflect.Zero(v.Elem().Type()))
	}
}

func isNotAuthenticated(err error) bool {
	_, ok := vimFault(err).(*types.NotAuthenticated)
	return ok
}
