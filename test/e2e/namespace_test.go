//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// TestDeleteNamespaceOfRunningMigration deletes the namespace of a
// migration whose source the controller stopped and whose transfer runs.
// kube-controller-manager's namespace controller deletes everything in it,
// in no set order, and a Terminating namespace accepts no new object. The
// order that matters is the credentials Secret going before the
// cancellation reaches the restore; the test makes it so by deleting the
// Secret itself first, as the namespace controller may. The controller
// powers the source on again with the credentials it kept in memory,
// releases its finalizer, and the namespace goes.
func TestDeleteNamespaceOfRunningMigration(t *testing.T) {
	s := newStack(t, stackOptions{})
	m := s.transferring("web-03", 53)

	deleted := time.Now()
	require.NoError(t, s.kube.CoreV1().Secrets(s.ns).Delete(s.ctx, credentialsSecret, metav1.DeleteOptions{}))
	s.waitSecretGone(time.Minute)
	require.NoError(t, s.kube.CoreV1().Namespaces().Delete(s.ctx, s.ns, metav1.DeleteOptions{}))

	var last *corev1.Namespace
	var lastMigration *v1alpha1.VirtualMachineMigration
	err := wait.PollUntilContextTimeout(s.ctx, 500*time.Millisecond, 4*time.Minute, true, func(ctx context.Context) (bool, error) {
		if m, err := s.mig.MigrationV1alpha1().VirtualMachineMigrations(s.ns).Get(ctx, m.Name, metav1.GetOptions{}); err == nil {
			lastMigration = m
		}
		ns, err := s.kube.CoreV1().Namespaces().Get(ctx, s.ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err == nil {
			last = ns
		}
		return false, nil
	})
	require.NoError(t, err, "namespace %s is still there 4 minutes after its deletion: %s; migration: %s",
		s.ns, namespaceConditions(last), describe(lastMigration))
	t.Logf("the namespace was gone %s after its Secret was deleted", time.Since(deleted).Round(time.Millisecond))
	assert.Equal(t, "poweredOn", s.powerState("web-03"), "the source was left powered off")
}

// TestDeleteNamespaceWhileTheControllerIsDown: the same, but the
// controller is down while the namespace is deleted, so that it holds no
// credentials in memory when it comes back. Nothing can bring the Secret
// back into a Terminating namespace: the controller gives the restore up,
// says so in the metric the alert VMMigrationSourceRestoreAbandoned reads
// (naming the source VM), and releases its finalizer; the namespace goes
// and the source stays powered off.
func TestDeleteNamespaceWhileTheControllerIsDown(t *testing.T) {
	s := newStack(t, stackOptions{})
	m := s.transferring("web-04", 54)

	s.scaleControllerToZero()
	require.NoError(t, s.kube.CoreV1().Secrets(s.ns).Delete(s.ctx, credentialsSecret, metav1.DeleteOptions{}))
	require.NoError(t, s.kube.CoreV1().Namespaces().Delete(s.ctx, s.ns, metav1.DeleteOptions{}))
	s.waitSecretGone(time.Minute)
	s.rolloutController(s.opts.controllerArgs())

	err := wait.PollUntilContextTimeout(s.ctx, 500*time.Millisecond, 4*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := s.kube.CoreV1().Namespaces().Get(ctx, s.ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	require.NoError(t, err, "namespace %s is still there 4 minutes after its deletion", s.ns)
	assert.Equal(t, "poweredOff", s.powerState("web-04"), "the source was powered on without credentials?")

	// The controller gives the restore up before it releases its
	// finalizer, but its metrics are read from its caches: poll.
	url := s.controllerMetricsURL()
	var seen string
	s.eventually(time.Minute, "a vm_migration_source_restore_abandoned series for "+s.ns+"/"+m.Name, func() bool {
		families, err := readMetrics(url + "/metrics")
		if err != nil {
			seen = "scraping: " + err.Error()
			return false
		}
		seen = "no series"
		for _, metric := range families["vm_migration_source_restore_abandoned"].GetMetric() {
			labels := map[string]string{}
			for _, l := range metric.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["namespace"] == s.ns && labels["migration"] == m.Name {
				seen = fmt.Sprintf("series %v = %g", labels, metric.GetGauge().GetValue())
				assert.Equal(t, "web-04", labels["source_vm"])
				assert.Equal(t, s.vc.URL, labels["endpoint"])
				assert.InDelta(t, float64(time.Now().Unix()), metric.GetGauge().GetValue(), 300)
				return true
			}
		}
		return false
	}, func() string { return "the last scrape of " + url + "/metrics: " + seen })
}

// transferring migrates a new VM named name until its transfer runs, held
// (the source is then off), and returns the migration.
func (s *stack) transferring(name string, seed uint64) *v1alpha1.VirtualMachineMigration {
	s.t.Helper()
	s.addVM(name, seed)
	s.t.Cleanup(s.vc.HoldExtentReads(name))
	m := s.create(s.newMigration(name, name))
	m = s.waitPhase(m.Name, v1alpha1.PhaseTransferringDisks, 2*time.Minute)
	s.waitPodRunning(m)
	require.Equal(s.t, "poweredOff", s.powerState(name), "the source is stopped while its disks are transferred")
	return m
}

// waitSecretGone waits until the stack's credentials Secret is deleted.
func (s *stack) waitSecretGone(timeout time.Duration) {
	s.t.Helper()
	err := wait.PollUntilContextTimeout(s.ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		_, err := s.kube.CoreV1().Secrets(s.ns).Get(ctx, credentialsSecret, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	require.NoError(s.t, err, "the credentials Secret %s/%s is still there after %s", s.ns, credentialsSecret, timeout)
}

// namespaceConditions describes what holds a namespace.
func namespaceConditions(ns *corev1.Namespace) string {
	if ns == nil {
		return "(never read)"
	}
	out := string(ns.Status.Phase)
	for _, c := range ns.Status.Conditions {
		if c.Status == corev1.ConditionTrue {
			out += "; " + string(c.Type) + ": " + c.Message
		}
	}
	return out
}
