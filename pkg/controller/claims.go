package controller

import (
	"slices"
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
)

// claimRegistry keeps one migration per source VM (cluster-wide: the same
// VM instance UUID reported by the same vCenter or ESXi host, see
// sourceClaimKeys) and one per target VM name (per namespace) among the
// migrations in flight.
//
// A migration claims both when its validation succeeds, and holds them
// until it ends (Succeeded or Failed) or is gone; what it holds is read
// from its status (status.source and status.target). Two workers
// validating at the same instant could both find nothing held in the
// cache, so the claims are looked at while observing (look: read-only,
// part of the observation) and then taken in an explicit step (reserve)
// before the decision that validated the migration is written: reserve
// checks again under the lock against the cache and the reservations the
// cache does not show yet, and refuses when another worker took a claim
// in between; the decision is then dropped and the next reconcile sees
// the holder. A reservation counts until the cache caught up with it
// (see caughtUp), however long that takes. One process takes claims at a
// time (the leader), and a new leader finds every claim in the statuses.
type claimRegistry struct {
	cached cachedMigration
	mu     sync.Mutex
	held   map[cache.ObjectName]claim
}

// claim is what one migration holds: the keys of its source VM and its
// target; rv is the resourceVersion of the migration a reservation was
// taken from.
type claim struct {
	sources []string
	target  string
	rv      string
}

func newClaimRegistry(cached cachedMigration) *claimRegistry {
	return &claimRegistry{cached: cached, held: map[cache.ObjectName]claim{}}
}

// claimOf is what a migration with this status claims.
func claimOf(m *v1alpha1.VirtualMachineMigration, st *v1alpha1.VirtualMachineMigrationStatus) claim {
	c := claim{sources: sourceClaimKeys(m.SpecInForce().Source.URL, st.Source)}
	if st.Target != nil && st.Target.Name != "" {
		c.target = m.Namespace + "/" + st.Target.Name
	}
	return c
}

// holdsClaims reports whether a migration in this state holds its claims:
// validated and not ended (a failing one holds them until its rollback
// restored the source).
func holdsClaims(m *v1alpha1.VirtualMachineMigration) bool {
	p := m.Status.Phase
	return m.Status.Source != nil && m.Status.Evidence != nil && slices.ContainsFunc(m.Status.Evidence, func(e v1alpha1.CheckpointEvidence) bool {
		return e.Phase == v1alpha1.PhaseValidating
	}) && !statemachine.IsTerminal(p) && p != v1alpha1.PhasePlanned
}

// look names the migrations holding what m would claim with want.
func (r *claimRegistry) look(m *v1alpha1.VirtualMachineMigration, want claim, all []*v1alpha1.VirtualMachineMigration, now time.Time) statemachine.ClaimObservation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.holders(m, want, all, now)
}

// reserve takes m's claims if nobody holds them, and reports whether it did.
func (r *claimRegistry) reserve(m *v1alpha1.VirtualMachineMigration, want claim, all []*v1alpha1.VirtualMachineMigration, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if h := r.holders(m, want, all, now); h.SourceHeldBy != "" || h.TargetHeldBy != "" {
		return false
	}
	want.rv = m.ResourceVersion
	r.held[cache.MetaObjectToName(m)] = want
	return true
}

// holders runs with the lock held.
func (r *claimRegistry) holders(m *v1alpha1.VirtualMachineMigration, want claim, all []*v1alpha1.VirtualMachineMigration, now time.Time) statemachine.ClaimObservation {
	self := cache.MetaObjectToName(m)
	claims := map[cache.ObjectName]claim{}
	for key, c := range r.held {
		if !caughtUp(r.cached, key, c.rv, holdsClaims) {
			claims[key] = c
		}
	}
	for _, other := range all {
		if holdsClaims(other) {
			claims[cache.MetaObjectToName(other)] = claimOf(other, &other.Status)
		}
	}
	delete(claims, self)
	var out statemachine.ClaimObservation
	for key, c := range claims {
		if out.SourceHeldBy == "" && slices.ContainsFunc(want.sources, func(s string) bool { return slices.Contains(c.sources, s) }) {
			out.SourceHeldBy = key.String()
		}
		if want.target != "" && c.target == want.target && out.TargetHeldBy == "" {
			out.TargetHeldBy = key.String()
		}
	}
	return out
}

// settle forgets the reservations the cache caught up with, and m's own
// once it ended or is gone.
func (r *claimRegistry) settle(key cache.ObjectName, ended bool, _ time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, c := range r.held {
		if caughtUp(r.cached, k, c.rv, holdsClaims) {
			delete(r.held, k)
		}
	}
	if ended {
		delete(r.held, key)
	}
}

// drop forgets m's reservation: the decision it was taken for was not
// written.
func (r *claimRegistry) drop(key cache.ObjectName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.held, key)
}
