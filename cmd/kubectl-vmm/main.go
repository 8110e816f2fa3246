// Command kubectl-vmm is the kubectl plugin for VirtualMachineMigrations:
// installed on the PATH (make install-plugin, or go install
// ./cmd/kubectl-vmm), it runs as "kubectl vmm". See package cli.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"platform.example/vm-migration/pkg/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	code := cli.Execute(ctx, cli.NewRootCommand(streams), os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}
