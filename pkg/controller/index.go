package controller

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"k8s.io/client-go/tools/cache"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/statemachine"
)

// Indexes of the migration cache. They keep a reconcile's work bounded by
// what concerns its migration, not by how many migrations the cluster
// holds: counting the transfer slots of a host, or finding the holder of
// a claim, reads the few migrations an index names instead of listing
// them all (bench-scale: a list per reconcile made each one cost O(N)).
const (
	// indexSlotHost: the migrations holding a transfer slot, by host key.
	indexSlotHost = "slot-host"
	// indexSlotDatastore: the migrations holding a transfer slot, by
	// source datastore.
	indexSlotDatastore = "slot-datastore"
	// indexQueuedHost: the migrations waiting in Queued, by host key.
	indexQueuedHost = "queued-host"
	// indexQueuedDatastore: the migrations waiting in Queued, by source
	// datastore.
	indexQueuedDatastore = "queued-datastore"
	// indexRetransferHost: the migrations waiting to transfer their
	// disks again after a failed conversion, by host key (a few, where
	// Queued may hold thousands: a wave's slot count reads only these).
	indexRetransferHost = "retransfer-host"
	// indexRetransferDatastore: the same, by source datastore.
	indexRetransferDatastore = "retransfer-datastore"
	// indexClaimSource: the migrations holding their claims, by source
	// identity.
	indexClaimSource = "claim-source"
	// indexClaimTarget: the migrations holding their claims, by
	// namespace/target name.
	indexClaimTarget = "claim-target"
	// indexConversionSlot: the migrations holding a conversion slot,
	// under one value (the budget is cluster-wide).
	indexConversionSlot = "conversion-slot"
	// indexConversionWaiting: the migrations waiting in Queued for a
	// conversion slot, under one value.
	indexConversionWaiting = "conversion-waiting"
)

// migrationIndexers are the indexes the controller adds to the migration
// informer.
func migrationIndexers() cache.Indexers {
	return cache.Indexers{
		indexSlotHost:            slotIndex(holdsSlotNow, func(r reservation) []string { return []string{r.host} }),
		indexSlotDatastore:       slotIndex(holdsSlotNow, func(r reservation) []string { return r.datastores }),
		indexQueuedHost:          slotIndex(waitsForSlot, func(r reservation) []string { return []string{r.host} }),
		indexQueuedDatastore:     slotIndex(waitsForSlot, func(r reservation) []string { return r.datastores }),
		indexRetransferHost:      slotIndex(retransferWaits, func(r reservation) []string { return []string{r.host} }),
		indexRetransferDatastore: slotIndex(retransferWaits, func(r reservation) []string { return r.datastores }),
		indexClaimSource:         claimIndex(func(c claim) []string { return c.sources }),
		indexClaimTarget:         claimIndex(func(c claim) []string { return []string{c.target} }),
		indexConversionSlot:      conversionIndex(statemachine.HoldsConversionSlot, conversionSlotHeld),
		indexConversionWaiting:   conversionIndex(waitsForConversion, conversionWaiting),
	}
}

// holdsSlotNow reports whether a cached migration counts against the
// transfer limits.
func holdsSlotNow(m *v1alpha1.VirtualMachineMigration) bool {
	return holdsSlot(m.Status.Phase) && m.DeletionTimestamp == nil
}

// waitsForSlot reports whether a cached migration may be waiting for a
// transfer slot: in Queued, or in Converting to transfer its disks again
// after a failed conversion (retransferWaits).
func waitsForSlot(m *v1alpha1.VirtualMachineMigration) bool {
	return (m.Status.Phase == v1alpha1.PhaseQueued || statemachine.RetransferPending(&m.Status)) && m.DeletionTimestamp == nil
}

// slotIndex indexes the migrations that match by the keys of their slot.
func slotIndex(match func(*v1alpha1.VirtualMachineMigration) bool, keys func(reservation) []string) cache.IndexFunc {
	return func(obj any) ([]string, error) {
		m, ok := obj.(*v1alpha1.VirtualMachineMigration)
		if !ok || !match(m) {
			return nil, nil
		}
		return slices.DeleteFunc(slices.Clone(keys(slotKeys(m))), func(k string) bool { return k == "" }), nil
	}
}

// claimIndex indexes the migrations holding their claims by the keys of
// one of them.
func claimIndex(keys func(claim) []string) cache.IndexFunc {
	return func(obj any) ([]string, error) {
		m, ok := obj.(*v1alpha1.VirtualMachineMigration)
		if !ok || !holdsClaims(m) {
			return nil, nil
		}
		return slices.DeleteFunc(slices.Clone(keys(claimOf(m, &m.Status))), func(k string) bool { return k == "" }), nil
	}
}

// lookup is an index and the values to read from it.
type lookup struct {
	index  string
	values []string
}

// indexed returns the cached migrations under any of the lookups' values,
// each once, in key order.
func (c *Controller) indexed(lookups ...lookup) ([]*v1alpha1.VirtualMachineMigration, error) {
	seen := map[cache.ObjectName]*v1alpha1.VirtualMachineMigration{}
	for _, l := range lookups {
		for _, v := range l.values {
			if v == "" {
				continue
			}
			objs, err := c.migrationIndex.ByIndex(l.index, v)
			if err != nil {
				return nil, fmt.Errorf("reading the migration index %s: %w", l.index, err)
			}
			for _, o := range objs {
				if m, ok := o.(*v1alpha1.VirtualMachineMigration); ok {
					seen[cache.ObjectName{Namespace: m.Namespace, Name: m.Name}] = m
				}
			}
		}
	}
	out := make([]*v1alpha1.VirtualMachineMigration, 0, len(seen))
	for _, m := range seen {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b *v1alpha1.VirtualMachineMigration) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return out, nil
}

// slotHolders are the cached migrations that hold a slot on m's host or
// on one of its datastores.
func (c *Controller) slotHolders(m *v1alpha1.VirtualMachineMigration) ([]*v1alpha1.VirtualMachineMigration, error) {
	mine := slotKeys(m)
	return c.indexed(lookup{indexSlotHost, []string{mine.host}}, lookup{indexSlotDatastore, mine.datastores})
}

// slotCounted are the cached migrations that count against m's limits:
// the slot holders of its host and datastores and, unless m itself
// transfers again after a failed conversion, the migrations waiting there
// to do so, which go first (goesFirst).
func (c *Controller) slotCounted(m *v1alpha1.VirtualMachineMigration) ([]*v1alpha1.VirtualMachineMigration, error) {
	holders, err := c.slotHolders(m)
	if err != nil || statemachine.RetransferPending(&m.Status) {
		return holders, err
	}
	mine := slotKeys(m)
	waiting, err := c.indexed(lookup{indexRetransferHost, []string{mine.host}}, lookup{indexRetransferDatastore, mine.datastores})
	if err != nil {
		return nil, err
	}
	return append(holders, waiting...), nil
}

// claimHolders are the cached migrations that hold the source or the
// target want names.
func (c *Controller) claimHolders(want claim) ([]*v1alpha1.VirtualMachineMigration, error) {
	return c.indexed(lookup{indexClaimSource, want.sources}, lookup{indexClaimTarget, []string{want.target}})
}
