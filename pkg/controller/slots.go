package controller

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
)

// slotLimits are the transfer limits; zero means no bound.
type slotLimits struct{ perHost, perDatastore int }

// slotReservations remembers migrations admitted to a transfer slot whose
// new phase the informer cache may not show yet, so that two workers
// deciding at the same instant cannot both take the last slot.
//
// A slot is looked at (look, read-only, part of the observation) and then
// taken in an explicit step (reserve) once the decision moved the
// migration into a slot-holding phase and before its status is written:
// reserve counts again under the lock and refuses when another worker took
// the slot in between, and the decision is then dropped.
//
// A reservation counts until the cache caught up with it (caughtUp).
type slotReservations struct {
	cached cachedMigration
	mu     sync.Mutex
	held   map[cache.ObjectName]reservation
}

// reservation is a slot's keys (see hostSlotKey, datastoreSlotKey); rv is
// the resourceVersion of the migration it was taken from.
type reservation struct {
	host       string
	datastores []string
	rv         string
}

func newSlotReservations(cached cachedMigration) *slotReservations {
	return &slotReservations{cached: cached, held: map[cache.ObjectName]reservation{}}
}

// holdsSlot reports whether a migration in this phase counts against the
// transfer limits: from the moment the source is being stopped until its
// disks are transferred.
func holdsSlot(p v1alpha1.Phase) bool {
	return p == v1alpha1.PhaseStoppingSource || p == v1alpha1.PhaseTransferringDisks
}

// looksAtSlot reports whether the decision for m looks at a transfer
// slot: waiting for one in Queued, or in Converting, where a failed
// conversion sends the migration back to transfer its disks again.
func looksAtSlot(m *v1alpha1.VirtualMachineMigration) bool {
	return waitsForSlot(m) || (m.Status.Phase == v1alpha1.PhaseConverting && m.DeletionTimestamp == nil)
}

// retransferWaits reports whether a cached migration waits for a slot to
// transfer its disks again after a failed conversion: its source is off,
// so it goes before the migrations waiting in Queued.
func retransferWaits(m *v1alpha1.VirtualMachineMigration) bool {
	return statemachine.RetransferPending(&m.Status) && m.DeletionTimestamp == nil
}

// slotKeys are the host and the datastores a migration reads from.
func slotKeys(m *v1alpha1.VirtualMachineMigration) reservation {
	if m.Status.Source == nil {
		return reservation{}
	}
	var ds []string
	for _, d := range m.Status.Source.Disks {
		if k := datastoreSlotKey(m.Spec.Source.URL, m.Status.Source, d); k != "" && !slices.Contains(ds, k) {
			ds = append(ds, k)
		}
	}
	return reservation{host: hostSlotKey(m.Spec.Source.URL, m.Status.Source), datastores: ds}
}

// look says whether m may take a transfer slot now, counting the
// migrations the cache shows in a slot-holding phase (holders: those on
// m's host and datastores, from the controller's indexes; others are
// ignored) and the recent reservations. It changes nothing.
func (s *slotReservations) look(m *v1alpha1.VirtualMachineMigration, all []*v1alpha1.VirtualMachineMigration, lim slotLimits, now time.Time) statemachine.SlotObservation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count(m, all, lim, now)
}

// reserve takes the slot for m if it is still free, and reports whether it did.
func (s *slotReservations) reserve(m *v1alpha1.VirtualMachineMigration, all []*v1alpha1.VirtualMachineMigration, lim slotLimits, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.count(m, all, lim, now).Available {
		return false
	}
	r := slotKeys(m)
	r.rv = m.ResourceVersion
	s.held[cache.MetaObjectToName(m)] = r
	return true
}

// count runs with the lock held.
func (s *slotReservations) count(m *v1alpha1.VirtualMachineMigration, all []*v1alpha1.VirtualMachineMigration, lim slotLimits, now time.Time) statemachine.SlotObservation {
	if lim.perHost <= 0 && lim.perDatastore <= 0 {
		return statemachine.SlotObservation{Available: true, Message: "no transfer limits"}
	}
	self := cache.MetaObjectToName(m)
	holders := map[cache.ObjectName]reservation{}
	for key, r := range s.held {
		if !caughtUp(s.cached, key, r.rv, holdsSlotNow) {
			holders[key] = r
		}
	}
	first := 0
	for _, other := range all {
		switch {
		case holdsSlotNow(other):
			holders[cache.MetaObjectToName(other)] = slotKeys(other)
		case goesFirst(other, m):
			holders[cache.MetaObjectToName(other)] = slotKeys(other)
			first++
		}
	}
	delete(holders, self)
	mine := slotKeys(m)
	hostCount, dsCount := 0, map[string]int{}
	for _, r := range holders {
		if r.host == mine.host {
			hostCount++
		}
		for _, d := range r.datastores {
			dsCount[d]++
		}
	}
	verdict := slotVerdict(mine, hostCount, dsCount, lim)
	if !verdict.Available && first > 0 {
		verdict.Message += "; migrations that transfer again after a failed conversion, their source off, go first"
	}
	return verdict
}

// goesFirst reports whether other, waiting for a slot, takes it before m:
// a migration that transfers again after a failed conversion (its source
// is off) goes before every migration waiting in Queued (whose source
// still runs), so that a freed slot is its, whoever is woken first.
func goesFirst(other, m *v1alpha1.VirtualMachineMigration) bool {
	return retransferWaits(other) && !statemachine.RetransferPending(&m.Status)
}

// slotVerdict compares the counts with the limits.
func slotVerdict(mine reservation, hostCount int, dsCount map[string]int, lim slotLimits) statemachine.SlotObservation {
	if lim.perHost > 0 && hostCount >= lim.perHost {
		return statemachine.SlotObservation{Message: fmt.Sprintf("%d of %d transfers already run from host %s", hostCount, lim.perHost, mine.host)}
	}
	for _, d := range mine.datastores {
		if lim.perDatastore > 0 && dsCount[d] >= lim.perDatastore {
			return statemachine.SlotObservation{Message: fmt.Sprintf("%d of %d transfers already run from datastore %s", dsCount[d], lim.perDatastore, d)}
		}
	}
	if lim.perHost > 0 {
		return statemachine.SlotObservation{Available: true, Message: fmt.Sprintf("%d of %d transfers run from host %s", hostCount+1, lim.perHost, mine.host)}
	}
	return statemachine.SlotObservation{Available: true, Message: "within the per-datastore transfer limits"}
}

// settle drops the reservation of a migration whose phase no longer holds
// a slot (its transfer is done, it failed, or it is gone), and those the
// cache caught up with.
func (s *slotReservations) settle(key cache.ObjectName, phase v1alpha1.Phase, _ time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, r := range s.held {
		if caughtUp(s.cached, k, r.rv, holdsSlotNow) {
			delete(s.held, k)
		}
	}
	if !holdsSlot(phase) {
		delete(s.held, key)
	}
}
