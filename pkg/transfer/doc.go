// Package transfer copies the disks of a powered-off vSphere virtual machine
// into raw images, the data path of the migration's TransferringDisks phase.
//
// For each disk it reads the VMDK text descriptor from the datastore HTTP
// interface (/folder, with the SOAP session cookie), refuses snapshot deltas
// and anything that is not made of flat extents, then streams each flat
// extent with one Range request into the destination: a file (disk.img in a
// staging volume, kept sparse where the source has zero blocks) or a raw
// block device (zero blocks zeroed with FALLOC_FL_ZERO_RANGE). Writes use
// direct I/O where the file system allows it. A SHA-256 of the whole image,
// zeros included, is computed on the fly.
//
// After every chunk the copy checkpoints its offset and hash state next to
// the image (".disk.img.checkpoint", written atomically), so a restart
// re-reads the last chunk from the image, checks it against the saved hash
// states and continues with a Range request from there: at most one chunk
// is sent twice. The checkpoint is removed once the image is complete (CDI
// clones every file in the volume's root). A wrong status, Content-Range or
// length, a body that ends early or runs long, or an extent whose size is
// not what the descriptor says, fails the disk; nothing is a silent success.
//
// # The command
//
// cmd/vm-transfer is a thin main around Main:
//
//	vm-transfer --spec /etc/vm-transfer/spec/transfer-spec.json \
//	    --credentials-dir /etc/vm-transfer/credentials \
//	    [--parallel 2] [--chunk-mib 4] [--buffers 4] [--retries 3] \
//	    [--progress-interval 5s] [--progress-file FILE] \
//	    [--progress-configmap NAMESPACE/NAME] [--termination-log /dev/termination-log]
//
// The credentials directory is a mounted Secret (username, password,
// optional ca.crt and thumbprint); credentials never appear in the spec,
// the arguments or the environment. Memory is about parallel x buffers x
// chunk plus 30 MiB, whatever the disk size.
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
//
// Output: progress as JSON lines on stdout at most every --progress-interval
// (Progress, kind "progress"), also rewritten atomically into --progress-file
// and patched into --progress-configmap when given; at the end one Result
// (kind "result": per disk bytes, sha256, duration) on stdout and in the
// termination log, where the controller reads it from the Pod's status.
// A failure also prints one line on stderr and exits 1; usage errors exit 2.
package transfer
