package controller

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/cache"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/test/builders"
)

// placed is a validated migration in phase p of a VM on host, whose disks
// are on the datastores ds.
func placed(name string, p v1alpha1.Phase, host string, ds ...string) *v1alpha1.VirtualMachineMigration {
	return builders.Migration(builders.Named(name), builders.WithFinalizer, builders.InPhase(p),
		builders.WithStatus(func(s *v1alpha1.VirtualMachineMigrationStatus) {
			s.ObservedGeneration = 1
			s.Source = &v1alpha1.SourceInventory{Name: name, HostMoRef: host, InstanceUUID: "uuid-" + name}
			for i, d := range ds {
				s.Source.Disks = append(s.Source.Disks, v1alpha1.SourceDisk{Key: int32(2000 + i), Datastore: d})
			}
			s.Target = &v1alpha1.TargetStatus{Name: "vm-" + name}
			s.Evidence = []v1alpha1.CheckpointEvidence{{Phase: v1alpha1.PhaseValidating}}
		}))
}

func names(ms []*v1alpha1.VirtualMachineMigration) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.Name)
	}
	return out
}

// TestSlotHoldersFromIndex: the migrations a slot count reads are exactly
// those holding a slot on the host or a datastore of the migration asking,
// and they follow the cache as migrations change phase or are deleted.
func TestSlotHoldersFromIndex(t *testing.T) {
	onH1 := placed("a", v1alpha1.PhaseTransferringDisks, "h1", "ds1")
	stopping := placed("b", v1alpha1.PhaseStoppingSource, "h1", "ds9")
	sharesDS := placed("c", v1alpha1.PhaseTransferringDisks, "h2", "ds2")
	otherHost := placed("d", v1alpha1.PhaseTransferringDisks, "h2", "ds3")
	converting := placed("e", v1alpha1.PhaseConverting, "h1", "ds1")
	queued := placed("f", v1alpha1.PhaseQueued, "h1", "ds1")
	deleting := placed("g", v1alpha1.PhaseTransferringDisks, "h1", "ds1")
	builders.Deleted(deleting)
	asking := placed("x", v1alpha1.PhaseQueued, "h1", "ds1", "ds2")
	f := newFixture(t, &fakeSource{}, onH1, stopping, sharesDS, otherHost, converting, queued, deleting, asking)

	holders, err := f.c.slotHolders(asking)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"a", "b", "c"}, names(holders))

	waiting, err := f.c.indexed(lookup{indexQueuedHost, []string{slotKeys(asking).host}})
	require.NoError(t, err)
	assert.Equal(t, []string{"f", "x"}, names(waiting), "the queued migrations of h1")

	done := onH1.DeepCopy()
	done.Status.Phase = v1alpha1.PhaseConverting
	require.NoError(t, f.informers.Migrations.GetIndexer().Update(done))
	holders, err = f.c.slotHolders(asking)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"b", "c"}, names(holders), "a migration that left the slot phases no longer counts")
}

// TestClaimHoldersFromIndex: the migrations a claim check reads are those
// holding the source VM or the target name asked for, and only while they
// hold their claims (validated, not ended).
func TestClaimHoldersFromIndex(t *testing.T) {
	holder := placed("a", v1alpha1.PhaseTransferringDisks, "h1", "ds1")
	ended := placed("b", v1alpha1.PhaseSucceeded, "h1", "ds1")
	ended.Status.Source.InstanceUUID = "uuid-a"
	notValidated := placed("c", v1alpha1.PhaseValidating, "h1", "ds1")
	notValidated.Status.Evidence = nil
	notValidated.Status.Source.InstanceUUID = "uuid-a"
	other := placed("d", v1alpha1.PhaseQueued, "h1", "ds1")
	f := newFixture(t, &fakeSource{}, holder, ended, notValidated, other)

	tests := []struct {
		name string
		want claim
		held []string
	}{
		{"by source", claim{sources: sourceClaimKeys(builders.SourceURL, holder.Status.Source)}, []string{"a"}},
		{"by target", claim{target: builders.Namespace + "/vm-d"}, []string{"d"}},
		{"both", claim{sources: sourceClaimKeys(builders.SourceURL, holder.Status.Source), target: builders.Namespace + "/vm-d"}, []string{"a", "d"}},
		{"nobody", claim{sources: []string{"endpoint:vcenter.example.com:443/vm:uuid-z"}, target: builders.Namespace + "/free"}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := f.c.claimHolders(tt.want)
			require.NoError(t, err)
			assert.ElementsMatch(t, tt.held, names(got))
		})
	}
}

// queuedWave is a controller whose migration cache holds a wave of n
// migrations waiting in Queued on one host and datastore, two of them
// holding its slots, and one of the wave.
func queuedWave(tb testing.TB, n int) (*Controller, *v1alpha1.VirtualMachineMigration) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, migrationIndexers())
	add := func(m *v1alpha1.VirtualMachineMigration) {
		if err := idx.Add(m); err != nil {
			tb.Fatal(err)
		}
	}
	add(placed("holder-1", v1alpha1.PhaseTransferringDisks, "h1", "ds1"))
	add(placed("holder-2", v1alpha1.PhaseStoppingSource, "h1", "ds1"))
	for i := range n {
		add(placed(fmt.Sprintf("queued-%05d", i), v1alpha1.PhaseQueued, "h1", "ds1"))
	}
	return &Controller{migrationIndex: idx}, placed("queued-00007", v1alpha1.PhaseQueued, "h1", "ds1")
}

// TestSlotCountReadsNotTheWave (issue 32): a migration waiting in Queued
// counts the slot holders and the few waiting to transfer again, not the
// thousands queued beside it (bench-scale N=5000: reading and sorting
// them at every look took three quarters of the controller's CPU).
func TestSlotCountReadsNotTheWave(t *testing.T) {
	c, asking := queuedWave(t, 2000)
	retry := placed("retry", v1alpha1.PhaseConverting, "h1", "ds1")
	retry.Status.Transfer = &v1alpha1.JobStatus{}
	require.True(t, retransferWaits(retry), "the fixture waits to transfer again")
	require.NoError(t, c.migrationIndex.Add(retry))
	counted, err := c.slotCounted(asking)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"holder-1", "holder-2", "retry"}, names(counted))
}

// BenchmarkSlotCountInAWave: one slot count of a migration queued among
// 5,000 on its host and datastore.
func BenchmarkSlotCountInAWave(b *testing.B) {
	c, asking := queuedWave(b, 5000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.slotCounted(asking); err != nil {
			b.Fatal(err)
		}
	}
}
