//go:build integration

package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/steps/pipeline"
	"platform.example/vm-migration/pkg/transfer/wire"
	"platform.example/vm-migration/test/builders"
	"platform.example/vm-migration/test/framework"
)

// waitSlack is how soon after the phase change kubectl wait must return:
// it watches the object, so the condition's write reaches it at once.
const waitSlack = 5 * time.Second

// kubectlWait is a kubectl wait running in the background.
type kubectlWait struct {
	args     []string
	out      bytes.Buffer
	done     chan struct{}
	err      error
	exitedAt time.Time
	// phaseAtExit is the migration's phase read as soon as kubectl exited:
	// it must already be the one waited for.
	phaseAtExit v1alpha1.Phase
}

// startKubectlWait runs kubectl wait --for=<what> on the walk's migration,
// as a user's script would, with the machine's kubectl.
func startKubectlWait(t *testing.T, w *walkEnv, what string, timeout time.Duration) *kubectlWait {
	t.Helper()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed")
	}
	k := &kubectlWait{done: make(chan struct{}), args: []string{
		"--kubeconfig", framework.Env(t).KubeconfigPath(), "-n", w.ns,
		"wait", "--for=" + what, "vmm/" + walkMigration, "--timeout=" + timeout.String(),
	}}
	cmd := exec.Command(kubectl, k.args...)
	cmd.Stdout, cmd.Stderr = &k.out, &k.out
	require.NoError(t, cmd.Start(), "starting kubectl %s", strings.Join(k.args, " "))
	go func() {
		k.err = cmd.Wait()
		k.exitedAt = time.Now()
		if m := w.get(); m != nil {
			k.phaseAtExit = m.Status.Phase
		}
		close(k.done)
	}()
	t.Cleanup(func() {
		select {
		case <-k.done:
		default:
			_ = cmd.Process.Kill()
			<-k.done
		}
	})
	return k
}

// running fails the test if kubectl wait already returned.
func (k *kubectlWait) running(t *testing.T, when string) {
	t.Helper()
	select {
	case <-k.done:
		require.FailNow(t, "kubectl wait returned "+when, "kubectl %s: %v\n%s", strings.Join(k.args, " "), k.err, k.out.String())
	default:
	}
}

// returned waits for kubectl wait to exit within waitSlack of since, and
// returns how long after since it did.
func (k *kubectlWait) returned(t *testing.T, since time.Time) time.Duration {
	t.Helper()
	select {
	case <-k.done:
	case <-time.After(time.Until(since.Add(waitSlack))):
		require.FailNow(t, "kubectl wait did not return within "+waitSlack.String()+" of the phase change",
			"kubectl %s\n%s", strings.Join(k.args, " "), k.out.String())
	}
	return k.exitedAt.Sub(since)
}

// met requires kubectl wait to have returned within waitSlack of at (when
// the test's 50 ms poll saw phase), saying the condition was met, with the
// migration already in phase: never before (Failed, not RollingBack: the
// source is restored first).
func (k *kubectlWait) met(t *testing.T, at time.Time, phase v1alpha1.Phase) {
	t.Helper()
	after := k.returned(t, at)
	t.Logf("kubectl %s returned %s after the test's poll saw phase %s: %s",
		strings.Join(k.args[4:6], " "), after.Round(time.Millisecond), phase, strings.TrimSpace(k.out.String()))
	require.NoError(t, k.err, "kubectl %s: %s", strings.Join(k.args, " "), k.out.String())
	assert.Equal(t, phase, k.phaseAtExit, "the phase when kubectl %s returned", strings.Join(k.args[4:6], " "))
	assert.Contains(t, k.out.String(), "virtualmachinemigration.migration.platform.example/"+walkMigration+" condition met")
}

// phaseSeen polls the migration (every 50 ms) until it is in phase p and
// returns it with the time it was first seen there.
func phaseSeen(t *testing.T, w *walkEnv, p v1alpha1.Phase) (*v1alpha1.VirtualMachineMigration, time.Time) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if m := w.get(); m != nil && m.Status.Phase == p {
			return m, time.Now()
		}
		time.Sleep(50 * time.Millisecond)
	}
	require.FailNow(t, "phase "+string(p)+" not reached within 30s", describeStatus(w.get()))
	return nil, time.Time{}
}

// approveAndTransfer approves the walk's migration and waits for its
// transfer Job.
func approveAndTransfer(t *testing.T, w *walkEnv) *v1alpha1.VirtualMachineMigration {
	t.Helper()
	ctx := testContext(t)
	w.waitPhase(v1alpha1.PhaseAwaitingApproval, nil)
	patch := []byte(`{"spec":{"policy":{"approved":true}}}`)
	_, err := w.mig.MigrationV1alpha1().VirtualMachineMigrations(w.ns).Patch(ctx, walkMigration, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err, "approving the migration")
	return w.waitPhase(v1alpha1.PhaseTransferringDisks, func(m *v1alpha1.VirtualMachineMigration) bool {
		_, err := w.kube.BatchV1().Jobs(w.ns).Get(ctx, naming.TransferJob(walkMigration, 1), metav1.GetOptions{})
		return err == nil
	})
}

// TestKubectlWaitSucceeded: kubectl wait --for=condition=Succeeded, as a
// script or a GitOps health check would run it, waits through the whole
// migration and returns within seconds of the phase change to Succeeded;
// Failed is then False, so waiting for it times out (issue 25: there was
// no condition to wait on).
func TestKubectlWaitSucceeded(t *testing.T) {
	w := newWalkEnv(t)
	ctx := testContext(t)
	w.newWalkMigration()
	wait := startKubectlWait(t, w, "condition="+statemachine.ConditionSucceeded, 3*time.Minute)
	// Either outcome: the end, then read the phase.
	ended := startKubectlWait(t, w, "jsonpath={.status.completionTime}", 3*time.Minute)

	m := approveAndTransfer(t, w)
	w.finishJob(naming.TransferJob(walkMigration, 1), pipeline.TransferContainer, transferDone(t, m))
	w.waitPhase(v1alpha1.PhaseConverting, func(m *v1alpha1.VirtualMachineMigration) bool {
		_, err := w.kube.BatchV1().Jobs(w.ns).Get(ctx, naming.ConversionJob(walkMigration, 1), metav1.GetOptions{})
		return err == nil
	})
	w.finishJob(naming.ConversionJob(walkMigration, 1), pipeline.ConversionContainer, builders.ConvertedChecksumLines(m)+walkInspection)
	m = w.waitPhase(v1alpha1.PhaseImporting, progressing("importing disks: 0 of"))
	m = w.importAll(m)
	wait.running(t, "before the migration succeeded")

	w.runVMI(m.Status.Target.Name, kubevirtv1.Running)
	m, at := phaseSeen(t, w, v1alpha1.PhaseSucceeded)
	wait.met(t, at, v1alpha1.PhaseSucceeded)
	ended.met(t, at, v1alpha1.PhaseSucceeded)
	assert.True(t, hasCond(m, statemachine.ConditionSucceeded, metav1.ConditionTrue, statemachine.ReasonTargetStarted), describeStatus(m))
	assert.True(t, hasCond(m, statemachine.ConditionFailed, metav1.ConditionFalse, statemachine.ReasonSucceeded), describeStatus(m))

	failed := startKubectlWait(t, w, "condition="+statemachine.ConditionFailed, 2*time.Second)
	<-failed.done
	assert.Error(t, failed.err, "kubectl wait --for=condition=Failed on a migration that succeeded: %s", failed.out.String())
}

// TestKubectlWaitFailed: kubectl wait --for=condition=Failed returns
// within seconds of the phase change to Failed, which comes once the
// rollback restored the source; until then it waits.
func TestKubectlWaitFailed(t *testing.T) {
	w := newWalkEnv(t)
	ctx := testContext(t)
	w.newWalkMigration()
	// No retry: the first failed transfer fails the migration.
	patch := []byte(`{"spec":{"policy":{"retry":{"limit":0}}}}`)
	_, err := w.mig.MigrationV1alpha1().VirtualMachineMigrations(w.ns).Patch(ctx, walkMigration, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err, "setting the retry limit to 0")
	wait := startKubectlWait(t, w, "condition="+statemachine.ConditionFailed, 3*time.Minute)
	succeeded := startKubectlWait(t, w, "condition="+statemachine.ConditionSucceeded+"=False", 3*time.Minute)

	approveAndTransfer(t, w)
	wait.running(t, "before the migration failed")
	w.failJob(naming.TransferJob(walkMigration, 1), pipeline.TransferContainer, "copying disk 2000: connection reset by peer")
	m, at := phaseSeen(t, w, v1alpha1.PhaseFailed)
	wait.met(t, at, v1alpha1.PhaseFailed)
	assert.True(t, hasCond(m, statemachine.ConditionFailed, metav1.ConditionTrue, statemachine.ReasonTransferFailed), describeStatus(m))
	require.NotNil(t, m.Status.SourceControl, describeStatus(m))
	assert.NotNil(t, m.Status.SourceControl.RestoredAt, "Failed before the source was restored: %s", describeStatus(m))

	succeeded.met(t, at, v1alpha1.PhaseFailed)
}

// hasCond reports whether m has the condition with that status and reason.
func hasCond(m *v1alpha1.VirtualMachineMigration, typ string, status metav1.ConditionStatus, reason string) bool {
	for _, c := range m.Status.Conditions {
		if c.Type == typ {
			return c.Status == status && c.Reason == reason
		}
	}
	return false
}

// TestPausedProgressMoves: a paused migration's transfer Job runs on (a
// pause does not interrupt it), and status.progress follows what the Job
// reports while the pause holds every next action (issue 25: progress
// stayed at 8% while the Job reached 100%, and jumped on resume).
func TestPausedProgressMoves(t *testing.T) {
	w := newWalkEnv(t)
	ctx := testContext(t)
	w.newWalkMigration()
	m := approveAndTransfer(t, w)
	_, err := w.mig.MigrationV1alpha1().VirtualMachineMigrations(w.ns).Patch(ctx, walkMigration, types.MergePatchType,
		[]byte(`{"spec":{"policy":{"paused":true}}}`), metav1.PatchOptions{})
	require.NoError(t, err, "pausing the migration")
	w.waitFor("paused", func(m *v1alpha1.VirtualMachineMigration) bool {
		return hasCond(m, statemachine.ConditionPaused, metav1.ConditionTrue, statemachine.ReasonPaused)
	})

	progress := naming.TransferProgressConfigMap(walkMigration, 1)
	for _, pct := range []int64{30, 100} {
		p := wire.Progress{Kind: wire.KindProgress, Time: time.Now()}
		var want int64
		var total int64
		for _, d := range m.Status.Disks {
			done := d.CapacityBytes * pct / 100
			p.Disks = append(p.Disks, wire.DiskProgress{Key: d.Key, State: wire.StateCopying, BytesDone: done, TotalBytes: d.CapacityBytes, RateBytesPerSecond: 100 << 20})
			want, total = want+done, total+d.CapacityBytes
		}
		data, err := json.Marshal(p)
		require.NoError(t, err)
		patch, err := json.Marshal(map[string]any{"data": map[string]string{wire.ConfigMapKeyProgress: string(data)}})
		require.NoError(t, err)
		_, err = w.kube.CoreV1().ConfigMaps(w.ns).Patch(ctx, progress, types.MergePatchType, patch, metav1.PatchOptions{})
		require.NoError(t, err, "reporting %d%% into %s", pct, progress)
		// The overall figure: the transfer's share of it, as far as the bytes go.
		wantProgress := fmt.Sprintf("%d%%", want*statemachine.ProgressTransferred/total)
		got := w.waitFor("progress "+wantProgress+" while paused", func(m *v1alpha1.VirtualMachineMigration) bool {
			return m.Status.Progress == wantProgress
		})
		assert.Equal(t, v1alpha1.PhaseTransferringDisks, got.Status.Phase, "a pause holds the phase")
		assert.True(t, hasCond(got, statemachine.ConditionPaused, metav1.ConditionTrue, statemachine.ReasonPaused), describeStatus(got))
		for _, d := range got.Status.Disks {
			assert.Equal(t, d.CapacityBytes*pct/100, d.BytesTransferred, "disk %d while paused", d.Key)
		}
	}
}
