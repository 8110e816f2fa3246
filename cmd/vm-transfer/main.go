// Command vm-transfer copies the disks of a powered-off vSphere VM into raw
// images (disk.img files or block devices), resumably, with a SHA-256 of
// each image. The migration controller runs it in a Job; it can also be run
// by hand:
//
//	vm-transfer --spec job.yaml --credentials-dir /etc/vsphere [--progress-file p.json]
//
// Its hash subcommand reads images back and prints their SHA-256, as the
// migration's verification Job does with the target disks before the VM
// starts:
//
//	vm-transfer hash [--termination-log FILE] NAME=PATH:BYTES...
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
	if len(os.Args) > 1 && os.Args[1] == "hash" {
		code = transfer.HashMain(ctx, os.Args[2:], os.Stdout, os.Stderr)
	} else {
		code = transfer.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	}
	stop()
	os.Exit(code)
}
