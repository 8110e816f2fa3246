//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/watch"
)

// consumeWatch hands every event of w to handle, in a goroutine of wg,
// until ctx ends; a watch that ends before is a test failure (assert only:
// not the test's goroutine).
func consumeWatch(t *testing.T, ctx context.Context, wg *sync.WaitGroup, w watch.Interface, what string, handle func(watch.Event)) {
	wg.Go(func() {
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					if ctx.Err() == nil {
						assert.Fail(t, fmt.Sprintf("the %s watch ended early", what))
					}
					return
				}
				handle(ev)
			}
		}
	})
}
