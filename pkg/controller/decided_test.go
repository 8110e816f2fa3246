package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/client-go/tools/cache"
)

func TestDecidedVersions(t *testing.T) {
	key := cache.ObjectName{Namespace: "apps", Name: "web-01"}
	d := newDecidedVersions()
	assert.False(t, d.stale(key, "10"), "nothing written: the cache is as good as any")

	d.wrote(key, "10", "10")
	assert.False(t, d.stale(key, "10"), "a write that changed nothing is not waited for")

	d.wrote(key, "10", "11")
	d.wrote(key, "11", "12") // a failed action's status, written after the decision's
	assert.True(t, d.stale(key, "10"), "the version the decision was made from")
	assert.True(t, d.stale(key, "11"), "the decision's write, superseded by the failed action's")
	assert.False(t, d.stale(key, "12"), "the last write: caught up")
	assert.False(t, d.stale(key, "10"), "once caught up the record is gone")

	d.wrote(key, "12", "13")
	assert.False(t, d.stale(key, "14"), "a version after the write (someone else's)")
	d.wrote(key, "14", "15")
	d.forget(key)
	assert.False(t, d.stale(key, "14"), "forgotten with the migration")
}
