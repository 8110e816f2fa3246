// Package libnbd stands in for the Go bindings of libguestfs' libnbd when
// the CDI binaries are built by hack/build-cdi.sh.
//
// CDI imports libnbd only in its VDDK data source (pkg/importer), which
// copies disks from vSphere through VMware's VDDK library; neither the
// library nor the Go bindings (cgo against libnbd) can be had here, and the
// project never asks CDI for a VDDK import: its own transfer Job copies the
// disks. Every function and method therefore fails with ErrNotSupported, so
// a DataVolume with a VDDK source fails with that message instead of the
// importer not building at all. The names and signatures are the ones CDI
// v1.65.0 calls; nothing else of libnbd is declared.
package libnbd

import (
	"errors"
	"fmt"
)

// ErrNotSupported is the error every call returns.
var ErrNotSupported = errors.New("VDDK/NBD import is not supported by this CDI build (libnbd is a stub, see hack/tools/cdi)")

// Flags CDI tests or passes; the values are libnbd's so a reader of CDI's
// code sees the same numbers.
const (
	// CMD_FLAG_REQ_ONE asks block status for one extent at a time.
	CMD_FLAG_REQ_ONE = uint32(0x08)
	// STATE_HOLE marks an extent that is not allocated.
	STATE_HOLE = uint32(1)
	// STATE_ZERO marks an extent that reads as zeroes.
	STATE_ZERO = uint32(2)
)

// LibnbdError is the error type of Close, as in libnbd.
type LibnbdError struct {
	// Op names the call that failed.
	Op string
	// Err is why it failed.
	Err error
}

// Error says which call failed and why.
func (e *LibnbdError) Error() string {
	return fmt.Sprintf("libnbd: %s: %v", e.Op, e.Err)
}

// Unwrap returns the cause, so errors.Is(err, ErrNotSupported) holds.
func (e *LibnbdError) Unwrap() error { return e.Err }

func notSupported(op string) *LibnbdError {
	return &LibnbdError{Op: op, Err: ErrNotSupported}
}

// PreadOptargs are the optional arguments of Pread.
type PreadOptargs struct {
	// FlagsSet says whether Flags is given.
	FlagsSet bool
	// Flags are the command flags.
	Flags uint32
}

// BlockStatusOptargs are the optional arguments of BlockStatus.
type BlockStatusOptargs struct {
	// FlagsSet says whether Flags is given.
	FlagsSet bool
	// Flags are the command flags.
	Flags uint32
}

// ExtentCallback receives the extents BlockStatus reports.
type ExtentCallback func(metacontext string, offset uint64, entries []uint32, err *int) int

// Libnbd is a handle; this build never hands one out.
type Libnbd struct{}

// Create fails: there is no libnbd in this build.
func Create() (*Libnbd, error) {
	return nil, notSupported("create")
}

// AddMetaContext fails with ErrNotSupported.
func (h *Libnbd) AddMetaContext(name string) error {
	return notSupported("add_meta_context " + name)
}

// ConnectUri fails with ErrNotSupported.
func (h *Libnbd) ConnectUri(uri string) error {
	return notSupported("connect_uri")
}

// GetSize fails with ErrNotSupported.
func (h *Libnbd) GetSize() (uint64, error) {
	return 0, notSupported("get_size")
}

// Pread fails with ErrNotSupported.
func (h *Libnbd) Pread(buf []byte, offset uint64, optargs *PreadOptargs) error {
	return notSupported("pread")
}

// BlockStatus fails with ErrNotSupported.
func (h *Libnbd) BlockStatus(count, offset uint64, extent ExtentCallback, optargs *BlockStatusOptargs) error {
	return notSupported("block_status")
}

// Close fails with ErrNotSupported: there is nothing to close.
func (h *Libnbd) Close() *LibnbdError {
	return notSupported("close")
}
