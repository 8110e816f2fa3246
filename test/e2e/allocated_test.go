//go:build e2e

package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/test/vcsimlocal"
)

// thinVMSpec is a small VM with one thin disk of size bytes, about a
// quarter of it written, with changed block tracking on or off.
func thinVMSpec(name string, seed uint64, size int64, cbt bool) vcsimlocal.VMSpec {
	spec := vcsimlocal.SmallVM(name, seed)
	spec.Disks = []vcsimlocal.DiskSpec{{SizeBytes: size, Seed: seed, AllocatedPercent: 25}}
	spec.ChangeTracking = cbt
	return spec
}

// evidenceOf is what a migration recorded when it reached a phase.
func evidenceOf(m *v1alpha1.VirtualMachineMigration, phase v1alpha1.Phase) string {
	for _, e := range m.Status.Evidence {
		if e.Phase == phase {
			return e.Observed
		}
	}
	return ""
}

// TestAllocatedOnlyTransfer migrates two VMs with the same thin disk at
// once: the one with changed block tracking has only its allocated areas
// read (the datastore serves exactly the bytes vSphere reported in use);
// the one without is copied whole, its status saying why; a third, with
// tracking on but spec.transfer.allocatedOnly false, is copied whole too.
// Every target disk's checksum is its source's, and status, evidence and
// the datastore's count agree.
func TestAllocatedOnlyTransfer(t *testing.T) {
	s := newStack(t, stackOptions{transferStreams: 2})
	const size = 128 * vcsimlocal.MiB
	cases := []struct {
		name          string
		cbt, optOut   bool
		allocatedOnly bool
		reason        string
	}{
		{name: "thin-cbt", cbt: true, allocatedOnly: true},
		{name: "thin-plain", reason: "changed block tracking is off"},
		{name: "thin-optout", cbt: true, optOut: true, reason: "allocated-only copy is turned off"},
	}
	vms := map[string]*vcsimlocal.VM{}
	for i, c := range cases {
		vm, err := s.vc.AddVM(s.ctx, thinVMSpec(c.name, uint64(300+i), size, c.cbt))
		require.NoError(t, err, "adding VM %s", c.name)
		vms[c.name] = vm
		m := s.newMigration(c.name, c.name)
		if c.optOut {
			m.Spec.Transfer.AllocatedOnly = ptr.To(false)
		}
		s.create(m)
	}
	for _, c := range cases {
		m := s.waitPhase(c.name, v1alpha1.PhaseSucceeded, 4*time.Minute)
		s.verifyTargetDisks(m, vms[c.name])
		d := m.Status.Disks[0]
		served := s.vc.ExtentBytesServed(c.name)
		evidence := evidenceOf(m, v1alpha1.PhaseTransferringDisks)
		t.Logf("%s: %d-byte disk, allocated %v, read %d, served %d, full-copy reason %q; evidence: %s",
			c.name, size, ptr.Deref(d.AllocatedBytes, -1), d.BytesRead, served, d.FullCopyReason, evidence)
		assert.Equal(t, c.allocatedOnly, d.AllocatedOnly, "%s: allocated only", c.name)
		assert.Equal(t, served, d.BytesRead, "%s: bytes read in status, want what the datastore served", c.name)
		if c.allocatedOnly {
			require.NotNil(t, d.AllocatedBytes, "%s: allocated bytes as vSphere reported them", c.name)
			assert.Equal(t, *d.AllocatedBytes, served, "%s: the datastore served the allocated areas, once", c.name)
			assert.Less(t, served, int64(size)/2, "%s: a quarter-written disk read whole", c.name)
			assert.Empty(t, d.FullCopyReason, "%s", c.name)
			assert.Contains(t, evidence, fmt.Sprintf("disk %d allocated areas only (%d bytes in use)", d.Key, *d.AllocatedBytes))
			continue
		}
		assert.Equal(t, int64(size), served, "%s: the whole disk is read", c.name)
		assert.Contains(t, d.FullCopyReason, c.reason, "%s: why the whole disk was read", c.name)
		assert.Contains(t, evidence, fmt.Sprintf("disk %d whole (", d.Key), "%s: evidence", c.name)
	}
}

// TestAllocatedOnlyKilledMidCopyResumes kills an allocated-only transfer
// with SIGKILL mid-copy (the datastore paced): the next attempt resumes
// from the checkpoint in the same staging volume, with the same map, and
// vcsim served the allocated areas once plus at most one chunk per
// stream; the target disk's checksum is the source's.
func TestAllocatedOnlyKilledMidCopyResumes(t *testing.T) {
	const streams = 2
	s := newStack(t, stackOptions{transferStreams: streams})
	const name = "thin-kill"
	src, err := s.vc.AddVM(s.ctx, thinVMSpec(name, 320, 256*vcsimlocal.MiB, true))
	require.NoError(t, err)
	s.vc.PaceExtentReads(name, 16<<20)
	m := s.create(s.newMigration(name, name))

	chunk, servedAtKill := s.killTransferMidCopy(m, name, streams)

	m = s.waitPhase(m.Name, v1alpha1.PhaseSucceeded, 3*time.Minute)
	assert.Equal(t, int32(2), m.Status.Transfer.Attempt, "one more attempt after the kill")
	d := m.Status.Disks[0]
	require.True(t, d.AllocatedOnly, "the disk was copied allocated-only: %+v", d)
	require.NotNil(t, d.AllocatedBytes)
	allocated := *d.AllocatedBytes
	require.Less(t, servedAtKill, allocated, "the copy was over before the kill")
	served := s.vc.ExtentBytesServed(name)
	resent := served - allocated
	t.Logf("vcsim served %d bytes for %d allocated of a %d-byte disk: %d re-sent (limit: %d streams x %d-byte chunk = %d); status: %d read",
		served, allocated, src.Disks[0].SizeBytes, resent, streams, chunk, int64(streams)*chunk, d.BytesRead)
	assert.GreaterOrEqual(t, resent, int64(0))
	assert.LessOrEqual(t, resent, int64(streams)*chunk, "more than one chunk per stream was sent again")
	assert.GreaterOrEqual(t, d.BytesRead, allocated, "bytes read over the attempts cover the allocated areas")
	assert.LessOrEqual(t, d.BytesRead, served, "bytes read over the attempts: at most what was served")
	s.verifyTargetDisks(m, src)
}
