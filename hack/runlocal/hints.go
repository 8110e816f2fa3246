package main

import (
	"fmt"
	"path"
	"strings"
)

// Stack is what Hints says of the local stack.
type Stack struct {
	// State is run-local's state folder (RUN_LOCAL_DIR), as the reader
	// types it: env, migrations/, logs/ are in it.
	State string
	// Namespace and Example name the example migration.
	Namespace, Example string
	// VMs are the source VMs vcsim serves, the example's first.
	VMs []string
	// VcsimURL is vcsim's SDK URL.
	VcsimURL string
	// ServerVersion is the API server's version, which the kubectl the env
	// file puts on PATH has.
	ServerVersion string
	// MachineKubectl is the version of the machine's own kubectl, empty
	// when it has none.
	MachineKubectl string
	// Guest is the real guests' firmware (GUEST), empty for sample VMs.
	Guest string
}

// Hints is what run-local prints once the example ended, while the stack
// stays up: how to reach it with a kubectl of the server's version, what
// vcsim serves and how to migrate or add VMs, size their disks or change
// them with govc, how to put images on the node and take them off.
func Hints(s Stack) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	machine := ""
	switch {
	case s.MachineKubectl == "":
		machine = " (the machine has no kubectl of its own)"
	case s.MachineKubectl != s.ServerVersion:
		machine = fmt.Sprintf(" (the machine's kubectl is %s)", s.MachineKubectl)
	}
	p("")
	p("The stack stays up. In another terminal, in this clone, as root:")
	p("")
	p("  . %s    # KUBECONFIG and GOVC_URL, and on PATH kubectl-vmm, govc and kubectl %s, the server's version%s", path.Join(s.State, "env"), s.ServerVersion, machine)
	p("  kubectl get vmm,vm,vmi,dv,pvc,pods -A")
	p("  kubectl vmm get %s -n %s", s.Example, s.Namespace)
	p("  kubectl vmm describe %s -n %s", s.Example, s.Namespace)
	p("  kubectl logs -n vm-migration-system deployment/migration-controller")
	p("")
	what := "sample VMs: EFI, 3 disks of random bytes, 2 NICs; only the simulated virt-v2v takes them"
	more := `make run-local VMS=web-01,db-01,app-01   # the first is the example's; with GUEST=bios each is a real Debian guest the real virt-v2v converts`
	if s.Guest != "" {
		what = fmt.Sprintf("real %s Debian guests, one disk and one NIC each, which the real virt-v2v converts", s.Guest)
		more = fmt.Sprintf("make run-local GUEST=%s VMS=%s-guest,app-01,app-02   # the first is the example's", s.Guest, s.Guest)
	}
	p("Source VMs: vcsim (%s, datacenter DC0) serves %s (%s); the Secret %s/vcsim-credentials holds its credentials.",
		s.VcsimURL, strings.Join(s.VMs, ", "), what, s.Namespace)
	if len(s.VMs) > 1 {
		for _, vm := range s.VMs[1:] {
			p("  kubectl apply -f %s    # a migration of %s, like the example's", path.Join(s.State, "migrations", vm+".yaml"), vm)
		}
		p("  More VMs: Ctrl-C, then %s", more)
	} else {
		p("  There is no other VM to migrate: add some with Ctrl-C, then %s", more)
	}
	if s.Guest == "" {
		p("  A larger disk: Ctrl-C, then make run-local DISK_GIB=4   # each sample VM's first disk 4 GiB instead of 8 MiB")
	}
	p("  govc device.info -vm %s ethernet-0   # change a VM before migrating it (its MAC, what VMware Tools reports, its power):", s.VMs[0])
	p("  docs/contributors/testing.md, The local vCenter, gives the govc commands")
	p("")
	p("Images: the node pulls from no registry; its pods run what was imported into its containerd")
	p("(a reference never imported waits in ErrImagePull, then ImagePullBackOff):")
	p("  make local-import TARBALL=_output/image/vm-migration-controller.tar    # or _output/conversion-image/vm-migration-conversion.tar")
	p("  make local-remove REF=platform.example/vm-migration-controller:dev")
	p("  hack/local-node.sh list")
	p("docs/operators/installing.md (On the local stack) installs the controller from images of your own and migrates a VM with them.")
	p("")
	p("Logs: %s   Ctrl-C stops everything.", path.Join(s.State, "logs"))
	return b.String()
}
