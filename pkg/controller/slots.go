package controller

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
)

// reservationTTL bounds how long an admitted migration counts against the
// limits before the informer cache shows it in a slot-holding phase.
const reservationTTL = time.Minute

// slotReservations remembers migrations admitted to a transfer slot whose
// new phase the informer cache may not show yet, so that two workers
// deciding at the same instant cannot both take the last slot.
type slotReservations struct {
	mu   sync.Mutex
	held map[cache.ObjectName]reservation
}

type reservation struct {
	host       string
	datastores []string
	at         time.Time
}

func newSlotReservations() *slotReservations {
	return &slotReservations{held: map[cache.ObjectName]reservation{}}
}

// holdsSlot reports whether a migration in this phase counts against the
// transfer limits: from the moment the source is being stopped until its
// disks are transferred.
func holdsSlot(p v1alpha1.Phase) bool {
	return p == v1alpha1.PhaseStoppingSource || p == v1alpha1.PhaseTransferringDisks
}

func slotKeys(m *v1alpha1.VirtualMachineMigration) (string, []string) {
	if m.Status.Source == nil {
		return "", nil
	}
	var ds []string
	for _, d := range m.Status.Source.Disks {
		if d.Datastore != "" && !slices.Contains(ds, d.Datastore) {
			ds = append(ds, d.Datastore)
		}
	}
	host := m.Status.Source.HostMoRef
	if host == "" {
		host = m.Status.Source.Host
	}
	return m.Spec.Source.URL + "/" + host, ds
}

// transferSlot decides whether m may start stopping its source now, counting
// the migrations that hold a slot from the informer cache plus recent
// admissions, and reserves the slot when it is free.
func (c *Controller) transferSlot(m *v1alpha1.VirtualMachineMigration) (statemachine.SlotObservation, error) {
	maxHost, maxDS := c.cfg.MaxTransfersPerHost, c.cfg.MaxTransfersPerDatastore
	if maxHost <= 0 && maxDS <= 0 {
		return statemachine.SlotObservation{Available: true, Message: "no transfer limits"}, nil
	}
	all, err := c.migrations.List(labels.Everything())
	if err != nil {
		return statemachine.SlotObservation{}, fmt.Errorf("listing migrations: %w", err)
	}
	self := cache.MetaObjectToName(m)
	host, datastores := slotKeys(m)

	c.slots.mu.Lock()
	defer c.slots.mu.Unlock()
	now := c.clock.Now()
	holders := map[cache.ObjectName]reservation{}
	for key, r := range c.slots.held {
		if now.Sub(r.at) > reservationTTL {
			delete(c.slots.held, key)
			continue
		}
		holders[key] = r
	}
	for _, other := range all {
		key := cache.MetaObjectToName(other)
		if key == self || !holdsSlot(other.Status.Phase) || other.DeletionTimestamp != nil {
			continue
		}
		h, ds := slotKeys(other)
		holders[key] = reservation{host: h, datastores: ds}
	}
	delete(holders, self)
	hostCount, dsCount := 0, map[string]int{}
	for _, r := range holders {
		if r.host == host {
			hostCount++
		}
		for _, d := range r.datastores {
			dsCount[d]++
		}
	}
	if maxHost > 0 && hostCount >= maxHost {
		return statemachine.SlotObservation{Message: fmt.Sprintf("%d of %d transfers already run from host %s", hostCount, maxHost, host)}, nil
	}
	for _, d := range datastores {
		if maxDS > 0 && dsCount[d] >= maxDS {
			return statemachine.SlotObservation{Message: fmt.Sprintf("%d of %d transfers already run from datastore %s", dsCount[d], maxDS, d)}, nil
		}
	}
	c.slots.held[self] = reservation{host: host, datastores: datastores, at: now}
	msg := "within the per-datastore transfer limits"
	if maxHost > 0 {
		msg = fmt.Sprintf("%d of %d transfers run from host %s", hostCount+1, maxHost, host)
	}
	return statemachine.SlotObservation{Available: true, Message: msg}, nil
}

// settle drops a reservation the decision did not use.
func (s *slotReservations) settle(key cache.ObjectName, phase v1alpha1.Phase) {
	if holdsSlot(phase) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.held, key)
}
