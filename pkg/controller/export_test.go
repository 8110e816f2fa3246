package controller

import (
	"context"
	"time"

	"k8s.io/client-go/tools/cache"
)

// SyncForTest runs one reconcile of key, for the tests of package
// controller_test: they use the real pipeline step, which imports this
// package, and so cannot live in package controller.
func SyncForTest(ctx context.Context, c *Controller, key cache.ObjectName) (time.Duration, error) {
	return c.sync(ctx, key)
}
