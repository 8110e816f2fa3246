// Command vm-transfer copies the disks of a powered-off vSphere VM into raw
// images (disk.img files or block devices), resumably, with the block tree
// of each image (a SHA-256 per 1 MiB block and a root over them: package
// blocktree), written beside a file image as disk.img.tree. The migration
// controller runs it in a Job; it can also be run by hand:
//
//	vm-transfer --spec job.yaml --credentials-dir /etc/vsphere [--progress-file p.json]
//
// Its hash subcommand reads images back and prints their tree roots (and,
// given their tree files, the first byte range that differs), as the
// migration's verification Job does with the target disks before the VM
// starts:
//
//	vm-transfer hash [--termination-log FILE] [--tree NAME=TREEFILE]... NAME=PATH:BYTES...
//
// checksum prints the tree root of a file or device, for a person
// checking a disk on their own (and writes its tree file):
//
//	vm-transfer checksum [--json] [--tree-out FILE] PATH [SIZE]
//
// tree-update re-hashes, in an image's tree file, the blocks a committed
// qcow2 overlay wrote, as the conversion does after qemu-img commit:
//
//	vm-transfer tree-update --image PATH --tree FILE --qemu-img-map FILE [--size N]
//
// install copies vm-transfer itself into a folder, as the conversion
// pod's init container does for the conversion script:
//
//	vm-transfer install DIR
//
// See package platform.example/vm-migration/pkg/transfer for the job spec,
// the progress and result documents, and the flags.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"platform.example/vm-migration/pkg/transfer"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	var code int
	sub := ""
	if len(os.Args) > 1 {
		sub = os.Args[1]
	}
	switch sub {
	case "hash":
		code = transfer.HashMain(ctx, os.Args[2:], os.Stdout, os.Stderr)
	case "checksum":
		code = transfer.ChecksumMain(ctx, os.Args[2:], os.Stdout, os.Stderr)
	case "tree-update":
		code = transfer.TreeUpdateMain(ctx, os.Args[2:], os.Stdout, os.Stderr)
	case "install":
		code = install(os.Args[2:], os.Stderr)
	default:
		code = transfer.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	}
	stop()
	os.Exit(code)
}
