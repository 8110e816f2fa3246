package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/yaml"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/steps/pipeline"
)

// parsePlanObjects reads the plan's multi-document YAML, in order; empty
// documents are skipped.
func parsePlanObjects(objectsYAML string) ([]*unstructured.Unstructured, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(objectsYAML)))
	var out []*unstructured.Unstructured
	for doc := 1; ; doc++ {
		data, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading document %d of %s: %w", doc, v1alpha1.PlanKeyObjects, err)
		}
		if len(bytes.TrimSpace(data)) == 0 || string(bytes.TrimSpace(data)) == "---" {
			continue
		}
		obj := &unstructured.Unstructured{}
		jsonData, err := yaml.YAMLToJSON(data)
		if err == nil {
			err = obj.UnmarshalJSON(jsonData)
		}
		if err != nil {
			return nil, fmt.Errorf("reading document %d of %s: %w", doc, v1alpha1.PlanKeyObjects, err)
		}
		out = append(out, obj)
	}
}

// printPlanSummary writes what the migration would create, one line per
// object with what matters about it, then the conversion's domain and,
// before the stop, the estimate of its outage.
func printPlanSummary(w io.Writer, m *v1alpha1.VirtualMachineMigration, objects []*unstructured.Unstructured, domainXML, estimate string) error {
	p := m.Status.Plan
	fmt.Fprintf(w, "Plan of %s/%s, rendered %s and stored in ConfigMap %s.\n", m.Namespace, m.Name, timestamp(p.RenderedAt), clean(p.ConfigMapName))
	switch {
	case pastTheStop(m) && isTerminal(m):
		fmt.Fprintf(w, "The migration ran this plan and ended %s: these %s, in creation order:\n\n", phaseOf(m), pluralize(len(objects), "object"))
	case pastTheStop(m):
		fmt.Fprintf(w, "The migration is carrying out this plan (phase %s): these %s, in creation order:\n\n", phaseOf(m), pluralize(len(objects), "object"))
	default:
		fmt.Fprintf(w, "The source VM was not touched. Running the migration would create these %s, in this order:\n\n", pluralize(len(objects), "object"))
	}
	tw := printers.GetNewTabWriter(w)
	dryRun := m.Status.DryRun != nil
	if dryRun {
		fmt.Fprintln(tw, "  #\tKIND\tNAME\tDRY RUN\tWHAT")
	} else {
		fmt.Fprintln(tw, "  #\tKIND\tNAME\tWHAT")
	}
	for i, o := range objects {
		if dryRun {
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\n", i+1, clean(o.GetKind()), clean(o.GetName()), clean(orDash(dryRunOutcome(m, o.GetKind(), o.GetName()))), clean(planDetail(m, o)))
		} else {
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\n", i+1, clean(o.GetKind()), clean(o.GetName()), clean(planDetail(m, o)))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if dryRun {
		fmt.Fprintf(w, "\nThe API server's answers to the dry run (%s, %s refused): kubectl get vmm %s -n %s -o jsonpath='{.status.dryRun}'\n",
			timestamp(&m.Status.DryRun.CheckedAt), refusedCount(m.Status.DryRun), m.Name, m.Namespace)
	}
	if err := printProofs(w, m); err != nil {
		return err
	}
	if missing := missingFromStatus(p, objects); len(missing) > 0 {
		fmt.Fprintf(w, "\nListed in status.plan but not in %s: %s\n", v1alpha1.PlanKeyObjects, clean(strings.Join(missing, ", ")))
	}
	if domainXML != "" {
		fmt.Fprintf(w, "\nConversion domain (%s, %d bytes): kubectl vmm plan %s -n %s --domain shows it.\n",
			v1alpha1.PlanKeyDomain, len(domainXML), m.Name, m.Namespace)
	}
	if estimate != "" {
		fmt.Fprintf(w, "\nDowntime estimate: %s.\n", estimate)
	}
	fmt.Fprintf(w, "Full objects: kubectl vmm plan %s -n %s -o yaml\n", m.Name, m.Namespace)
	return nil
}

// printConversionDomain prints the libvirt domain the conversion
// rendered (its ConfigMap holds it under the plan's key, domain.xml) when
// there is no stored plan to take it from, or says why there is none.
func (o *planOptions) printConversionDomain(ctx context.Context, clients Clients, m *v1alpha1.VirtualMachineMigration) error {
	what := fmt.Sprintf("%s %q has no plan", resourceName, m.Name)
	if m.Status.Plan != nil {
		what = carriedOut(m)
	}
	c := m.Status.Conversion
	switch {
	case m.SpecInForce().Conversion.Skip:
		return fmt.Errorf("%s %q has no conversion domain: the conversion is skipped (spec.conversion.skip)", resourceName, m.Name)
	case (c == nil || c.ConfigMapName == "") && m.Status.Plan == nil && !pastTheStop(m):
		return noPlan(m)
	case (c == nil || c.ConfigMapName == "") && isTerminal(m):
		return fmt.Errorf("%s; and it ended (phase %s) before its conversion rendered a domain", what, phaseOf(m))
	case c == nil || c.ConfigMapName == "":
		return fmt.Errorf("%s %q has no conversion domain yet: the conversion renders it in Converting (phase %s); kubectl vmm plan %s -n %s --domain shows it then",
			resourceName, m.Name, phaseOf(m), m.Name, m.Namespace)
	}
	cm, err := clients.Kube.CoreV1().ConfigMaps(m.Namespace).Get(ctx, c.ConfigMapName, metav1.GetOptions{})
	switch {
	case err == nil && cm.Labels[v1alpha1.LabelMigrationUID] == string(m.UID) && cm.Data[v1alpha1.PlanKeyDomain] != "":
		return printPlanYAML(o.streams.Out, cm.Data[v1alpha1.PlanKeyDomain])
	case err != nil && !apierrors.IsNotFound(err):
		return fmt.Errorf("reading the conversion ConfigMap %s: %w", c.ConfigMapName, err)
	}
	return fmt.Errorf("%s; the conversion's domain was in ConfigMap %s, %s%s", what, c.ConfigMapName, stagingGone(m), retainHint(m, "it"))
}

// carriedOut says that m's plan was carried out and its ConfigMap is gone.
func carriedOut(m *v1alpha1.VirtualMachineMigration) string {
	return fmt.Sprintf("the plan of %s %q was carried out (phase %s) and its ConfigMap %s", resourceName, m.Name, phaseOf(m), stagingGone(m))
}

// stagingGone says how a staging object of m went: with the cleanup, or
// deleted by someone else where the cleanup keeps them.
func stagingGone(m *v1alpha1.VirtualMachineMigration) string {
	if m.SpecInForce().Policy.CleanupPolicy() == v1alpha1.CleanupPolicyDelete {
		return "deleted with the staging objects (spec.policy.cleanup: Delete)"
	}
	return "deleted, though spec.policy.cleanup: Retain keeps the staging objects"
}

// retainHint is the advice that keeps what, for a migration to come, when
// m's cleanup deleted it; "" when it keeps the staging objects.
func retainHint(m *v1alpha1.VirtualMachineMigration, what string) string {
	if m.SpecInForce().Policy.CleanupPolicy() != v1alpha1.CleanupPolicyDelete {
		return ""
	}
	return fmt.Sprintf("; a migration made with spec.policy.cleanup: Retain keeps %s", what)
}

// childrenCommand is the kubectl command that shows the objects m created
// and still labels as its own.
func childrenCommand(m *v1alpha1.VirtualMachineMigration) string {
	return fmt.Sprintf("kubectl get persistentvolumeclaims,configmaps,jobs,datavolumes,virtualmachines -n %s -l %s=%s -o yaml",
		m.Namespace, v1alpha1.LabelMigrationName, m.Name)
}

// pastTheStop reports whether the controller began to stop m's source: it
// then committed to its spec (status.appliedSpec), and a plan can no
// longer be asked for.
func pastTheStop(m *v1alpha1.VirtualMachineMigration) bool { return m.Status.AppliedSpec != nil }

// printPlanRecord writes what status.plan keeps of a plan that was run
// and whose ConfigMap is gone: when it was rendered and the objects it
// listed, in order.
func printPlanRecord(w io.Writer, m *v1alpha1.VirtualMachineMigration) error {
	p := m.Status.Plan
	fmt.Fprintf(w, "Plan of %s/%s, rendered %s. The migration then ran (phase %s); its cleanup deleted the plan's ConfigMap with the staging objects.\n",
		m.Namespace, m.Name, timestamp(p.RenderedAt), phaseOf(m))
	fmt.Fprintf(w, "status.plan keeps the %s it listed, in creation order:\n\n", pluralize(len(p.Objects), "object"))
	tw := printers.GetNewTabWriter(w)
	fmt.Fprintln(tw, "  #\tKIND\tNAME")
	for i, obj := range p.Objects {
		fmt.Fprintf(tw, "  %d\t%s\t%s\n", i+1, clean(obj.Kind), clean(obj.Name))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\nWhat the run did: kubectl vmm describe %s -n %s\n", m.Name, m.Namespace)
	return err
}

// missingFromStatus lists the objects of status.plan that the ConfigMap
// does not hold, as Kind/name.
func missingFromStatus(p *v1alpha1.PlanStatus, objects []*unstructured.Unstructured) []string {
	have := map[string]bool{}
	for _, o := range objects {
		have[o.GetKind()+"/"+o.GetName()] = true
	}
	var missing []string
	for _, o := range p.Objects {
		if key := o.Kind + "/" + o.Name; !have[key] {
			missing = append(missing, key)
		}
	}
	return missing
}

// planDetail says what matters about one planned object of m.
func planDetail(m *v1alpha1.VirtualMachineMigration, o *unstructured.Unstructured) string {
	switch o.GetKind() {
	case "PersistentVolumeClaim":
		size, _, _ := unstructured.NestedString(o.Object, "spec", "resources", "requests", "storage")
		class, _, _ := unstructured.NestedString(o.Object, "spec", "storageClassName")
		if o.GetLabels()[v1alpha1.LabelComponent] == v1alpha1.ComponentDisk {
			mode, _, _ := unstructured.NestedString(o.Object, "spec", "volumeMode")
			modes, _, _ := unstructured.NestedStringSlice(o.Object, "spec", "accessModes")
			return fmt.Sprintf("the VM's disk (written in place) %s, %s, %s, storage class %s",
				orNone(size), orNone(mode), orNone(strings.Join(modes, ",")), orDefaultClass(class))
		}
		return fmt.Sprintf("staging volume %s, storage class %s", orNone(size), orDefaultClass(class))
	case "ConfigMap":
		return configMapDetail(o)
	case "ServiceAccount":
		return fmt.Sprintf("identity the %s job runs as", orNone(o.GetLabels()[v1alpha1.LabelComponent]))
	case "Role":
		return roleDetail(o)
	case "RoleBinding":
		return roleBindingDetail(o)
	case "Job":
		return jobDetail(o)
	case "DataVolume":
		return dataVolumeDetail(o)
	case "VirtualMachine":
		return vmDetail(m, o)
	}
	return fmt.Sprintf("%s %s", o.GetAPIVersion(), o.GetKind())
}

// configMapDetail names a ConfigMap's keys, or says who fills an empty
// one (the transfer's progress ConfigMap).
func configMapDetail(o *unstructured.Unstructured) string {
	data, _, _ := unstructured.NestedMap(o.Object, "data")
	if len(data) == 0 {
		return fmt.Sprintf("created empty: the %s job writes its progress and result into it", orNone(o.GetLabels()[v1alpha1.LabelComponent]))
	}
	return "keys " + strings.Join(sortedKeys(data), ", ")
}

// roleDetail says what a Role allows: "may get, patch ConfigMap x".
func roleDetail(o *unstructured.Unstructured) string {
	rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
	var allows []string
	for _, r := range rules {
		rule, ok := r.(map[string]any)
		if !ok {
			continue
		}
		verbs, _, _ := unstructured.NestedStringSlice(rule, "verbs")
		resources, _, _ := unstructured.NestedStringSlice(rule, "resources")
		names, _, _ := unstructured.NestedStringSlice(rule, "resourceNames")
		what := strings.Join(resources, ", ")
		if len(names) > 0 {
			what += " " + strings.Join(names, ", ")
		} else {
			what = "all " + what
		}
		allows = append(allows, fmt.Sprintf("may %s %s", strings.Join(verbs, ", "), what))
	}
	if len(allows) == 0 {
		return "allows nothing"
	}
	return strings.Join(allows, "; ")
}

// roleBindingDetail says what a RoleBinding grants to whom.
func roleBindingDetail(o *unstructured.Unstructured) string {
	kind, _, _ := unstructured.NestedString(o.Object, "roleRef", "kind")
	role, _, _ := unstructured.NestedString(o.Object, "roleRef", "name")
	subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
	var to []string
	for _, s := range subjects {
		if subject, ok := s.(map[string]any); ok {
			sk, _, _ := unstructured.NestedString(subject, "kind")
			sn, _, _ := unstructured.NestedString(subject, "name")
			to = append(to, sk+" "+sn)
		}
	}
	return fmt.Sprintf("grants %s %s to %s", orNone(kind), orNone(role), orNone(strings.Join(to, ", ")))
}

func orDefaultClass(class string) string {
	if class == "" {
		return "(cluster default)"
	}
	return class
}

func jobDetail(o *unstructured.Unstructured) string {
	containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	var images []string
	for _, c := range containers {
		if cm, ok := c.(map[string]any); ok {
			image, _ := cm["image"].(string)
			images = append(images, image)
		}
	}
	component := o.GetLabels()[v1alpha1.LabelComponent]
	what := fmt.Sprintf("%s job, image %s", orNone(component), orNone(strings.Join(images, ", ")))
	if component == v1alpha1.ComponentVerification {
		what += " (disks written in place are read back only where a read is owed: a disk the conversion did not hash, a pause, a late start)"
	}
	return what
}

func dataVolumeDetail(o *unstructured.Unstructured) string {
	src, _, _ := unstructured.NestedString(o.Object, "spec", "source", "pvc", "name")
	class, _, _ := unstructured.NestedString(o.Object, "spec", "storage", "storageClassName")
	size, _, _ := unstructured.NestedString(o.Object, "spec", "storage", "resources", "requests", "storage")
	what := fmt.Sprintf("clone of %s into storage class %s", orNone(src), orDefaultClass(class))
	if o.GetAnnotations()[pipeline.AnnotationAllowClaimAdoption] == "true" {
		what = fmt.Sprintf("adopts claim %s (no copy), storage class %s", o.GetName(), orDefaultClass(class))
	}
	if size != "" {
		what += ", " + size
	}
	return what
}

// vmDetail says what the VM will be, and when it runs: it is created
// halted and started once its disks are imported, unless spec.target.start
// is false.
func vmDetail(m *v1alpha1.VirtualMachineMigration, o *unstructured.Unstructured) string {
	domain := []string{"spec", "template", "spec", "domain"}
	sockets, _, _ := unstructured.NestedInt64(o.Object, append(domain, "cpu", "sockets")...)
	cores, _, _ := unstructured.NestedInt64(o.Object, append(domain, "cpu", "cores")...)
	memory, _, _ := unstructured.NestedString(o.Object, append(domain, "memory", "guest")...)
	firmware := "BIOS"
	if _, efi, _ := unstructured.NestedMap(o.Object, append(domain, "firmware", "bootloader", "efi")...); efi {
		firmware = "EFI"
		if sb, _, _ := unstructured.NestedBool(o.Object, append(domain, "firmware", "bootloader", "efi", "secureBoot")...); sb {
			firmware += " with secure boot"
		}
	}
	disks, _, _ := unstructured.NestedSlice(o.Object, append(domain, "devices", "disks")...)
	nics, _, _ := unstructured.NestedSlice(o.Object, append(domain, "devices", "interfaces")...)
	strategy, _, _ := unstructured.NestedString(o.Object, "spec", "runStrategy")
	runs := "started once its disks are imported"
	if !m.SpecInForce().Target.StartEnabled() {
		runs = "left so (spec.target.start is false)"
	}
	return fmt.Sprintf("%d sockets x %d cores, %s, %s, %s, %s, created with run strategy %s and %s",
		sockets, cores, orNone(memory), firmware, pluralize(len(disks), "disk"), pluralize(len(nics), "interface"), orNone(strategy), runs)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// printPlanYAML writes the plan's objects as stored, one document each.
func printPlanYAML(w io.Writer, objectsYAML string) error {
	_, err := io.WriteString(w, strings.TrimLeft(objectsYAML, "\n"))
	if err == nil && !strings.HasSuffix(objectsYAML, "\n") {
		_, err = io.WriteString(w, "\n")
	}
	return err
}

// printPlanJSON writes the plan's objects as one v1 List.
func printPlanJSON(w io.Writer, objects []*unstructured.Unstructured) error {
	list := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "v1", "kind": "List"}}
	for _, o := range objects {
		list.Items = append(list.Items, *o)
	}
	var buf bytes.Buffer
	if err := (&printers.JSONPrinter{}).PrintObj(list, &buf); err != nil {
		return fmt.Errorf("printing the plan as JSON: %w", err)
	}
	_, err := w.Write(buf.Bytes())
	return err
}
