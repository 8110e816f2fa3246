package controller

import (
	"k8s.io/client-go/tools/cache"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// cachedMigration reads a migration from the controller's cache.
type cachedMigration func(key cache.ObjectName) (*v1alpha1.VirtualMachineMigration, bool)

// cachedFrom reads migrations from the migration cache's indexer.
func cachedFrom(indexer cache.Indexer) cachedMigration {
	return func(key cache.ObjectName) (*v1alpha1.VirtualMachineMigration, bool) {
		obj, ok, err := indexer.GetByKey(key.String())
		if err != nil || !ok {
			return nil, false
		}
		m, ok := obj.(*v1alpha1.VirtualMachineMigration)
		return m, ok
	}
}

// caughtUp reports whether the cache no longer needs a reservation taken,
// for the migration of key, from its version rv: the cache shows what was
// reserved (shows), or no longer holds the migration, or holds a later
// version of it (the status written with the reservation, or a change
// that overtook a write that failed). Until then the reservation counts,
// however long the cache lags: a fixed expiry let a second migration take
// a slot or a claim the first held, once the watch fell a minute behind.
func caughtUp(cached cachedMigration, key cache.ObjectName, rv string, shows func(*v1alpha1.VirtualMachineMigration) bool) bool {
	m, ok := cached(key)
	if !ok {
		return true
	}
	return shows(m) || (rv != "" && m.ResourceVersion != rv)
}
