package controller

import (
	"sync"

	"k8s.io/client-go/tools/cache"
)

// decidedVersions remembers, per migration, the resourceVersions its
// status writes were decided from (a reconcile may write twice: its
// decision, then a failed action's), until the cache shows another one.
// A reconcile that reads the migration at such a version again reads a
// cache that has not yet seen the write: deciding from it would undo what
// the write recorded (for example create again a Job the written status
// says is done with, and that the same decision deleted). It waits for
// the cache instead. A cache only moves forward, so any version not
// superseded by a write is the last write or one after it. Kept in
// memory: a restarted controller lists afresh.
type decidedVersions struct {
	mu   sync.Mutex
	from map[cache.ObjectName]map[string]bool
}

// newDecidedVersions returns an empty record.
func newDecidedVersions() *decidedVersions {
	return &decidedVersions{from: map[cache.ObjectName]map[string]bool{}}
}

// wrote records a status write that took the migration from version from
// to version to; a write that changed nothing (same version) is not one.
func (d *decidedVersions) wrote(key cache.ObjectName, from, to string) {
	if from == "" || from == to {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.from[key] == nil {
		d.from[key] = map[string]bool{}
	}
	d.from[key][from] = true
}

// stale reports whether the cached version of the migration is one a
// write was decided from; once the cache shows another, the record goes.
func (d *decidedVersions) stale(key cache.ObjectName, cached string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	from, ok := d.from[key]
	if !ok {
		return false
	}
	if from[cached] {
		return true
	}
	delete(d.from, key)
	return false
}

// observed is the cache showing the migration at version cached with no
// reconcile to read it: a finished migration's last write. The record
// goes unless a write was decided from that version (then the write's
// own event follows). Without it, the record of every migration that
// ended would stay until the migration is deleted.
func (d *decidedVersions) observed(key cache.ObjectName, cached string) {
	_ = d.stale(key, cached)
}

// forget drops the record of a migration that is gone.
func (d *decidedVersions) forget(key cache.ObjectName) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.from, key)
}
