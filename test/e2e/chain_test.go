//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/blocktree"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/steps/pipeline"
	"platform.example/vm-migration/test/vcsimlocal"
)

// TestChecksumChain: every byte is accounted for on the real node, with
// no read beyond the copy and what the conversion wrote. The transfer pod
// computes each disk's block tree as it writes the claims the VM uses
// (its root the source disk's), the conversion pod (the SIMULATED
// conversion, which writes 4 MiB of 0x5a at 1 MiB into the first disk
// through its qcow2 overlay) commits the overlay and re-hashes only the
// 4 blocks it touched, and that tree is the target's (no copy, no
// verification read): the first disk's root is that of the source's
// bytes with those 4 MiB written, the others' the source's.
// The source's NICs carry a static address and a PCI slot: the
// conversion asks to look into the guest, and says per NIC why it could
// not (the simulated image has no guestfish): whether the address is
// static is unknown, and so is the network identity.
func TestChecksumChain(t *testing.T) {
	s := newStack(t, stackOptions{})
	spec := vcsimlocal.SampleVM("chain-01", 41)
	spec.NICs[0].PCISlot = 192
	spec.NICs[0].Guest = &vcsimlocal.GuestNIC{Addresses: []vcsimlocal.GuestAddress{{CIDR: "192.168.10.21/24"}}, Gateway: "192.168.10.1"}
	src, err := s.vc.AddVM(s.ctx, spec)
	require.NoError(t, err, "adding VM chain-01 to vcsim")
	m := s.create(s.newMigration("chain-01", "chain-01"))
	m = s.waitPhase(m.Name, v1alpha1.PhaseSucceeded, 4*time.Minute)
	s.verifyTargetDisks(m, src)

	for i, d := range m.Status.Disks {
		require.NotNil(t, d.Checksums, "disk %d: no checksums past the transfer", i)
		c := d.Checksums
		want, rehashed := src.Disks[i].SHA256, int64(0)
		if i == 0 {
			want, rehashed = simulatedConversionRoot(t, src.Disks[0].SizeBytes, spec.Disks[0].Seed), 4<<20
			assert.NotEqual(t, src.Disks[0].SHA256, c.Converted, "the first disk: converted")
		}
		assert.Equal(t, want, c.Converted, "disk %d: the converted image's root", i)
		assert.Equal(t, rehashed, c.RehashedBytes, "disk %d: the blocks the conversion wrote, re-hashed; nothing else read", i)
		assert.Equal(t, d.CapacityBytes, c.ConvertedBytes, "disk %d: the converted image's size", i)
		assert.Equal(t, c.Converted, c.Target, "disk %d: the target holds the converted bytes", i)
		assert.GreaterOrEqual(t, c.TargetBytes, d.CapacityBytes, "disk %d: the target image's size", i)
		assert.Equal(t, v1alpha1.ComparedConvertedInPlace, c.Compared, "disk %d: the claim the transfer wrote and the conversion hashed", i)
		assert.NotEmpty(t, d.TargetClaimUID, "disk %d: the claim written, by UID", i)
		assert.NotNil(t, c.VerifiedAt, "disk %d", i)
	}
	assert.Nil(t, m.Status.Verification, "no verification read: the disks were written in place, and the conversion's read is the target's")
	for _, d := range m.Status.Disks {
		// The recomputation docs/operators/safety.md gives a user, with
		// coreutils alone, over the disk's image in its claim.
		image := filepath.Join(s.claimDir(d.DataVolume), pipeline.ImageFile)
		out, err := exec.Command("sh", "-c", `split -b 1048576 --filter='sha256sum | cut -c1-64' "$1" | sha256sum | cut -c1-64`, "sh", image).CombinedOutput()
		require.NoError(t, err, "%s", out)
		assert.Equal(t, d.Checksums.Target, strings.TrimSpace(string(out)), "disk %s: the documented pipeline gives the root status holds", d.Name)
	}
	assert.Contains(t, evidenceOf(m, v1alpha1.PhaseImporting), "adopting the claims the transfer wrote and the conversion hashed, unread since, with no copy")

	if cv := m.Status.Conversion; assert.NotNil(t, cv) && assert.Len(t, cv.Interfaces, 1, "the NIC the conversion looked for") {
		assert.Equal(t, v1alpha1.InterfacePin{MAC: src.MACs[0], GuestUnreadable: true, Message: "the conversion image has no guestfish to look into the guest"}, cv.Interfaces[0])
	}
	assert.Equal(t, &v1alpha1.GuestNICInfo{IPAddresses: []v1alpha1.GuestIPAddress{{IP: "192.168.10.21", PrefixLength: 24}}, Gateway: "192.168.10.1"},
		m.Status.Source.NICs[0].Guest, "what VMware Tools reported")
	c := condition(m, statemachine.ConditionNetworkIdentityPreserved)
	if assert.NotNil(t, c, "the network identity condition") {
		assert.Equal(t, metav1.ConditionUnknown, c.Status, "condition %+v", c)
		assert.Equal(t, statemachine.ReasonStaticAddressesUnknown, c.Reason, "condition %+v", c)
	}
	s.waitNoLeftovers(m, time.Minute)
}

// TestCorruptTargetFailsBeforeStart: the disks are written in place and
// the conversion hashes what it leaves in them; the migration is held in
// Importing (a quota admits no DataVolume) and paused, a byte of a target
// claim is altered, and the migration resumed. The pause makes a
// verification Job read the targets again before any VM exists: the
// migration fails (ChecksumMismatch, naming the disk), and the rollback
// powers the source on again.
func TestCorruptTargetFailsBeforeStart(t *testing.T) {
	s := newStack(t, stackOptions{})
	s.addVM("corrupt-01", 43)
	m := s.create(s.newMigration("corrupt-01", "corrupt-01"))
	s.waitPhase(m.Name, v1alpha1.PhaseTransferringDisks, 3*time.Minute)
	release := s.holdDataVolumes()
	m = s.waitPhase(m.Name, v1alpha1.PhaseImporting, 4*time.Minute)
	s.setPaused(m.Name, true)
	m = s.waitFor(m.Name, time.Minute, "the pause seen by the controller", func(m *v1alpha1.VirtualMachineMigration) bool {
		c := condition(m, statemachine.ConditionPaused)
		return c != nil && c.Status == metav1.ConditionTrue
	})
	release()
	victim := m.Status.Disks[1]
	require.True(t, victim.WrittenInPlace(), "disk %s: written in place: %+v", victim.Name, victim)
	require.NotEmpty(t, victim.ConvertedSHA256(), "disk %s: hashed by the conversion", victim.Name)
	flipByte(t, filepath.Join(s.claimDir(victim.StagingClaim), pipeline.ImageFile), 4096+17)
	s.setPaused(m.Name, false)

	m = s.waitPhase(m.Name, v1alpha1.PhaseFailed, 3*time.Minute)
	if e := m.Status.LastError; assert.NotNil(t, e, "the last error") {
		assert.Equal(t, v1alpha1.PhaseImporting, e.Phase, "failed before the VM exists: %+v", e)
		assert.Equal(t, statemachine.ReasonChecksumMismatch, e.Reason, "%+v", e)
		assert.Contains(t, e.Message, victim.Name+" (DataVolume "+victim.DataVolume+"): target sha256 ")
		assert.Contains(t, e.Message, "first difference at bytes 0-1048575", "the block the altered byte is in, which the conversion never touched")
		assert.Contains(t, e.Message, "the VM was not started")
	}
	if v := m.Status.Verification; assert.NotNil(t, v, "the pause made a verification read") {
		assert.Equal(t, naming.VerificationJob(m.Name, 1), v.JobName)
	}
	for _, d := range m.Status.Disks {
		require.NotNil(t, d.Checksums, "disk %s: checksums", d.Name)
		if d.Name == victim.Name {
			assert.NotEqual(t, d.Checksums.Converted, d.Checksums.Target, "the altered disk")
			assert.Nil(t, d.Checksums.VerifiedAt)
			assert.Equal(t, &v1alpha1.ByteRange{Offset: 0, Length: 1 << 20}, d.Checksums.Mismatch, "the first differing block, in status")
		} else {
			assert.Equal(t, d.Checksums.Converted, d.Checksums.Target, "disk %s is intact", d.Name)
		}
	}
	_, err := s.kv.KubevirtV1().VirtualMachines(s.ns).Get(s.ctx, "corrupt-01", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "no VirtualMachine was created: %v", err)
	assert.Equal(t, "poweredOn", s.powerState("corrupt-01"), "the source is powered on again")
	if sc := m.Status.SourceControl; assert.NotNil(t, sc) {
		assert.NotNil(t, sc.RestoredAt, "the restore is recorded: %+v", sc)
	}
}

// simulatedConversionRoot is the root of the block tree of a sample disk
// of size bytes (seed) once the simulated conversion wrote into it: 4 MiB
// of 0x5a at 1 MiB (64 KiB at 0 of a disk under 8 MiB).
func simulatedConversionRoot(t *testing.T, size int64, seed uint64) string {
	t.Helper()
	data := vcsimlocal.DiskBytes(size, seed)
	offset, length := 1<<20, 4<<20
	if size < 8<<20 {
		offset, length = 0, 64<<10
	}
	copy(data[offset:offset+length], bytes.Repeat([]byte{0x5a}, length))
	tree, _, err := blocktree.Compute(context.Background(), bytes.NewReader(data), size, blocktree.Options{})
	require.NoError(t, err)
	return tree.Root()
}

// setPaused sets spec.policy.paused.
func (s *stack) setPaused(name string, paused bool) {
	s.t.Helper()
	patch := []byte(`{"spec":{"policy":{"paused":false}}}`)
	if paused {
		patch = []byte(`{"spec":{"policy":{"paused":true}}}`)
	}
	_, err := s.mig.MigrationV1alpha1().VirtualMachineMigrations(s.ns).Patch(s.ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(s.t, err, "setting spec.policy.paused of %s to %v", name, paused)
}

// waitDataVolume waits for a DataVolume's phase.
func (s *stack) waitDataVolume(name string, phase cdiv1.DataVolumePhase, timeout time.Duration) {
	s.t.Helper()
	var last cdiv1.DataVolumePhase
	err := wait.PollUntilContextTimeout(s.ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		dv, err := s.cdi.CdiV1beta1().DataVolumes(s.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = dv.Status.Phase
		return last == phase, nil
	})
	require.NoError(s.t, err, "DataVolume %s: phase %s not reached within %s (last %q)", name, phase, timeout, last)
}

// flipByte inverts one byte of a file, as silent corruption would.
func flipByte(t *testing.T, path string, offset int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err, "opening %s", path)
	defer f.Close()
	b := make([]byte, 1)
	_, err = f.ReadAt(b, offset)
	require.NoError(t, err)
	b[0] ^= 0xff
	_, err = f.WriteAt(b, offset)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	t.Logf("flipped byte %d of %s", offset, strings.TrimPrefix(path, os.TempDir()))
}
