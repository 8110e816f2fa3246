package controller

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// at is placed with another source URL.
func at(url string, m *v1alpha1.VirtualMachineMigration) *v1alpha1.VirtualMachineMigration {
	m.Spec.Source.URL = url
	return m
}

// lookSlot looks at m's slot as observe does: holders from the indexes.
func lookSlot(t *testing.T, f *fixture, m *v1alpha1.VirtualMachineMigration, lim slotLimits) bool {
	t.Helper()
	holders, err := f.c.slotHolders(m)
	require.NoError(t, err)
	return f.c.slots.look(m, holders, lim, f.clock.Now()).Available
}

// TestSlotHostKeyIgnoresURLSpelling: one endpoint written two ways (case,
// default port, trailing slash) is one host for the per-host limit.
func TestSlotHostKeyIgnoresURLSpelling(t *testing.T) {
	busy := at("https://VC.example.com:443/sdk/", placed("a", v1alpha1.PhaseTransferringDisks, "host-1", "ds1"))
	waiting := at("https://vc.example.com/sdk", placed("b", v1alpha1.PhaseQueued, "host-1", "ds2"))
	f := newFixture(t, &fakeSource{}, busy, waiting)
	assert.False(t, lookSlot(t, f, waiting, slotLimits{perHost: 1}),
		"the per-host limit is bypassed by spelling the endpoint's URL another way")
}

// TestDatastoreKeysOfStandaloneHostsDiffer: every standalone ESXi host
// calls its local datastore datastore1; two hosts' datastores are two
// datastores for the per-datastore limit.
func TestDatastoreKeysOfStandaloneHostsDiffer(t *testing.T) {
	busy := at("https://esx-1.example.com/sdk", placed("a", v1alpha1.PhaseTransferringDisks, "ha-host", "datastore1"))
	waiting := at("https://esx-2.example.com/sdk", placed("b", v1alpha1.PhaseQueued, "ha-host", "datastore1"))
	f := newFixture(t, &fakeSource{}, busy, waiting)
	assert.True(t, lookSlot(t, f, waiting, slotLimits{perDatastore: 1}),
		"datastore1 of another standalone host counts against this host's datastore1")
}

// TestSourceClaimMeetsAcrossEndpointAliases: the same VM of the same
// vCenter (its instance UUID in status.source.server) reached by name and
// by IP address is one source VM.
func TestSourceClaimMeetsAcrossEndpointAliases(t *testing.T) {
	holder := at("https://vc.example.com/sdk", placed("a", v1alpha1.PhaseTransferringDisks, "host-1", "ds1"))
	holder.Status.Source.Server = "5c2b1e0a-8f7d-4b0e-9d7a-2f1c3b4a5d6e"
	holder.Status.Source.InstanceUUID = "502e1d5c-aaaa-bbbb-cccc-0123456789ab"
	asking := at("https://10.0.0.5/sdk", placed("b", v1alpha1.PhaseValidating, "host-1", "ds1"))
	asking.Status.Evidence = nil
	f := newFixture(t, &fakeSource{}, holder, asking)

	inv := holder.Status.Source.DeepCopy()
	got, err := f.c.lookClaims(asking, inv)
	require.NoError(t, err)
	assert.Equal(t, key(holder).String(), got.SourceHeldBy, "the same VM reached through the vCenter's IP address is not claimed")
}

// TestReservationOutlivesASlowCache: a slot reservation counts until the
// cache shows the migration that took it, however long that takes (the
// API server or the watch can lag a minute behind under load), and no
// longer than that.
func TestReservationOutlivesASlowCache(t *testing.T) {
	first := placed("a", v1alpha1.PhaseQueued, "host-1", "ds1")
	first.ResourceVersion = "10"
	second := placed("b", v1alpha1.PhaseQueued, "host-1", "ds2")
	f := newFixture(t, &fakeSource{}, first, second)
	lim := slotLimits{perHost: 1}
	holders, err := f.c.slotHolders(first)
	require.NoError(t, err)
	require.True(t, f.c.slots.reserve(first, holders, lim, f.clock.Now()))

	f.clock.Step(5 * time.Minute)
	assert.False(t, lookSlot(t, f, second, lim), "the reservation expired while the cache still showed the taker Queued")

	// The cache catches up: the taker is counted from it.
	moved := first.DeepCopy()
	moved.ResourceVersion = "11"
	moved.Status.Phase = v1alpha1.PhaseStoppingSource
	require.NoError(t, f.informers.Migrations.GetIndexer().Update(moved))
	assert.False(t, lookSlot(t, f, second, lim))

	// It leaves the slot phases: the slot is free at once.
	moved = moved.DeepCopy()
	moved.ResourceVersion = "12"
	moved.Status.Phase = v1alpha1.PhaseConverting
	require.NoError(t, f.informers.Migrations.GetIndexer().Update(moved))
	assert.True(t, lookSlot(t, f, second, lim), "the reservation outlived the cache catching up")

	// A reservation whose status write failed goes with the failure, even
	// if the cache never changes.
	require.True(t, f.c.slots.reserve(second, nil, lim, f.clock.Now()))
	third := placed("c", v1alpha1.PhaseQueued, "host-1", "ds3")
	assert.False(t, f.c.slots.look(third, nil, lim, f.clock.Now()).Available)
	f.c.dropReservations(second)
	assert.True(t, f.c.slots.look(third, nil, lim, f.clock.Now()).Available)
}

// TestClaimReservationOutlivesASlowCache: the same for the claim on a
// source VM.
func TestClaimReservationOutlivesASlowCache(t *testing.T) {
	first := placed("a", v1alpha1.PhaseValidating, "host-1", "ds1")
	first.ResourceVersion = "10"
	first.Status.Evidence = nil
	second := placed("b", v1alpha1.PhaseValidating, "host-1", "ds1")
	second.Status.Evidence = nil
	second.Status.Source.InstanceUUID = first.Status.Source.InstanceUUID
	f := newFixture(t, &fakeSource{}, first, second)
	want := claimOf(first, &first.Status)
	require.True(t, f.c.claims.reserve(first, want, nil, f.clock.Now()))

	f.clock.Step(5 * time.Minute)
	got, err := f.c.lookClaims(second, second.Status.Source)
	require.NoError(t, err)
	assert.Equal(t, key(first).String(), got.SourceHeldBy, "the claim's reservation expired while the cache still showed it unvalidated")

	ended := first.DeepCopy()
	ended.ResourceVersion = "11"
	ended.Status.Phase = v1alpha1.PhaseFailed
	require.NoError(t, f.informers.Migrations.GetIndexer().Update(ended))
	got, err = f.c.lookClaims(second, second.Status.Source)
	require.NoError(t, err)
	assert.Empty(t, got.SourceHeldBy, "the reservation outlived the cache catching up")
}

// TestKeysMeetThroughTheHost: a VM reached through its vCenter and the
// same VM reached directly through its ESXi host (which reports no
// instance UUID of its own) is one source VM, on one host, on one
// datastore; another VM on that host is not claimed.
func TestKeysMeetThroughTheHost(t *testing.T) {
	const hostUUID, vmUUID, dsURL = "4C4C4544-0042-3510-8051-B4C04F4D3732", "502e1d5c-aaaa-bbbb-cccc-0123456789ab", "ds:///vmfs/volumes/5f1e2d3c-4b5a6978-8796-a5b4c3d2e1f0/"
	viaVC := at("https://vc.example.com/sdk", placed("a", v1alpha1.PhaseTransferringDisks, "host-12", "ds1"))
	viaVC.Status.Source.Server = "5c2b1e0a-8f7d-4b0e-9d7a-2f1c3b4a5d6e"
	viaVC.Status.Source.HostUUID, viaVC.Status.Source.InstanceUUID = hostUUID, vmUUID
	viaVC.Status.Source.Disks[0].DatastoreURL = dsURL
	direct := at("https://esx-12.example.com/sdk", placed("b", v1alpha1.PhaseQueued, "ha-host", "datastore1"))
	direct.Status.Source.HostUUID, direct.Status.Source.InstanceUUID = strings.ToLower(hostUUID), vmUUID
	direct.Status.Source.Disks[0].DatastoreURL = dsURL
	f := newFixture(t, &fakeSource{}, viaVC, direct)

	assert.False(t, lookSlot(t, f, direct, slotLimits{perHost: 1}), "the host reached directly is another host")
	assert.False(t, lookSlot(t, f, direct, slotLimits{perDatastore: 1}), "the datastore reached directly is another datastore")

	inv := direct.Status.Source.DeepCopy()
	got, err := f.c.lookClaims(direct, inv)
	require.NoError(t, err)
	assert.Equal(t, key(viaVC).String(), got.SourceHeldBy, "the VM reached through its host is another VM")

	inv.InstanceUUID = "502e1d5c-0000-0000-0000-000000000001"
	got, err = f.c.lookClaims(direct, inv)
	require.NoError(t, err)
	assert.Empty(t, got.SourceHeldBy, "another VM of the same host is claimed")
}
