package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// Watch timing: a terminal view is redrawn at least this often so that
// ages and durations stay current; a closed watch is opened again after
// relistDelay.
const (
	redrawInterval = time.Second
	relistDelay    = time.Second
)

// clearScreen moves the cursor home and clears the screen, as watch(1) does.
const clearScreen = "\x1b[H\x1b[2J"

// watchState is what a watch shows: the migrations by namespace/name.
type watchState struct {
	items map[string]v1alpha1.VirtualMachineMigration
	// lines remembers the last line printed per migration on a
	// non-terminal output, so that only changes are printed.
	lines         map[string]string
	headerPrinted bool
}

func newWatchState(list *v1alpha1.VirtualMachineMigrationList) *watchState {
	s := &watchState{items: map[string]v1alpha1.VirtualMachineMigration{}, lines: map[string]string{}}
	s.reset(list)
	return s
}

func (s *watchState) reset(list *v1alpha1.VirtualMachineMigrationList) {
	clear(s.items)
	for _, m := range list.Items {
		s.items[m.Namespace+"/"+m.Name] = m
	}
}

// sorted returns the migrations as a list in namespace/name order.
func (s *watchState) sorted() *v1alpha1.VirtualMachineMigrationList {
	list := &v1alpha1.VirtualMachineMigrationList{}
	for _, m := range s.items {
		list.Items = append(list.Items, m)
	}
	sortMigrations(list.Items)
	return list
}

// watchLoop prints, then follows changes until ctx ends (or, for one
// named migration, until it is deleted).
func (o *getOptions) watchLoop(ctx context.Context, clients Clients, ns, name string, list *v1alpha1.VirtualMachineMigrationList) error {
	state := newWatchState(list)
	if err := o.render(state, name, nil); err != nil {
		return err
	}
	for ctx.Err() == nil {
		done, err := o.follow(ctx, clients, ns, name, list.ResourceVersion, state)
		if done || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(relistDelay):
		}
		if list, err = o.list(ctx, clients, ns, name); err != nil {
			return err
		}
		state.reset(list)
	}
	return nil
}

// follow consumes one watch; done is true when nothing is left to follow.
func (o *getOptions) follow(ctx context.Context, clients Clients, ns, name, resourceVersion string, state *watchState) (bool, error) {
	opts := metav1.ListOptions{ResourceVersion: resourceVersion, LabelSelector: o.selector, AllowWatchBookmarks: false}
	if name != "" {
		opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	}
	w, err := clients.Migration.MigrationV1alpha1().VirtualMachineMigrations(ns).Watch(ctx, opts)
	if err != nil {
		return false, fmt.Errorf("watching migrations: %w", err)
	}
	defer w.Stop()
	var tick <-chan time.Time
	if o.output() == "" && o.terminal(o.streams.Out) {
		t := time.NewTicker(redrawInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return true, nil
		case <-tick:
			if err := o.render(state, name, nil); err != nil {
				return true, err
			}
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type == watch.Error {
				return false, nil
			}
			if done, err := o.apply(state, name, ev); done || err != nil {
				return true, err
			}
		}
	}
}

// apply folds one watch event into the state and prints what changed.
func (o *getOptions) apply(state *watchState, name string, ev watch.Event) (bool, error) {
	m, ok := ev.Object.(*v1alpha1.VirtualMachineMigration)
	if !ok || (name != "" && m.Name != name) {
		return false, nil
	}
	key := m.Namespace + "/" + m.Name
	if ev.Type == watch.Deleted {
		delete(state.items, key)
		if name != "" {
			fmt.Fprintf(o.streams.Out, "%s/%s deleted\n", resourceName, m.Name)
			return true, nil
		}
		return false, o.render(state, name, nil)
	}
	state.items[key] = *m
	return false, o.render(state, name, m)
}

// render shows the state: redrawn whole on a terminal; otherwise the
// changed migration only, as a table row, a progress line or an object.
func (o *getOptions) render(state *watchState, name string, changed *v1alpha1.VirtualMachineMigration) error {
	switch {
	case !o.human():
		if changed == nil {
			return o.printAll(state)
		}
		p, err := o.printer()
		if err != nil {
			return err
		}
		return p.PrintObj(changed, o.streams.Out)
	case o.output() == "" && o.terminal(o.streams.Out):
		return o.redraw(state, name)
	}
	return o.printLines(o.view(), state, name, changed)
}

func (o *getOptions) printAll(state *watchState) error {
	p, err := o.printer()
	if err != nil {
		return err
	}
	for _, m := range state.sorted().Items {
		if err := p.PrintObj(&m, o.streams.Out); err != nil {
			return err
		}
	}
	return nil
}

// redraw clears the terminal (the one escape sequence a view writes) and
// draws the whole view again.
func (o *getOptions) redraw(state *watchState, name string) error {
	now := o.factory.Now()
	fmt.Fprint(o.streams.Out, clearScreen)
	out := o.view()
	fmt.Fprintf(out, "kubectl vmm, updated %s (Ctrl-C to stop)\n\n", now.UTC().Format(time.RFC3339))
	list := state.sorted()
	switch {
	case name != "" && len(list.Items) == 1:
		return printProgress(out, &list.Items[0], now)
	case name != "":
		_, err := fmt.Fprintf(out, "waiting for %s %q to exist\n", resourceName, name)
		return err
	}
	return printTable(out, list.Items, o.tableOptions(), now)
}

// printLines prints one line per migration whose line changed: a progress
// line for one named migration, a table row otherwise.
func (o *getOptions) printLines(out io.Writer, state *watchState, name string, changed *v1alpha1.VirtualMachineMigration) error {
	now := o.factory.Now()
	items := state.sorted().Items
	if changed != nil {
		items = []v1alpha1.VirtualMachineMigration{*changed}
	}
	for i := range items {
		m := &items[i]
		key := m.Namespace + "/" + m.Name
		if name != "" {
			line := progressLine(m)
			if state.lines[key] != line {
				state.lines[key] = line
				fmt.Fprintf(out, "%s %s\n", now.UTC().Format(time.RFC3339), line)
			}
			continue
		}
		if err := o.printRow(out, state, m, now); err != nil {
			return err
		}
	}
	return nil
}

// printRow prints a migration's table row when it changed, with the header
// before the first row.
func (o *getOptions) printRow(out io.Writer, state *watchState, m *v1alpha1.VirtualMachineMigration, now time.Time) error {
	opts := o.tableOptions()
	key := m.Namespace + "/" + m.Name
	row := fmt.Sprint(tableRow(m, opts, now))
	if state.lines[key] == row {
		return nil
	}
	state.lines[key] = row
	opts.noHeaders = opts.noHeaders || state.headerPrinted
	state.headerPrinted = true
	return printTable(out, []v1alpha1.VirtualMachineMigration{*m}, opts, now)
}
