// Package transfer copies the disks of a powered-off vSphere virtual machine
// into raw images, the data path of the migration's TransferringDisks phase.
//
// For each disk it reads the VMDK text descriptor from the datastore HTTP
// interface (/folder, with the SOAP session cookie), refuses snapshot deltas
// and anything that is not made of flat extents, then reads each flat
// extent with Range requests into the destination: a file (disk.img in a
// staging volume, kept sparse where the source has zero blocks) or a raw
// block device (zero blocks zeroed with FALLOC_FL_ZERO_RANGE). Writes use
// direct I/O where the file system allows it. The image's block tree
// (package blocktree: a SHA-256 per 1 MiB block, and a root over them) is
// computed on the fly, and written beside a file image (disk.img.tree) for
// a later step to re-hash only the blocks it changes; its root is the
// disk's checksum (wire.Result.Scheme "sha256-tree-1MiB"). A wrong status, Content-Range or
// length, a body that ends early or runs long, or an extent whose size is
// not what the descriptor says, fails the disk; nothing is a silent success.
//
// # Allocated areas
//
// When the VM is powered off with changed block tracking on, the planner
// asks vSphere which areas of each disk are in use
// (vsphere.AllocatedAreas: QueryChangedDiskAreas with changeId "*"), and
// the copy reads only those: the rest of the image stays a hole (its
// size is still the capacity; a device gets zeros there), and its whole
// blocks get the leaf of a block of zeros, neither read nor hashed. Every answer is checked against the
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
// # Streams, pieces and the tree
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
// hasher per disk takes the pieces in image order as they come out of
// the writer (a piece that arrives early waits in memory for its turn)
// into a blocktree.Builder: the whole blocks of a piece are hashed on
// every core the process may use (a block that is all zeros is not
// hashed), a block across two pieces is hashed as they come, and each
// leaf goes to the partial tree file (".disk.img.tree.partial") and into
// the root, so the result's checksum is the whole image's, computed once,
// from memory. Memory per disk is 2K+1 pieces, (K + 1/2) chunks, whatever
// the disk's size (the leaves are not kept): a stream holds at most two
// pieces and the hasher lags by at most one before streams wait for
// buffers. Once the image is complete and synced, the partial tree file
// gets its header with the root, is synced and renamed to the image's
// name with ".tree" (its directory synced): the tree of the disk's
// capacity. A block device has no tree file unless the job spec names
// one (treeFile). A tree file of an earlier image is removed when a copy
// starts or resumes: it never sits beside an image being written.
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
// temporary, synced, renamed, and its directory synced) holds the hashed
// offset and the tree's state there (blocktree.BuilderState: how many
// leaves are made, the SHA-256 state of the block under way, the root's
// state and the last two leaves), and the pieces past the offset already
// written (out of order, by other streams). It names only bytes that were
// synced to the image, and leaves that were synced to the partial tree
// file, before it was written: the leaves are never rewritten, a
// checkpoint names how many of them hold. A restart re-reads the last two
// blocks hashed and the block under way (at most 3 MiB) and checks them
// against the saved leaves and state, checks that the partial tree file's
// first leaves give the saved root state, punches holes over anything past
// the offset that the checkpoint does not name (a previous attempt may
// have written it without checkpointing it), reads back the named pieces
// when the hasher reaches them, and fetches the rest. A checkpoint that
// does not hold (another source, a damaged image, a partial tree file gone
// or changed) starts the copy over. A block device has no checkpoint
// unless the spec names one (no resume).
//
// A complete image's checkpoint becomes its completion record (its
// tree's root, synced) and stays until every disk of the run is complete:
// a run that stops for another disk (a failure, a kill, the node) leaves
// it, and the next run computes the image's tree again (blocks in
// parallel, holes unread) and, when its root is still the record's, keeps
// it, writes its tree file again and copies nothing of that disk. Once
// every disk is complete, the records are removed (CDI clones every file
// in the volume's root) before the result is written; the images and
// their tree files stay.
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
//	version: v2
//	endpoint: {url: "https://vcenter.example.com/sdk", datacenter: DC1, insecureSkipVerify: false}
//	vmMoRef: vm-42
//	disks:
//	- key: 2000
//	  fileName: "[datastore1] web-01/web-01.vmdk"
//	  capacityBytes: 42949672960
//	  destination: /staging/2000/disk.img   # or a block device such as /dev/xvdb
//	  treeFile: /staging/2000/disk.img.tree # optional: the default beside a file, none for a device
//	fullCopy: false                          # true reads every byte of every disk
//
// Output: progress as JSON lines on stdout at most every --progress-interval
// (Progress, kind "progress"), also rewritten atomically into --progress-file
// and patched into --progress-configmap when given; at the end one Result
// (kind "result", scheme "sha256-tree-1MiB": per disk bytes, sha256 (the
// tree's root), duration, bytes read, whether only the allocated areas
// were read, or why not) on stdout and in the termination log, where the
// controller reads it from the Pod's status.
// A failure also prints one line on stderr and exits 1; usage errors exit 2.
//
// # Reading images back
//
// "vm-transfer hash [--termination-log FILE] [--tree NAME=TREEFILE]...
// NAME=PATH:BYTES..." (HashMain) computes the tree of the first BYTES
// bytes of each image (a file, its holes unread, or a block device), two
// images at a time, each on every core, and prints one wire.HashResult
// (per image its name, bytes hashed, size and tree root, or why it could
// not be read; with --tree, the stored tree's root and the first byte
// range in which it and the image differ, or why the tree file does not
// read) on stdout and in the termination log; it takes at most
// wire.MaxHashImages images, so that the result fits the termination
// message. The migration's verification Job runs it over the target disks
// before the VM starts.
//
// "vm-transfer checksum [--json] [--tree-out FILE] PATH [SIZE]"
// (ChecksumMain) prints the tree root of a file or device (SIZE bytes,
// its size by default) as "<root>  PATH", or one JSON line, for a person
// checking a disk on their own; --tree-out writes the tree file.
//
// "vm-transfer tree-update --image PATH --tree FILE --qemu-img-map FILE
// [--size N]" (TreeUpdateMain) re-hashes, in an image's tree file, the
// blocks a committed qcow2 overlay wrote (its qemu-img map --output=json)
// and writes the tree back atomically: the conversion's checksum without
// reading the whole image again.
package transfer
