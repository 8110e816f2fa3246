package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"
)

// fanoutInformer is the informers of one resource in several namespaces,
// seen as one (see fanOut). Running it runs them all; a handler is
// registered on each of them.
type fanoutInformer struct {
	namespaces []string
	members    map[string]cache.SharedIndexInformer
	indexer    *fanoutIndexer
}

var _ cache.SharedIndexInformer = &fanoutInformer{}

// forEach calls do on every member in namespace order and joins the
// errors, each naming its namespace.
func (f *fanoutInformer) forEach(do func(cache.SharedIndexInformer) error) error {
	var errs []error
	for _, ns := range f.namespaces {
		if err := do(f.members[ns]); err != nil {
			errs = append(errs, fmt.Errorf("informer of namespace %q: %w", ns, err))
		}
	}
	return errors.Join(errs...)
}

// register registers one handler on every member with add; if one
// refuses, those already registered are removed again.
func (f *fanoutInformer) register(add func(cache.SharedIndexInformer) (cache.ResourceEventHandlerRegistration, error)) (cache.ResourceEventHandlerRegistration, error) {
	regs := &fanoutRegistration{namespaces: f.namespaces, members: map[string]cache.ResourceEventHandlerRegistration{}}
	for _, ns := range f.namespaces {
		reg, err := add(f.members[ns])
		if err != nil {
			_ = f.RemoveEventHandler(regs)
			return nil, fmt.Errorf("registering a handler on the informer of namespace %q: %w", ns, err)
		}
		regs.members[ns] = reg
	}
	return regs, nil
}

// AddEventHandler registers handler on every namespace's informer.
func (f *fanoutInformer) AddEventHandler(handler cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return f.register(func(m cache.SharedIndexInformer) (cache.ResourceEventHandlerRegistration, error) {
		return m.AddEventHandler(handler)
	})
}

// AddEventHandlerWithResyncPeriod registers handler on every namespace's
// informer with that resync period.
func (f *fanoutInformer) AddEventHandlerWithResyncPeriod(handler cache.ResourceEventHandler, resync time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return f.register(func(m cache.SharedIndexInformer) (cache.ResourceEventHandlerRegistration, error) {
		return m.AddEventHandlerWithResyncPeriod(handler, resync)
	})
}

// AddEventHandlerWithOptions registers handler on every namespace's
// informer with those options.
func (f *fanoutInformer) AddEventHandlerWithOptions(handler cache.ResourceEventHandler, options cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	return f.register(func(m cache.SharedIndexInformer) (cache.ResourceEventHandlerRegistration, error) {
		return m.AddEventHandlerWithOptions(handler, options)
	})
}

// RemoveEventHandler removes a handler registered through f from every
// member.
func (f *fanoutInformer) RemoveEventHandler(handle cache.ResourceEventHandlerRegistration) error {
	regs, ok := handle.(*fanoutRegistration)
	if !ok {
		return fmt.Errorf("removing an event handler: %T was not registered on the informers of several namespaces", handle)
	}
	var errs []error
	for ns, reg := range regs.members {
		if err := f.members[ns].RemoveEventHandler(reg); err != nil {
			errs = append(errs, fmt.Errorf("informer of namespace %q: %w", ns, err))
		}
	}
	return errors.Join(errs...)
}

// GetStore returns the joined, read-only cache.
func (f *fanoutInformer) GetStore() cache.Store { return f.indexer }

// GetIndexer returns the joined, read-only cache.
func (f *fanoutInformer) GetIndexer() cache.Indexer { return f.indexer }

// AddIndexers adds the indexers to every member.
func (f *fanoutInformer) AddIndexers(indexers cache.Indexers) error {
	return f.forEach(func(m cache.SharedIndexInformer) error { return m.AddIndexers(indexers) })
}

// GetController is deprecated in client-go and does nothing useful, as
// there.
func (f *fanoutInformer) GetController() cache.Controller { return inertController{f} }

// Run runs every member until stopCh is closed.
func (f *fanoutInformer) Run(stopCh <-chan struct{}) {
	var wg sync.WaitGroup
	for _, m := range f.members {
		wg.Go(func() { m.Run(stopCh) })
	}
	wg.Wait()
}

// RunWithContext runs every member until ctx ends.
func (f *fanoutInformer) RunWithContext(ctx context.Context) {
	var wg sync.WaitGroup
	for _, m := range f.members {
		wg.Go(func() { m.RunWithContext(ctx) })
	}
	wg.Wait()
}

// HasSynced reports whether every member has synced.
func (f *fanoutInformer) HasSynced() bool {
	for _, m := range f.members {
		if !m.HasSynced() {
			return false
		}
	}
	return true
}

// HasSyncedChecker is done once every member's is.
func (f *fanoutInformer) HasSyncedChecker() cache.DoneChecker {
	checkers := make([]cache.DoneChecker, 0, len(f.namespaces))
	for _, ns := range f.namespaces {
		checkers = append(checkers, f.members[ns].HasSyncedChecker())
	}
	return newAllDone(checkers)
}

// LastSyncResourceVersion is empty: no one version describes several
// watches.
func (f *fanoutInformer) LastSyncResourceVersion() string { return "" }

// SetWatchErrorHandler sets handler on every member.
func (f *fanoutInformer) SetWatchErrorHandler(handler cache.WatchErrorHandler) error {
	return f.forEach(func(m cache.SharedIndexInformer) error { return m.SetWatchErrorHandler(handler) })
}

// SetWatchErrorHandlerWithContext sets handler on every member.
func (f *fanoutInformer) SetWatchErrorHandlerWithContext(handler cache.WatchErrorHandlerWithContext) error {
	return f.forEach(func(m cache.SharedIndexInformer) error { return m.SetWatchErrorHandlerWithContext(handler) })
}

// SetTransform sets handler on every member.
func (f *fanoutInformer) SetTransform(handler cache.TransformFunc) error {
	return f.forEach(func(m cache.SharedIndexInformer) error { return m.SetTransform(handler) })
}

// IsStopped reports whether every member has stopped.
func (f *fanoutInformer) IsStopped() bool {
	for _, m := range f.members {
		if !m.IsStopped() {
			return false
		}
	}
	return true
}

// fanoutRegistration is one handler's registrations on every member.
type fanoutRegistration struct {
	namespaces []string
	members    map[string]cache.ResourceEventHandlerRegistration
}

// HasSynced reports whether the handler has seen every member's initial
// list.
func (r *fanoutRegistration) HasSynced() bool {
	for _, reg := range r.members {
		if !reg.HasSynced() {
			return false
		}
	}
	return true
}

// HasSyncedChecker is done once every registration's is.
func (r *fanoutRegistration) HasSyncedChecker() cache.DoneChecker {
	checkers := make([]cache.DoneChecker, 0, len(r.namespaces))
	for _, ns := range r.namespaces {
		checkers = append(checkers, r.members[ns].HasSyncedChecker())
	}
	return newAllDone(checkers)
}

// allDone is done once all of its checkers are.
type allDone struct {
	checkers []cache.DoneChecker
	once     sync.Once
	done     chan struct{}
}

func newAllDone(checkers []cache.DoneChecker) *allDone {
	return &allDone{checkers: checkers, done: make(chan struct{})}
}

// Name names every checker.
func (a *allDone) Name() string {
	names := make([]string, 0, len(a.checkers))
	for _, c := range a.checkers {
		names = append(names, c.Name())
	}
	return "all of [" + strings.Join(names, ", ") + "]"
}

// Done is closed once every checker is done. The first call starts one
// goroutine that waits for them; it ends when they are done.
func (a *allDone) Done() <-chan struct{} {
	a.once.Do(func() {
		go func() {
			for _, c := range a.checkers {
				<-c.Done()
			}
			close(a.done)
		}()
	})
	return a.done
}

// inertController is what GetController returns: the informer's own
// state, and Run methods that do nothing (client-go's informers return
// the same kind of stand-in).
type inertController struct{ f *fanoutInformer }

// Run does nothing: run the informer instead.
func (inertController) Run(<-chan struct{}) {}

// RunWithContext does nothing: run the informer instead.
func (inertController) RunWithContext(context.Context) {}

// HasSynced reports whether the informer has synced.
func (c inertController) HasSynced() bool { return c.f.HasSynced() }

// HasSyncedChecker is the informer's.
func (c inertController) HasSyncedChecker() cache.DoneChecker { return c.f.HasSyncedChecker() }

// LastSyncResourceVersion is the informer's.
func (c inertController) LastSyncResourceVersion() string { return c.f.LastSyncResourceVersion() }
