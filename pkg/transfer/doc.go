// Package transfer copies the disks of a powered-off vSphere virtual machine
// into raw images, the data path of the migration's TransferringDisks phase.
//
// For each disk it reads the VMDK text descriptor from the datastore HTTP
// interface (/folder, with the SOAP session cookie), refuses snapshot deltas
// and anything that is not made of flat extents, then reads each flat
// extent with Range requests into the destination: a file (disk.img in a
// staging volume, kept sparse where the source has zero blocks) or a raw
// block device (zero blocks zeroed with FALLOC_FL_ZERO_RANGE). Writes use
// direct I/O where the file system allows it. A SHA-256 of the whole image,
// zeros included, is computed on the fly. A wrong status, Content-Range or
// length, a body that ends early or runs long, or an extent whose size is
// not what the descriptor says, fails the disk; nothing is a silent success.
//
// # Allocated areas
//
// When the VM is powered off with changed block tracking on, the planner
// asks vSphere which areas of each disk are in use
// (vsphere.AllocatedAreas: QueryChangedDiskAreas with changeId "*"), and
// the copy reads only those: the rest of the image stays a hole (its
// size is still the capacity; a device gets zeros there), and is hashed
// as zeros without being read. Every answer is checked against the
// disk's capacity without a sum that could overflow (each area starts
// inside the disk and its span, ends within them, after the one before),
// so a map that wraps around 2^63 is refused, not trusted. The map is not
// trusted either when it covers less than the space the datastore reports
// in use for the disk's extents (layoutEx), or when that figure is
// negative or its sum would overflow; then, as when tracking is off,
// the query faults, the VM is not powered off or the job spec asks for
// fullCopy, the whole disk is read and the result says why. A checkpoint
// names the map it was made with (the disk's change ID and a digest of
// its areas): a run that reads another map starts over.
//
// # Streams, pieces and the hash
//
// A disk is read over --streams K connections at once (default 1), a
// piece at a time: half a chunk (--chunk-mib, default 8 MiB), on a grid
// from each extent's start; streams take the pieces in image order. A
// piece is one request in a full copy; with allocated areas, one request
// per area the piece holds (zeros between them), and a piece that holds
// none is not read at all. So a fragmented map costs requests, never more
// pieces, syncs or checkpoints than a full copy.
// One writer per disk writes what has arrived, syncs the image
// (fdatasync) and then rewrites the checkpoint naming those pieces. One
// hasher per disk hashes the pieces in image order as they come out of
// the writer (a piece that arrives early waits in memory for its turn), so
// the result's SHA-256 is the whole image's, computed once, from memory.
// Memory per disk is 2K+1 pieces, (K + 1/2) chunks, whatever the disk's
// size: a stream holds at most two pieces and the hasher lags by at most
// one before streams wait for buffers.
//
// # Resume, and what a crash re-sends
//
// A stream takes a credit before it requests a piece and the writer gives
// it back only once the piece is synced and checkpointed; a stream has two
// credits. The server can only send bytes that were asked for, so what a
// crash (even SIGKILL, or the node) can make the next attempt fetch again
// is at most two pieces, one chunk, per stream, whatever the read-ahead,
// the socket buffers on either side or the server's buffers hold.
//
// The checkpoint (".disk.img.checkpoint" beside the image, written to a
// temporary, synced, renamed, and its directory synced) holds the hashed offset and the SHA-256
// state there, the state about a chunk before it, and the pieces past the
// offset already written (out of order, by other streams). It names only
// bytes that were synced before it was written. A restart re-reads the
// chunk before the offset and checks it against the two saved states,
// punches holes over anything past the offset that the checkpoint does not
// name (a previous attempt may have written it without checkpointing it),
// reads back the named pieces when the hasher reaches them, and fetches
// the rest. A checkpoint that does not hold (another source, a damaged
// image) starts the copy over. A block device has no checkpoint unless the
// spec names one (no resume).
//
// A complete image's checkpoint becomes its completion record (its
// SHA-256, synced) and stays until every disk of the run is complete: a
// run that stops for another disk (a failure, a kill, the node) leaves it,
// and the next run hashes the image back (holes as zeros, unread) and,
// when it still matches, keeps it and copies nothing of that disk. Once
// every disk is complete, the records are removed (CDI clones every file
// in the volume's root) before the result is written.
//
// # The command
//
// cmd/vm-transfer is a thin main around Main:
//
//	vm-transfer --spec /etc/vm-transfer/spec/transfer-spec.json \
//	    --credentials-dir /etc/vm-transfer/credentials \
//	    [--parallel 2] [--streams 1] [--chunk-mib 8] [--retries 3] \
//	    [--progress-interval 5s] [--progress-file FILE] \
//	    [--progress-configmap NAMESPACE/NAME] [--termination-log /dev/termination-log]
//
// The credentials directory is a mounted Secret (username, password,
// optional ca.crt and thumbprint); credentials never appear in the spec,
// the arguments or the environment. Memory is about parallel x (streams +
// 1/2) x chunk plus 30 MiB, whatever the disk size. The controller sets
// --streams from its per-host connection budget (wire.StreamsPerDisk).
//
// The job spec (JSON or YAML, unknown fields rejected):
//
//	version: v1
//	endpoint: {url: "https://vcenter.example.com/sdk", datacenter: DC1, insecureSkipVerify: false}
//	vmMoRef: vm-42
//	disks:
//	- key: 2000
//	  fileName: "[datastore1] web-01/web-01.vmdk"
//	  capacityBytes: 42949672960
//	  destination: /staging/2000/disk.img   # or a block device such as /dev/xvdb
//	fullCopy: false                          # true reads every byte of every disk
//
// Output: progress as JSON lines on stdout at most every --progress-interval
// (Progress, kind "progress"), also rewritten atomically into --progress-file
// and patched into --progress-configmap when given; at the end one Result
// (kind "result": per disk bytes, sha256, duration, bytes read, whether
// only the allocated areas were read, or why not) on stdout and in the
// termination log, where the controller reads it from the Pod's status.
// A failure also prints one line on stderr and exits 1; usage errors exit 2.
//
// # Reading images back
//
// "vm-transfer hash [--termination-log FILE] NAME=PATH:BYTES..." (HashMain)
// hashes the first BYTES bytes of each image (a file, its holes hashed as
// zeros unread, or a block device), two at a time, and prints one
// wire.HashResult (per image its name, bytes hashed, size and SHA-256, or
// why it could not be read) on stdout and in the termination log; it
// takes at most wire.MaxHashImages images, so that the result fits the
// termination message. The migration's verification Job runs it over the
// target disks before the VM starts.
package transfer
