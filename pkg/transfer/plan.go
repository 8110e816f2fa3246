package transfer

import (
	"context"
	"io"

	"platform.example/vm-migration/pkg/transfer/wire"
	"platform.example/vm-migration/pkg/vsphere"
)

// RangeOpener serves byte ranges of one source file. *DatastoreFile implements it.
type RangeOpener interface {
	// OpenRange returns exactly the bytes [start, end) of a file of size total.
	OpenRange(ctx context.Context, start, end, total int64) (io.ReadCloser, error)
}

// DiskPlan is one disk resolved against its source: everything the copy
// needs, and nothing it must look up again.
type DiskPlan struct {
	// Spec is the disk's entry in the job spec.
	Spec wire.DiskSpec
	// Checkpoint is the resume checkpoint's path; empty turns resume off.
	Checkpoint string
	// Source identifies the source's content for the checkpoint (files,
	// sizes, validators): a checkpoint of another source is not resumed.
	Source string
	// Extents cover the image, in order, without gaps.
	Extents []ExtentPlan
	// Areas are the parts of the image read from the source, in order,
	// not touching: the areas vSphere reported in use. The rest of the
	// image is left as holes (zeroed on a device). Nil reads it all.
	Areas []vsphere.DiskArea
	// AllocatedBytes is the sum of the areas vSphere reported in use,
	// when it mapped them (even if the map was not trusted).
	AllocatedBytes *int64
	// Map identifies how the image is read, for the checkpoint: WholeDisk,
	// or the disk's change ID and a digest of Areas. A checkpoint of
	// another map is not resumed.
	Map string
	// FullCopyReason says why Areas is nil.
	FullCopyReason string
}

// ExtentPlan is one range of the image and the file that holds it.
type ExtentPlan struct {
	// File serves the extent's bytes.
	File RangeOpener
	// Start is the extent's offset in the image.
	Start int64
	// Length of the extent in bytes.
	Length int64
	// FileOffset is where the extent starts in its file.
	FileOffset int64
	// FileSize is the file's size.
	FileSize int64
}

// defaultCheckpoint is where a disk's checkpoint goes unless the spec says:
// beside a file image; nowhere for a block device (it has no directory of
// its own to keep one in).
func defaultCheckpoint(d wire.DiskSpec, block bool) string {
	if d.Checkpoint != "" {
		return d.Checkpoint
	}
	if block {
		return ""
	}
	return checkpointPath(d.Destination)
}
