package vsphere

import (
	"context"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// Class sorts an error by what the caller should do about it.
type Class string

const (
	// ClassNone is the class of a nil error.
	ClassNone Class = ""
	// ClassNotFound: the object (VM, snapshot, datacenter) does not exist.
	// Fail, or re-find it when it may have moved.
	ClassNotFound Class = "NotFound"
	// ClassAuth: the credentials were refused or the session is gone and
	// could not be renewed. Fail until the Secret changes.
	ClassAuth Class = "Auth"
	// ClassPermission: the user lacks a privilege. Fail until an
	// administrator grants it.
	ClassPermission Class = "Permission"
	// ClassTransient: network trouble, deadlines, a busy object. Retry with
	// backoff.
	ClassTransient Class = "Transient"
	// ClassInvalidState: the object is not in a state that allows the call
	// (power state, tools not running). Observe again and decide.
	ClassInvalidState Class = "InvalidState"
	// ClassPermanent: anything else, including bad input and TLS
	// verification failures. Fail with the message.
	ClassPermanent Class = "Permanent"
)

// NotFoundError says a vSphere object does not exist.
type NotFoundError struct {
	// Kind of object, for example "virtual machine".
	Kind string
	// Key is how it was looked up, for example `biosUUID "4206..."`.
	Key string
}

// Error implements error.
func (e *NotFoundError) Error() string { return e.Kind + " with " + e.Key + " not found" }

// AmbiguousError says a lookup matched more than one object.
type AmbiguousError struct {
	// Kind of object, for example "virtual machine".
	Kind string
	// Key is how it was looked up.
	Key string
	// Candidates are the inventory paths of the matches, sorted.
	Candidates []string
}

// Error implements error.
func (e *AmbiguousError) Error() string {
	return e.Kind + " with " + e.Key + " is ambiguous, candidates: " + strings.Join(e.Candidates, ", ")
}

// Classify sorts an error into a Class so the state machine can choose
// between retrying and failing. It looks through wrapping (fmt.Errorf %w),
// SOAP faults, VIM faults and task errors.
func Classify(err error) Class {
	if err == nil {
		return ClassNone
	}
	var nf *NotFoundError
	if errors.As(err, &nf) {
		return ClassNotFound
	}
	var busy *EndpointBusyError
	var unavailable *EndpointUnavailableError
	if errors.Is(err, ErrSessionClosed) || errors.As(err, &busy) || errors.As(err, &unavailable) {
		return ClassTransient
	}
	if errors.Is(err, ErrToolsNotRunning) {
		return ClassInvalidState
	}
	var amb *AmbiguousError
	if errors.As(err, &amb) {
		return ClassPermanent
	}
	var na *EndpointNotAllowedError
	if errors.As(err, &na) {
		return ClassAuth
	}
	if f := vimFault(err); f != nil {
		return classifyFault(f)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return ClassTransient
	}
	if isTLSVerification(err) {
		return ClassPermanent
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed) {
		return ClassTransient
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return ClassTransient
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		return ClassTransient
	}
	var temp interface{ Temporary() bool }
	if errors.As(err, &temp) && temp.Temporary() {
		return ClassTransient // HTTP 502, 503, 504 from a proxy or a restarting vpxd
	}
	return ClassPermanent
}

func classifyFault(f types.BaseMethodFault) Class {
	switch f.(type) {
	case *types.ManagedObjectNotFound, *types.NotFound, *types.FileNotFound:
		return ClassNotFound
	case *types.NotAuthenticated, *types.InvalidLogin, *types.NoPermissionOnAD:
		return ClassAuth
	case types.BaseNoPermission, *types.RestrictedVersion:
		return ClassPermission
	case *types.TaskInProgress, *types.ConcurrentAccess, *types.HostCommunication,
		*types.HostNotConnected, *types.HostNotReachable, *types.RequestCanceled,
		types.BaseTimedout, *types.ResourceInUse, types.BaseInsufficientResourcesFault,
		*types.NetworkDisruptedAndConfigRolledBack, *types.SystemError:
		return ClassTransient
	case types.BaseInvalidState, *types.ToolsUnavailable:
		return ClassInvalidState
	}
	return ClassPermanent
}

// vimFault returns the VIM fault inside err, looking through wrapping, SOAP
// faults, VIM faults and task errors, or nil.
func vimFault(err error) types.BaseMethodFault {
	for e := err; e != nil; e = errors.Unwrap(e) {
		// soap.IsSoapFault and soap.IsVimFault match only the unwrapped
		// values; they and task.Error all carry the fault behind Fault().
		if soap.IsSoapFault(e) || soap.IsVimFault(e) {
			if h, ok := e.(interface{ Fault() types.BaseMethodFault }); ok {
				return h.Fault()
			}
		}
		if h, ok := e.(interface{ Fault() types.BaseMethodFault }); ok && h.Fault() != nil {
			return h.Fault()
		}
		if lf, ok := e.(types.HasLocalizedMethodFault); ok {
			if l := lf.GetLocalizedMethodFault(); l != nil && l.Fault != nil {
				return l.Fault
			}
		}
	}
	return nil
}

func isTLSVerification(err error) bool {
	var ce *CertificateError
	if errors.As(err, &ce) {
		return true
	}
	var ua x509.UnknownAuthorityError
	var he x509.HostnameError
	var ci x509.CertificateInvalidError
	if errors.As(err, &ua) || errors.As(err, &he) || errors.As(err, &ci) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "thumbprint does not match") ||
		strings.Contains(msg, "certificate signed by unknown authority") ||
		strings.Contains(msg, "certificate is not trusted")
}
