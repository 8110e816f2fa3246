// Package transfer copies the disks of a powered-off vSphere virtual machine
// into raw images, the data path of the migration's TransferringDisks phase.
//
// For each disk it reads the VMDK text descriptor from the datastore HTTP
// interface (/folder), refuses snapshot deltas and anything that is not a
// flat extent, then streams the flat extent with Range requests into the
// destination: a file (disk.img in a staging volume, kept sparse where the
// source returns zero blocks) or a raw block device. A SHA-256 of the whole
// image is computed on the fly. Progress is checkpointed next to the image
// (offset and hash state, written atomically after every chunk) so that a
// restart continues where the last one stopped and re-sends at most one
// chunk; the checkpoint is removed once the image is complete.
//
// The package holds the job spec the controller renders (JobSpec), the
// progress and result documents the command reports (Progress, Result), the
// copy engine (Copier) over a byte Source, and the vSphere plumbing that
// turns a spec into sources (Plan).
package transfer
