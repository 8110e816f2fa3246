package transfer

import (
	"context"
	"errors"
	"net/http"

	"platform.example/vm-migration/pkg/transfer/wire"
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
		return wire.ReasonCancelled
	case errors.Is(err, ErrSnapshotDelta):
		return wire.ReasonSnapshotDelta
	case errors.Is(err, ErrUnsupportedDisk):
		return wire.ReasonUnsupportedDisk
	case errors.Is(err, ErrDestination):
		return wire.ReasonDestinationUnusable
	case errors.Is(err, ErrInvalidSource):
		return wire.ReasonInvalidSource
	case errors.Is(err, ErrNotAuthorized):
		return wire.ReasonNotAuthorized
	case errors.As(err, &st) && (st.Code == http.StatusUnauthorized || st.Code == http.StatusForbidden):
		return wire.ReasonNotAuthorized
	case errors.Is(err, ErrConnection):
		return wire.ReasonConnectionFailed
	case errors.Is(err, ErrBadResponse):
		return wire.ReasonBadResponse
	}
	return wire.ReasonTransferFailed
}
