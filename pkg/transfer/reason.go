package transfer

import (
	"context"
	"errors"
	"net/http"
)

// Failure reasons, as CamelCase constants for the controller's status.
const (
	// ReasonInvalidSpec: the job spec is malformed.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonInvalidSource: the VM or a disk is not what the spec says.
	ReasonInvalidSource = "InvalidSource"
	// ReasonSnapshotDelta: a disk's backing is a snapshot delta.
	ReasonSnapshotDelta = "SnapshotDelta"
	// ReasonUnsupportedDisk: a disk's layout cannot be copied.
	ReasonUnsupportedDisk = "UnsupportedDisk"
	// ReasonDestinationUnusable: a destination cannot take its disk.
	ReasonDestinationUnusable = "DestinationUnusable"
	// ReasonNotAuthorized: the credentials were refused.
	ReasonNotAuthorized = "NotAuthorized"
	// ReasonConnectionFailed: the endpoint could not be reached or trusted.
	ReasonConnectionFailed = "ConnectionFailed"
	// ReasonBadResponse: the server sent something other than the bytes asked for.
	ReasonBadResponse = "BadResponse"
	// ReasonCancelled: the run was stopped (signal or deadline).
	ReasonCancelled = "Cancelled"
	// ReasonTransferFailed: anything else.
	ReasonTransferFailed = "TransferFailed"
)

// ErrInvalidSource says the VM or a disk does not match the job spec.
var ErrInvalidSource = errors.New("source does not match the job spec")

// ErrConnection says the endpoint could not be reached, trusted or logged in to.
var ErrConnection = errors.New("connecting to vSphere")

// ErrNotAuthorized says vSphere refused the credentials.
var ErrNotAuthorized = errors.New("vSphere refused the credentials")

// Reason classifies an error of a run.
func Reason(err error) string {
	var st *StatusError
	switch {
	case err == nil:
		return ""
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return ReasonCancelled
	case errors.Is(err, ErrSnapshotDelta):
		return ReasonSnapshotDelta
	case errors.Is(err, ErrUnsupportedDisk):
		return ReasonUnsupportedDisk
	case errors.Is(err, ErrDestination):
		return ReasonDestinationUnusable
	case errors.Is(err, ErrInvalidSource):
		return ReasonInvalidSource
	case errors.Is(err, ErrNotAuthorized):
		return ReasonNotAuthorized
	case errors.As(err, &st) && (st.Code == http.StatusUnauthorized || st.Code == http.StatusForbidden):
		return ReasonNotAuthorized
	case errors.Is(err, ErrConnection):
		return ReasonConnectionFailed
	case errors.Is(err, ErrBadResponse):
		return ReasonBadResponse
	}
	return ReasonTransferFailed
}
