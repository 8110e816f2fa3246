// Command govc is govmomi's govc, with the command set of the govmomi
// version the project's go.mod requires (upstream keeps govc's main
// package in a module of its own that the module proxy does not serve;
// its commands live in github.com/vmware/govmomi/cli, which this main
// registers as upstream's does). hack/build-govc.sh builds it; the
// commands docs/contributors/testing.md names are checked against
// vcsim-local by test/vcsimlocal/cmd/vcsim-local's TestGovcCommands.
package main

import (
	"os"

	"github.com/vmware/govmomi/cli"
	_ "github.com/vmware/govmomi/cli/about"
	_ "github.com/vmware/govmomi/cli/datacenter"
	_ "github.com/vmware/govmomi/cli/datastore"
	_ "github.com/vmware/govmomi/cli/device"
	_ "github.com/vmware/govmomi/cli/env"
	_ "github.com/vmware/govmomi/cli/events"
	_ "github.com/vmware/govmomi/cli/fields"
	_ "github.com/vmware/govmomi/cli/folder"
	_ "github.com/vmware/govmomi/cli/host"
	_ "github.com/vmware/govmomi/cli/object"
	_ "github.com/vmware/govmomi/cli/session"
	_ "github.com/vmware/govmomi/cli/task"
	_ "github.com/vmware/govmomi/cli/version"
	_ "github.com/vmware/govmomi/cli/vm"
	_ "github.com/vmware/govmomi/cli/vm/disk"
	_ "github.com/vmware/govmomi/cli/vm/guest"
	_ "github.com/vmware/govmomi/cli/vm/network"
	_ "github.com/vmware/govmomi/cli/vm/snapshot"
)

func main() {
	os.Exit(cli.Run(os.Args[1:]))
}
