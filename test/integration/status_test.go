//go:build integration

package integration

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	migrationv1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/test/framework"
)

// TestStatusSubresource checks that spec and status are written through
// separate endpoints: a spec update cannot change status, a status update
// cannot change spec, and only spec changes bump the generation.
func TestStatusSubresource(t *testing.T) {
	env := framework.Env(t)
	ns := env.Namespace(t)
	ctx := testContext(t)
	client := migrationClient(t, env).MigrationV1alpha1().VirtualMachineMigrations(ns)

	createAndGet(t, env, ns, newMigration("web-01"))
	vmm, err := client.Get(ctx, "web-01", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting: %v", err)
	}
	if vmm.Generation != 1 {
		t.Fatalf("generation %d after create, want 1", vmm.Generation)
	}

	// A status update that also tries to change the spec.
	vmm.Status = sampleStatus()
	vmm.Spec.Policy.Paused = true
	afterStatus, err := client.UpdateStatus(ctx, vmm, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("updating status: %v", err)
	}
	if afterStatus.Spec.Policy.Paused {
		t.Error("the status update changed spec.policy.paused")
	}
	if afterStatus.Generation != 1 {
		t.Errorf("generation %d after a status update, want 1", afterStatus.Generation)
	}
	if afterStatus.Status.Phase != migrationv1alpha1.PhaseValidating || afterStatus.Status.Progress != "12%" {
		t.Errorf("status not written: phase %q progress %q", afterStatus.Status.Phase, afterStatus.Status.Progress)
	}

	// A spec update that also tries to change the status.
	afterStatus.Spec.Policy.Paused = true
	afterStatus.Status.Phase = migrationv1alpha1.PhaseFailed
	afterStatus.Status.Progress = "99%"
	afterSpec, err := client.Update(ctx, afterStatus, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("updating spec: %v", err)
	}
	if !afterSpec.Spec.Policy.Paused {
		t.Error("the spec update did not change spec.policy.paused")
	}
	if afterSpec.Generation != 2 {
		t.Errorf("generation %d after a spec update, want 2", afterSpec.Generation)
	}
	if afterSpec.Status.Phase != migrationv1alpha1.PhaseValidating || afterSpec.Status.Progress != "12%" {
		t.Errorf("the spec update changed status: phase %q progress %q", afterSpec.Status.Phase, afterSpec.Status.Progress)
	}

	// Status is validated against its schema too.
	bad := afterSpec.DeepCopy()
	bad.Status.Phase = "Done"
	_, err = client.UpdateStatus(ctx, bad, metav1.UpdateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `status.phase: Unsupported value: "Done"`) {
		t.Errorf("status with an unknown phase: got %v, want 422 naming status.phase", err)
	}

	// Finalizers are metadata: the main resource takes them.
	withFinalizer := afterSpec.DeepCopy()
	withFinalizer.Finalizers = []string{"migration.platform.example/cleanup"}
	got, err := client.Update(ctx, withFinalizer, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("adding a finalizer: %v", err)
	}
	got.Finalizers = nil
	if _, err := client.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("removing the finalizer: %v", err)
	}
}

// sampleStatus is a status as the controller writes it during validation.
func sampleStatus() migrationv1alpha1.VirtualMachineMigrationStatus {
	now := metav1.Now()
	return migrationv1alpha1.VirtualMachineMigrationStatus{
		ObservedGeneration: 1,
		Phase:              migrationv1alpha1.PhaseValidating,
		Progress:           "12%",
		StartTime:          &now,
		Conditions: []metav1.Condition{{
			Type:               "Ready",
			Status:             metav1.ConditionFalse,
			Reason:             "Validating",
			Message:            "reading the source VM's inventory",
			LastTransitionTime: now,
			ObservedGeneration: 1,
		}},
		Source: &migrationv1alpha1.SourceInventory{
			Name:      "web-01",
			MoRef:     "vm-42",
			CPU:       migrationv1alpha1.CPUTopology{Sockets: 2, CoresPerSocket: 2},
			MemoryMiB: 8192,
			Firmware:  migrationv1alpha1.FirmwareEFI,
		},
		Target: &migrationv1alpha1.TargetStatus{Name: "web-01-kv"},
	}
}

// TestKubectlPrinterColumns runs kubectl get against the server and checks
// the columns users see.
func TestKubectlPrinterColumns(t *testing.T) {
	env := framework.Env(t)
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed")
	}
	ns := env.Namespace(t)
	ctx := testContext(t)
	client := migrationClient(t, env).MigrationV1alpha1().VirtualMachineMigrations(ns)
	createAndGet(t, env, ns, newMigration("web-01"))
	vmm, err := client.Get(ctx, "web-01", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting: %v", err)
	}
	vmm.Status = sampleStatus()
	vmm.Status.Conditions = append(vmm.Status.Conditions, metav1.Condition{
		Type: "Progressing", Status: metav1.ConditionFalse, Reason: "SourceUnreachable",
		Message: "connecting: i/o timeout", LastTransitionTime: metav1.Now(), ObservedGeneration: 1,
	})
	vmm.Status.LastError = &migrationv1alpha1.MigrationError{Phase: migrationv1alpha1.PhaseValidating, Reason: "PreflightCheckFailed", Message: "reading datastores: timeout", Time: metav1.Now()}
	if _, err := client.UpdateStatus(ctx, vmm, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("updating status: %v", err)
	}

	run := func(args ...string) [][]string {
		t.Helper()
		args = append([]string{"--kubeconfig", env.KubeconfigPath(), "-n", ns}, args...)
		cmd := exec.CommandContext(ctx, kubectl, args...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		if s := stderr.String(); s != "" {
			t.Logf("kubectl %s stderr: %s", strings.Join(args, " "), s)
		}
		t.Logf("kubectl %s:\n%s", strings.Join(args, " "), out)
		return table(string(out))
	}

	for _, resource := range []string{"vmm", "virtualmachinemigrations", "migration"} {
		rows := run("get", resource)
		wantHeader := []string{"NAME", "PHASE", "PROGRESS", "SOURCE VM", "TARGET VM", "AGE"}
		if len(rows) != 2 {
			t.Fatalf("kubectl get %s: %d lines, want a header and one row", resource, len(rows))
		}
		if !equalStrings(rows[0], wantHeader) {
			t.Errorf("kubectl get %s header %q, want %q", resource, rows[0], wantHeader)
		}
		wantRow := []string{"web-01", "Validating", "12%", "web-01", "web-01-kv"}
		if len(rows[1]) != 6 || !equalStrings(rows[1][:5], wantRow) {
			t.Errorf("kubectl get %s row %q, want %q and an age", resource, rows[1], wantRow)
		}
	}

	// -o wide adds why the migration does not progress and its last error
	// (not the Ready condition's reason, which repeats the phase).
	wide := run("get", "vmm", "-o", "wide")
	if len(wide) != 2 || len(wide[0]) != 8 || wide[0][6] != "REASON" || wide[0][7] != "LAST ERROR" ||
		wide[1][6] != "SourceUnreachable" || wide[1][7] != "PreflightCheckFailed" {
		t.Errorf("kubectl get vmm -o wide: %q, want REASON (the Progressing reason) and LAST ERROR columns", wide)
	}
}

var columnGap = regexp.MustCompile(`\s{2,}`)

// table splits kubectl's tabular output into cells (columns are separated
// by two spaces or more; a header may hold one space, as in SOURCE VM).
func table(out string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		rows = append(rows, columnGap.Split(strings.TrimSpace(line), -1))
	}
	return rows
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
