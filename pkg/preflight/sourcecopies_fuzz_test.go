package preflight

import (
	"strings"
	"testing"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// FuzzDescribeCopies: the refusal's words name every copy (its namespace
// and name) and the migration that made it, whatever the cluster's
// objects and their annotations hold, and never panic.
func FuzzDescribeCopies(f *testing.F) {
	f.Add("web", "web01", "web01-mig", v1alpha1.OutcomeFailed, "instance UUID 503e", "other", "db01", "")
	f.Add("", "", "", "", "", "", "", v1alpha1.OutcomeCancelled)
	f.Add("ns\n", "na;me", "m (x)", "Bogus", "\x00", "é", "日本", v1alpha1.OutcomeInProgress)
	f.Fuzz(func(t *testing.T, ns1, name1, by1, outcome1, identity1, ns2, name2, outcome2 string) {
		copies := []v1alpha1.MigratedCopy{
			{Namespace: ns1, Name: name1, MigratedBy: by1, Outcome: outcome1, Identity: identity1},
			{Namespace: ns2, Name: name2, Outcome: outcome2},
		}
		got := describeCopies(copies)
		for _, cp := range copies {
			if !strings.Contains(got, "VirtualMachine "+cp.Namespace+"/"+cp.Name) {
				t.Fatalf("%q does not name the copy %s/%s", got, cp.Namespace, cp.Name)
			}
			if cp.MigratedBy != "" && !strings.Contains(got, "made by migration "+cp.MigratedBy) {
				t.Fatalf("%q does not name the migration %q", got, cp.MigratedBy)
			}
		}
		if describeCopies(nil) != "" {
			t.Fatal("no copies described as something")
		}
	})
}
