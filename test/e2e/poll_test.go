//go:build e2e

package e2e

import (
	"time"

	"github.com/stretchr/testify/require"
)

// eventually polls cond every 250ms until it holds, and fails the test
// once timeout passed, with what and left(): what the last poll saw.
// Every assertion on something the controller or the cluster reports
// asynchronously (metrics, events, watches, objects the garbage collector
// removes, a process coming up) polls through it, or through a wait of
// the same kind, instead of reading once: a loaded machine delays what a
// fast one shows at once.
func (s *stack) eventually(timeout time.Duration, what string, cond func() bool, left func() string) {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			require.FailNow(s.t, what+": not within "+timeout.String(), left())
		}
		time.Sleep(250 * time.Millisecond)
	}
}
