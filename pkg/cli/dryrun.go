package cli

import (
	"fmt"
	"io"

	"k8s.io/cli-runtime/pkg/printers"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// printDryRun writes the API server's answer to the dry run of every
// object the migration creates, one line per object, then the image
// proofs: what the cluster said before the source was touched.
func printDryRun(w io.Writer, m *v1alpha1.VirtualMachineMigration) error {
	dr := m.Status.DryRun
	fmt.Fprintf(w, "Dry run of %s/%s (spec generation %d, phase %s), answered by the API server %s: %s refused.\n",
		m.Namespace, m.Name, dr.ObservedGeneration, orNone(string(dr.Phase)), timestamp(&dr.CheckedAt), refusedCount(dr))
	if m.Status.SourceControl == nil {
		fmt.Fprintln(w, "The source VM was not touched.")
	}
	fmt.Fprintln(w)
	tw := printers.GetNewTabWriter(w)
	fmt.Fprintln(tw, "  #\tKIND\tNAME\tOUTCOME\tTHE API SERVER SAID")
	for i, o := range dr.Objects {
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\n", i+1, clean(o.Kind), clean(o.Name), o.Outcome, clean(orDash(o.Message)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return printProofs(w, m)
}

// printProofs writes the image proofs' results.
func printProofs(w io.Writer, m *v1alpha1.VirtualMachineMigration) error {
	if len(m.Status.ImageProofs) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nImages proven in namespace %s (a short pod of each, shaped as the pods that will run it):\n\n", m.Namespace)
	tw := printers.GetNewTabWriter(w)
	fmt.Fprintln(tw, "  COMPONENT\tIMAGE\tRESULT\tSAID")
	for _, p := range m.Status.ImageProofs {
		said := p.Output
		if p.Result != v1alpha1.ProofPassed {
			said = p.Reason + ": " + p.Message
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", clean(p.Component), clean(p.Image), p.Result, clean(orDash(said)))
	}
	return tw.Flush()
}

// refusedCount says how many objects were refused, of how many.
func refusedCount(dr *v1alpha1.DryRunStatus) string {
	if dr.Refused == 0 {
		return fmt.Sprintf("none of %d objects", len(dr.Objects))
	}
	return fmt.Sprintf("%d of %d objects", dr.Refused, len(dr.Objects))
}

// dryRunOutcome is the dry run's answer for the object kind/name, or "".
func dryRunOutcome(m *v1alpha1.VirtualMachineMigration, kind, name string) string {
	if m.Status.DryRun == nil {
		return ""
	}
	for _, o := range m.Status.DryRun.Objects {
		if o.Kind == kind && o.Name == name {
			return string(o.Outcome)
		}
	}
	return ""
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
