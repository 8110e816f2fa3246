package apply

import (
	"context"
	"fmt"
	"time"
)

// Step is one step of an installation: what it does, said in the log and
// in its error, and the doing.
type Step struct {
	What string
	Do   func(context.Context) error
}

// Install runs steps in order, each timed in the applier's log, and stops
// at the first that fails, its error wrapped as "installing <component>:
// <what>: ...".
func (a *Applier) Install(ctx context.Context, component string, steps []Step) error {
	start := time.Now()
	for _, s := range steps {
		t := time.Now()
		if err := s.Do(ctx); err != nil {
			return fmt.Errorf("installing %s: %s: %w", component, s.What, err)
		}
		a.logf("%s in %s", s.What, time.Since(t).Round(time.Millisecond))
	}
	a.logf("%s installed in %s", component, time.Since(start).Round(time.Millisecond))
	return nil
}
