package libnbd

// What KubeVirt's virt-launcher (pkg/virt-launcher/virtwrap/storage, the
// NBD client of its incremental backups, which the project never asks
// for) calls besides CDI's: hack/build-kubevirt-node.sh builds it against
// this stub too. Every call fails with ErrNotSupported, so a backup fails
// with that message.

// Meta contexts and the dirty bitmap state, with libnbd's values.
const (
	// CONTEXT_BASE_ALLOCATION is the allocation meta context.
	CONTEXT_BASE_ALLOCATION = "base:allocation"
	// CONTEXT_QEMU_DIRTY_BITMAP prefixes a QEMU dirty bitmap's context.
	CONTEXT_QEMU_DIRTY_BITMAP = "qemu:dirty-bitmap:"
	// STATE_DIRTY marks a dirty extent of a bitmap context.
	STATE_DIRTY = uint32(1)
)

// LibnbdExtent is one extent BlockStatus64 reports.
type LibnbdExtent struct {
	// Length is the extent's length in bytes.
	Length uint64
	// Flags are its state flags.
	Flags uint64
}

// ExtentCallback64 receives the extents BlockStatus64 reports.
type ExtentCallback64 func(metacontext string, offset uint64, entries []LibnbdExtent, err *int) int

// BlockStatus64Optargs are the optional arguments of BlockStatus64.
type BlockStatus64Optargs struct {
	// FlagsSet says whether Flags is given.
	FlagsSet bool
	// Flags are the command flags.
	Flags uint32
}

// SetExportName fails with ErrNotSupported.
func (h *Libnbd) SetExportName(name string) error {
	return notSupported("set_export_name")
}

// ConnectUnix fails with ErrNotSupported.
func (h *Libnbd) ConnectUnix(socket string) error {
	return notSupported("connect_unix")
}

// CanMetaContext fails with ErrNotSupported.
func (h *Libnbd) CanMetaContext(name string) (bool, error) {
	return false, notSupported("can_meta_context " + name)
}

// BlockStatus64 fails with ErrNotSupported.
func (h *Libnbd) BlockStatus64(count, offset uint64, extent ExtentCallback64, optargs *BlockStatus64Optargs) error {
	return notSupported("block_status_64")
}
