//go:build integration

package integration

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	migrationv1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
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
	require.NoError(t, err, "getting web-01")
	require.Equal(t, int64(1), vmm.Generation, "generation after create")

	// A status update that also tries to change the spec.
	vmm.Status = sampleStatus()
	vmm.Spec.Policy.Paused = true
	afterStatus, err := client.UpdateStatus(ctx, vmm, metav1.UpdateOptions{})
	require.NoError(t, err, "updating status")
	assert.False(t, afterStatus.Spec.Policy.Paused, "the status update changed spec.policy.paused")
	assert.Equal(t, int64(1), afterStatus.Generation, "generation after a status update")
	assert.Equal(t, migrationv1alpha1.PhaseValidating, afterStatus.Status.Phase, "status not written: phase")
	assert.Equal(t, "12%", afterStatus.Status.Progress, "status not written: progress")

	// A spec update that also tries to change the status.
	afterStatus.Spec.Policy.Paused = true
	afterStatus.Status.Phase = migrationv1alpha1.PhaseFailed
	afterStatus.Status.Progress = "99%"
	afterSpec, err := client.Update(ctx, afterStatus, metav1.UpdateOptions{})
	require.NoError(t, err, "updating spec")
	assert.True(t, afterSpec.Spec.Policy.Paused, "the spec update did not change spec.policy.paused")
	assert.Equal(t, int64(2), afterSpec.Generation, "generation after a spec update")
	assert.Equal(t, migrationv1alpha1.PhaseValidating, afterSpec.Status.Phase, "the spec update changed status: phase")
	assert.Equal(t, "12%", afterSpec.Status.Progress, "the spec update changed status: progress")

	// Status is validated against its schema too.
	bad := afterSpec.DeepCopy()
	bad.Status.Phase = "Done"
	_, err = client.UpdateStatus(ctx, bad, metav1.UpdateOptions{})
	assert.True(t, apierrors.IsInvalid(err), "status with an unknown phase: got %v, want 422 (Invalid)", err)
	assert.ErrorContains(t, err, `status.phase: Unsupported value: "Done"`, "status with an unknown phase, want an error naming status.phase")

	// Finalizers are metadata: the main resource takes them.
	withFinalizer := afterSpec.DeepCopy()
	withFinalizer.Finalizers = []string{"migration.platform.example/cleanup"}
	got, err := client.Update(ctx, withFinalizer, metav1.UpdateOptions{})
	require.NoError(t, err, "adding a finalizer")
	got.Finalizers = nil
	_, err = client.Update(ctx, got, metav1.UpdateOptions{})
	require.NoError(t, err, "removing the finalizer")
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
		SourceName: "web-01",
		Target:     &migrationv1alpha1.TargetStatus{Name: "web-01-kv"},
	}
}

// TestKubectlLongSourceName: kubectl get's Source VM column shows
// status.sourceName, which the controller shortens, not the whole
// inventoried name (issue 25: a 200-character name widened kubectl get to
// about 250 columns); -o yaml keeps the whole name.
func TestKubectlLongSourceName(t *testing.T) {
	long := "app-" + strings.Repeat("x", 189) + "-web-01"
	short := naming.Shorten(long, naming.MaxDisplayName)
	kubectl, env, ns := withSampleStatus(t, "long-01", func(s *migrationv1alpha1.VirtualMachineMigrationStatus) {
		s.Source.Name, s.SourceName = long, short
	})
	out := runKubectl(t, kubectl, env, ns, "get", "vmm", "-o", "wide")
	rows := table(out)
	require.Len(t, rows, 2)
	assert.Equal(t, "SOURCE VM", rows[0][3])
	assert.Equal(t, short, rows[1][3])
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		assert.Less(t, len(line), 160, "a line of kubectl get vmm -o wide: %q", line)
	}
	assert.Contains(t, runKubectl(t, kubectl, env, ns, "get", "vmm", "long-01", "-o", "yaml"), long, "the whole name in -o yaml")
}

// TestKubectlPrinterColumns runs kubectl get against the server and checks
// the columns users see.
func TestKubectlPrinterColumns(t *testing.T) {
	kubectl, env, ns := withSampleStatus(t, "web-01", func(s *migrationv1alpha1.VirtualMachineMigrationStatus) {
		s.Conditions = append(s.Conditions, metav1.Condition{
			Type: "Progressing", Status: metav1.ConditionFalse, Reason: "SourceUnreachable",
			Message: "connecting: i/o timeout", LastTransitionTime: metav1.Now(), ObservedGeneration: 1,
		})
		s.LastError = &migrationv1alpha1.MigrationError{Phase: migrationv1alpha1.PhaseValidating, Reason: "PreflightCheckFailed", Message: "reading datastores: timeout",
			Summary: "reading datastores: timeout", Time: metav1.Now()}
		// The column shows status.downtime.duration (as kubectl vmm list
		// -o wide shows the outage), whatever the phase; seconds stay for
		// machines.
		seconds := int64(31)
		s.Downtime = &migrationv1alpha1.DowntimeStatus{SourceStoppedAt: metav1.Now(), Seconds: &seconds, Duration: "31s"}
	})

	run := func(args ...string) [][]string {
		t.Helper()
		return table(runKubectl(t, kubectl, env, ns, args...))
	}

	for _, resource := range []string{"vmm", "virtualmachinemigrations", "migration"} {
		rows := run("get", resource)
		wantHeader := []string{"NAME", "PHASE", "PROGRESS", "SOURCE VM", "TARGET VM", "AGE"}
		require.Len(t, rows, 2, "kubectl get %s: want a header and one row", resource)
		assert.Equal(t, wantHeader, rows[0], "kubectl get %s header", resource)
		wantRow := []string{"web-01", "Validating", "12%", "web-01", "web-01-kv"}
		if assert.Len(t, rows[1], 6, "kubectl get %s row, want %q and an age", resource, wantRow) {
			assert.Equal(t, wantRow, rows[1][:5], "kubectl get %s row %q, want %q and an age", resource, rows[1], wantRow)
		}
	}

	// -o wide adds why the migration does not progress and its last error
	// (not the Ready condition's reason, which repeats the phase), its
	// message short (issue 34: LAST ERROR repeated a reason), and the
	// outage as kubectl vmm shows it (issue 50: a bare number of seconds).
	wide := run("get", "vmm", "-o", "wide")
	const wideWant = "kubectl get vmm -o wide: %q, want REASON (the Progressing reason), LAST ERROR and DOWNTIME columns"
	if assert.Len(t, wide, 2, wideWant, wide) && assert.Len(t, wide[0], 9, wideWant, wide) &&
		assert.Len(t, wide[1], 9, wideWant, wide) {
		assert.Equal(t, []string{"REASON", "LAST ERROR", "DOWNTIME"}, wide[0][6:9], wideWant, wide)
		assert.Equal(t, []string{"SourceUnreachable", "reading datastores: timeout", "31s"}, wide[1][6:9], wideWant, wide)
	}
}

// withSampleStatus creates the migration name in a namespace of its own,
// with sampleStatus changed by mutate, and returns the kubectl to look at
// it with, the environment and the namespace; without kubectl the test
// is skipped.
func withSampleStatus(t *testing.T, name string, mutate func(*migrationv1alpha1.VirtualMachineMigrationStatus)) (string, *framework.Environment, string) {
	t.Helper()
	env := framework.Env(t)
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed")
	}
	ns := env.Namespace(t)
	ctx := testContext(t)
	client := migrationClient(t, env).MigrationV1alpha1().VirtualMachineMigrations(ns)
	createAndGet(t, env, ns, newMigration(name))
	vmm, err := client.Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err, "getting %s", name)
	vmm.Status = sampleStatus()
	mutate(&vmm.Status)
	_, err = client.UpdateStatus(ctx, vmm, metav1.UpdateOptions{})
	require.NoError(t, err, "updating the status of %s", name)
	return kubectl, env, ns
}

// runKubectl runs kubectl against the test's API server in namespace ns
// and returns what it printed.
func runKubectl(t *testing.T, kubectl string, env *framework.Environment, ns string, args ...string) string {
	t.Helper()
	args = append([]string{"--kubeconfig", env.KubeconfigPath(), "-n", ns}, args...)
	cmd := exec.CommandContext(testContext(t), kubectl, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "kubectl %s:\n%s", strings.Join(args, " "), stderr.String())
	if s := stderr.String(); s != "" {
		t.Logf("kubectl %s stderr: %s", strings.Join(args, " "), s)
	}
	t.Logf("kubectl %s:\n%s", strings.Join(args, " "), out)
	return string(out)
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
