package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

func newDescribeCommand(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "describe NAME",
		Short: "Tell a migration's story: checkpoints with evidence, each disk's evidence chain, conditions, last error, events, and what it waits for",
		Args:  exactlyOneName,
		RunE:  func(cmd *cobra.Command, args []string) error { return e.describe(cmd.Context(), args[0]) },
	}
}

func (e *env) describe(ctx context.Context, name string) error {
	clients, ns, err := e.clientsAndNamespace()
	if err != nil {
		return err
	}
	m, err := clients.Migration.MigrationV1alpha1().VirtualMachineMigrations(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return notFound(err, name, ns)
	}
	events, err := migrationEvents(ctx, clients, m)
	if err != nil {
		// Events help but are not the point: say so and go on.
		fmt.Fprintf(e.streams.ErrOut, "warning: events not shown: %s\n", clean(err.Error()))
	}
	return printDescribe(e.view(), m, events, e.factory.Now())
}

// migrationEvents lists the events about this migration (by UID).
func migrationEvents(ctx context.Context, clients Clients, m *v1alpha1.VirtualMachineMigration) ([]corev1.Event, error) {
	sel := fields.Set{"involvedObject.name": m.Name, "involvedObject.uid": string(m.UID)}.AsSelector().String()
	list, err := clients.Kube.CoreV1().Events(m.Namespace).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("listing events: %w", err)
	}
	var out []corev1.Event
	for _, ev := range list.Items {
		if ev.InvolvedObject.UID == m.UID {
			out = append(out, ev)
		}
	}
	return out, nil
}

// planOptions are the flags of plan.
type planOptions struct {
	*env
	output string
	domain bool
}

func newPlanCommand(e *env) *cobra.Command {
	o := &planOptions{env: e}
	cmd := &cobra.Command{
		Use:   "plan NAME",
		Short: "Show what a migration will create (the plan stored for spec.planOnly), as a summary or YAML",
		Example: `  kubectl vmm create web-01 ... --plan-only && kubectl vmm plan web-01
  kubectl vmm plan web-01 -o yaml
  kubectl vmm plan web-01 --domain`,
		Args: exactlyOneName,
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd.Context(), args[0]) },
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "yaml (the objects as stored) or json (a v1 List); default: a summary")
	cmd.Flags().BoolVar(&o.domain, "domain", false, "print the conversion's libvirt domain XML")
	return cmd
}

func (o *planOptions) run(ctx context.Context, name string) error {
	if o.output != "" && o.output != "yaml" && o.output != "json" {
		return fmt.Errorf("--output must be yaml or json, got %q", o.output)
	}
	clients, ns, err := o.clientsAndNamespace()
	if err != nil {
		return err
	}
	m, err := clients.Migration.MigrationV1alpha1().VirtualMachineMigrations(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return notFound(err, name, ns)
	}
	if m.Status.Plan == nil {
		switch {
		case o.domain:
			// No stored plan, but the domain the conversion renders.
			return o.printConversionDomain(ctx, clients, m)
		case m.Status.DryRun != nil && o.output == "":
			// No stored plan, but the API server's answer to the dry run
			// of every object the migration creates.
			return printDryRun(o.view(), m)
		}
		return noPlan(m)
	}
	if m.Status.Plan.ConfigMapName == "" {
		return o.printCarriedOut(ctx, clients, m)
	}
	cm, err := clients.Kube.CoreV1().ConfigMaps(ns).Get(ctx, m.Status.Plan.ConfigMapName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || (err == nil && cm.Labels[v1alpha1.LabelMigrationUID] != string(m.UID)) {
		if !m.Spec.PlanOnly && phaseOf(m) != v1alpha1.PhasePlanned {
			// The plan ran; its ConfigMap went with the staging objects.
			return o.printCarriedOut(ctx, clients, m)
		}
		return fmt.Errorf("the plan ConfigMap %s named in status.plan is missing or not this migration's: the controller renders it again while spec.planOnly is true", m.Status.Plan.ConfigMapName)
	}
	if err != nil {
		return fmt.Errorf("reading the plan ConfigMap %s: %w", m.Status.Plan.ConfigMapName, err)
	}
	return o.print(m, cm, func(objects []*unstructured.Unstructured) string {
		return o.downtimeEstimate(ctx, clients, m, objects)
	})
}

// downtimeEstimate is the summary's estimate of m's outage, from the
// namespace's finished migrations and the plan's objects (its claims'
// volume modes); "" once the source was stopped (the outage is then
// measured: describe shows it) and for the other outputs.
func (o *planOptions) downtimeEstimate(ctx context.Context, clients Clients, m *v1alpha1.VirtualMachineMigration, objects []*unstructured.Unstructured) string {
	if o.output != "" || o.domain || pastTheStop(m) {
		return ""
	}
	list, err := clients.Migration.MigrationV1alpha1().VirtualMachineMigrations(m.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Sprintf("none: listing the migrations of namespace %s to measure from: %v", m.Namespace, err)
	}
	return downtimeEstimate(m, list.Items, blockClaims(objects))
}

// print prints the plan cm holds as the options ask; estimate gives the
// summary's downtime estimate from the plan's objects.
func (o *planOptions) print(m *v1alpha1.VirtualMachineMigration, cm *corev1.ConfigMap, estimate func([]*unstructured.Unstructured) string) error {
	objectsYAML, domainXML := cm.Data[v1alpha1.PlanKeyObjects], cm.Data[v1alpha1.PlanKeyDomain]
	switch {
	case o.domain:
		if domainXML == "" && m.SpecInForce().Conversion.Skip {
			return fmt.Errorf("the plan holds no %s: the conversion is skipped (spec.conversion.skip), so no domain is rendered", v1alpha1.PlanKeyDomain)
		}
		if domainXML == "" {
			return fmt.Errorf("the plan ConfigMap %s holds no %s", cm.Name, v1alpha1.PlanKeyDomain)
		}
		return printPlanYAML(o.streams.Out, domainXML)
	case o.output == "yaml":
		return printPlanYAML(o.streams.Out, objectsYAML)
	}
	objects, err := parsePlanObjects(objectsYAML)
	if err != nil {
		return fmt.Errorf("the plan ConfigMap %s: %w", cm.Name, err)
	}
	if o.output == "json" {
		return printPlanJSON(o.streams.Out, objects)
	}
	return printPlanSummary(o.view(), m, objects, domainXML, estimate(objects))
}

// printCarriedOut answers for a plan that was run: its ConfigMap was
// deleted with the staging objects, and status.plan keeps the list of
// the objects it planned, which the summary shows. The domain is the
// conversion's, while its ConfigMap is kept; the objects' YAML went with
// the plan, and the error says where the run's own objects are.
func (o *planOptions) printCarriedOut(ctx context.Context, clients Clients, m *v1alpha1.VirtualMachineMigration) error {
	switch {
	case o.domain:
		return o.printConversionDomain(ctx, clients, m)
	case o.output != "":
		return fmt.Errorf("%s, its objects' YAML with it: kubectl vmm plan %s -n %s lists them; the objects the run created: %s%s",
			carriedOut(m), m.Name, m.Namespace, childrenCommand(m), retainHint(m, "its plan"))
	}
	return printPlanRecord(o.view(), m)
}

// noPlan says why there is no plan and how to get one, as far as it can
// still apply: before the stop a plan can be asked for; after it, or once
// the migration ended, the run's own objects and story are what is left.
func noPlan(m *v1alpha1.VirtualMachineMigration) error {
	switch {
	case m.Spec.PlanOnly && !isTerminal(m):
		return fmt.Errorf("%s %q has no plan yet (phase %s): the controller stores it once validation and preflight pass; follow with kubectl vmm get %s -n %s --watch",
			resourceName, m.Name, phaseOf(m), m.Name, m.Namespace)
	case pastTheStop(m):
		return fmt.Errorf("%s %q has no plan: spec.planOnly was not set before its source was stopped, and no plan is made after; what it did: kubectl vmm describe %s -n %s; the objects it created: %s",
			resourceName, m.Name, m.Name, m.Namespace, childrenCommand(m))
	case isTerminal(m):
		dryRun := ""
		if m.Status.DryRun != nil {
			dryRun = fmt.Sprintf("kubectl vmm plan %s -n %s shows the API server's answer to the dry run of each object it would create, and ", m.Name, m.Namespace)
		}
		return fmt.Errorf("%s %q has no plan: it ended (phase %s) without one; %sa migration created with kubectl vmm create ... --plan-only stores its plan first",
			resourceName, m.Name, phaseOf(m), dryRun)
	}
	return fmt.Errorf("%s %q has no plan: ask for one with kubectl vmm create %s --plan-only ..., or kubectl patch vmm %s -n %s --type merge -p '{\"spec\":{\"planOnly\":true}}' before the source is stopped",
		resourceName, m.Name, m.Name, m.Name, m.Namespace)
}
