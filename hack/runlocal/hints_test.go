package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestHintsExplainTheLocalStack: what run-local prints while the stack
// stays up says how to reach it with a kubectl of the server's version
// (the machine's may be older), how to import an image into the node and
// remove one, and how to add source VMs to vcsim (issue 34: the --vm flag
// was documented only in a Go comment, the node's images nowhere), give
// them a larger disk or change them with govc (issue 50).
func TestHintsExplainTheLocalStack(t *testing.T) {
	s := Stack{
		State: "_output/run-local", Namespace: "migrations", Example: "web-01", VMs: []string{"web-01", "db-01"},
		VcsimURL: "https://10.42.0.1:40123/sdk", ServerVersion: "v1.37.2", MachineKubectl: "v1.32.4",
	}
	h := Hints(s)
	for _, want := range []string{
		". _output/run-local/env",
		"kubectl v1.37.2, the server's version (the machine's kubectl is v1.32.4)",
		"kubectl vmm get web-01 -n migrations",
		"make local-import TARBALL=",
		"make local-remove REF=",
		"hack/local-node.sh list",
		"vcsim (https://10.42.0.1:40123/sdk, datacenter DC0) serves web-01, db-01",
		"kubectl apply -f _output/run-local/migrations/db-01.yaml",
		"make run-local VMS=web-01,db-01,app-01",
		"GUEST=bios",
		"make run-local DISK_GIB=4",
		"govc device.info -vm web-01 ethernet-0",
		"docs/contributors/testing.md, The local vCenter",
		"Ctrl-C stops everything",
	} {
		assert.Contains(t, h, want)
	}
	assert.NotContains(t, h, "migrations/web-01.yaml", "the example is applied already")

	s.MachineKubectl = ""
	assert.Contains(t, Hints(s), "kubectl v1.37.2, the server's version (the machine has no kubectl of its own)")
	s.MachineKubectl = "v1.37.2"
	assert.NotContains(t, Hints(s), "the machine's kubectl is", "nothing to say when they match")

	s.VMs = []string{"web-01"}
	assert.Contains(t, Hints(s), "no other VM to migrate: add some with", "a stack of one VM says how to get more")

	s.Guest, s.VMs = "bios", []string{"bios-guest", "app-01"}
	assert.Contains(t, Hints(s), "real bios Debian guests", "what the VMs are")
	assert.NotContains(t, Hints(s), "DISK_GIB", "a real guest's disk is its image's size")
}
