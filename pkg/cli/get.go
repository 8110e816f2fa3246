package cli

import (
	"context"
	"fmt"
	"sort"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// getOptions are the flags of list and get.
type getOptions struct {
	*env
	print         *genericclioptions.PrintFlags
	allNamespaces bool
	watch         bool
	noHeaders     bool
	selector      string
	summary       bool
}

func newGetOptions(e *env) *getOptions {
	return &getOptions{env: e, print: genericclioptions.NewPrintFlags("").WithTypeSetter(scheme)}
}

func (o *getOptions) addFlags(cmd *cobra.Command, allowAll bool) {
	o.print.AddFlags(cmd)
	cmd.Flags().Lookup("output").Usage = "Output format: wide, yaml, json, name, jsonpath=..., go-template=... (default: a table, or the progress view of one migration)."
	cmd.Flags().BoolVarP(&o.watch, "watch", "w", false, "After printing, watch for changes: redrawn in place on a terminal, one line per change otherwise.")
	cmd.Flags().BoolVar(&o.noHeaders, "no-headers", false, "Leave the table's header out.")
	if allowAll {
		cmd.Flags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "List migrations in every namespace.")
		cmd.Flags().StringVarP(&o.selector, "selector", "l", "", "Label selector to filter on, as kubectl get takes it.")
		cmd.Flags().BoolVar(&o.summary, "summary", false, "Instead of a row per migration, a line per phase: how many are in it and why (what they wait on, why they failed); for a wave. Reads the migrations in pages of 500.")
	}
}

func newListCommand(e *env) *cobra.Command {
	o := newGetOptions(e)
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List migrations: phase, progress, source, target and what each waits for",
		Example: `  kubectl vmm list
  kubectl vmm list -A -o wide
  kubectl vmm list --watch
  kubectl vmm list -A --summary`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context(), "") },
	}
	o.addFlags(cmd, true)
	return cmd
}

func newGetCommand(e *env) *cobra.Command {
	o := newGetOptions(e)
	cmd := &cobra.Command{
		Use:   "get [NAME]",
		Short: "Show a migration's phase, per-disk progress (rate, ETA) and what it waits for; without NAME, list",
		Example: `  kubectl vmm get web-01
  kubectl vmm get web-01 --watch
  kubectl vmm get web-01 -o yaml
  kubectl vmm get -A --summary`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			return o.run(cmd.Context(), name)
		},
	}
	o.addFlags(cmd, true)
	return cmd
}

// output is the chosen output format; "" is the human view.
func (o *getOptions) output() string { return *o.print.OutputFormat }

func (o *getOptions) human() bool { return o.output() == "" || o.output() == "wide" }

func (o *getOptions) run(ctx context.Context, name string) error {
	if name != "" && o.allNamespaces {
		return fmt.Errorf("a migration name and --all-namespaces cannot go together")
	}
	if o.summary {
		if err := o.checkSummaryFlags(name); err != nil {
			return err
		}
	}
	clients, err := o.factory.Clients()
	if err != nil {
		return err
	}
	ns, err := o.namespace()
	if err != nil {
		return err
	}
	if o.allNamespaces {
		ns = metav1.NamespaceAll
	}
	if o.summary {
		s, err := o.summarize(ctx, clients, ns)
		if err != nil {
			return err
		}
		return s.print(o.view())
	}
	list, err := o.list(ctx, clients, ns, name)
	if err != nil {
		return err
	}
	if o.watch {
		return o.watchLoop(ctx, clients, ns, name, list)
	}
	return o.printOnce(list, name)
}

// list reads the migrations to show, sorted by namespace and name. One
// named migration is read with a get (all a user may be allowed), unless
// it is to be watched.
func (o *getOptions) list(ctx context.Context, clients Clients, ns, name string) (*v1alpha1.VirtualMachineMigrationList, error) {
	if name != "" && !o.watch {
		m, err := clients.Migration.MigrationV1alpha1().VirtualMachineMigrations(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, notFound(err, name, ns)
		}
		return &v1alpha1.VirtualMachineMigrationList{Items: []v1alpha1.VirtualMachineMigration{*m}}, nil
	}
	opts := metav1.ListOptions{LabelSelector: o.selector}
	if name != "" {
		opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	}
	list, err := clients.Migration.MigrationV1alpha1().VirtualMachineMigrations(ns).List(ctx, opts)
	if unserved(err) {
		return nil, errUnserved
	}
	if err != nil {
		return nil, fmt.Errorf("listing migrations: %w", err)
	}
	if name != "" {
		list.Items = keepNamed(list.Items, name)
	}
	sortMigrations(list.Items)
	return list, nil
}

// sortMigrations orders migrations by namespace, then name.
func sortMigrations(items []v1alpha1.VirtualMachineMigration) {
	sort.Slice(items, func(i, j int) bool {
		a, b := items[i], items[j]
		return a.Namespace < b.Namespace || (a.Namespace == b.Namespace && a.Name < b.Name)
	})
}

func keepNamed(items []v1alpha1.VirtualMachineMigration, name string) []v1alpha1.VirtualMachineMigration {
	var out []v1alpha1.VirtualMachineMigration
	for _, m := range items {
		if m.Name == name {
			out = append(out, m)
		}
	}
	return out
}

// printOnce prints the migrations in the chosen format.
func (o *getOptions) printOnce(list *v1alpha1.VirtualMachineMigrationList, name string) error {
	out := o.streams.Out
	now := o.factory.Now()
	switch {
	case name != "" && o.output() == "":
		return printProgress(o.view(), &list.Items[0], now)
	case o.human():
		if len(list.Items) == 0 {
			fmt.Fprintln(o.streams.ErrOut, "No migrations found.")
			return nil
		}
		return printTable(o.view(), list.Items, o.tableOptions(), now)
	}
	p, err := o.print.ToPrinter()
	if err != nil {
		return err
	}
	if name != "" {
		return p.PrintObj(&list.Items[0], out)
	}
	if o.output() != "name" {
		return p.PrintObj(list, out)
	}
	for i := range list.Items {
		if err := p.PrintObj(&list.Items[i], out); err != nil {
			return err
		}
	}
	return nil
}

func (o *getOptions) tableOptions() tableOptions {
	return tableOptions{wide: o.output() == "wide", withNamespace: o.allNamespaces, noHeaders: o.noHeaders}
}

// printer returns the printer of a non-human format.
func (o *getOptions) printer() (printers.ResourcePrinter, error) { return o.print.ToPrinter() }
