package steps

import (
	"context"
	"errors"
	"net"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"platform.example/vm-migration/pkg/statemachine"
)

// Reasons of failed actions, as the state machine records them.
const (
	// ReasonRejected: the API server refused the object as invalid.
	ReasonRejected = "ObjectRejected"
	// ReasonAdmissionDenied: an admission webhook refused the request.
	ReasonAdmissionDenied = "AdmissionDenied"
	// ReasonQuotaExceeded: a ResourceQuota of the namespace refused it.
	ReasonQuotaExceeded = "QuotaExceeded"
	// ReasonForbidden: the controller's RBAC does not allow the request.
	ReasonForbidden = "Forbidden"
	// ReasonNameTaken: an object of that name exists and is not this
	// migration's.
	ReasonNameTaken = "NameTaken"
	// ReasonProofJobDeleting: an image proof Job of the key is being
	// deleted (a stale one, or its TTL's): the image is proven again once
	// it is gone.
	ReasonProofJobDeleting = "ProofJobDeleting"
	// ReasonAPIUnavailable: the API server could not answer now.
	ReasonAPIUnavailable = "APIUnavailable"
	// ReasonEndpointBusy: the vSphere endpoint already runs the most
	// operations of this controller allowed at once; the source was not
	// looked at, and the controller looks again in a moment without
	// deciding anything.
	ReasonEndpointBusy = "SourceEndpointBusy"
)

// Classify sorts the failure of an action into the state machine's
// classes. A step that knows better returns a *statemachine.ObservedError
// (the source step does for vSphere's faults, the pipeline step for a
// name taken by a foreign object); otherwise the API server's answer
// decides: an invalid object or an admission webhook's denial cannot heal
// (permanent); RBAC and quota refusals wait for a person (the deadline
// bounds the wait); everything else (timeouts, unavailability, conflicts,
// a cache not caught up yet) is transient.
func Classify(err error) statemachine.ObservedError {
	var oe *statemachine.ObservedError
	if errors.As(err, &oe) {
		return *oe
	}
	msg := err.Error()
	switch {
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsMethodNotSupported(err) ||
		apierrors.IsRequestEntityTooLargeError(err):
		return statemachine.ObservedError{Class: statemachine.ErrorPermanent, Reason: ReasonRejected, Message: msg}
	case strings.Contains(msg, "admission webhook") && strings.Contains(msg, "denied"):
		return statemachine.ObservedError{Class: statemachine.ErrorPermanent, Reason: ReasonAdmissionDenied, Message: msg}
	case apierrors.IsForbidden(err) && strings.Contains(msg, "exceeded quota"):
		return statemachine.ObservedError{Class: statemachine.ErrorNeedsUser, Reason: ReasonQuotaExceeded,
			Message: msg + ": raise the namespace's ResourceQuota or free what it counts"}
	case apierrors.IsForbidden(err):
		return statemachine.ObservedError{Class: statemachine.ErrorNeedsUser, Reason: ReasonForbidden,
			Message: msg + ": grant the controller's ServiceAccount what manifests/rbac.yaml grants"}
	case errors.Is(err, context.DeadlineExceeded), apierrors.IsTimeout(err), apierrors.IsServerTimeout(err),
		apierrors.IsTooManyRequests(err), apierrors.IsServiceUnavailable(err), apierrors.IsInternalError(err), isNetError(err):
		return statemachine.ObservedError{Class: statemachine.ErrorTransient, Reason: ReasonAPIUnavailable, Message: msg}
	}
	return statemachine.ObservedError{Class: statemachine.ErrorTransient, Reason: statemachine.ReasonActionFailed, Message: msg}
}

func isNetError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne)
}
