//go:build e2e

package e2e

import (
	"context"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/pkg/statemachine"
	"platform.example/vm-migration/pkg/transfer"
	"platform.example/vm-migration/test/vcsimlocal"
)

// TestTransferKilledMidCopyResumes kills the transfer process with SIGKILL
// mid-copy (the datastore paced so that the copy takes a few seconds):
// the pod fails, the controller starts the next attempt, which resumes
// from the checkpoint in the same staging volume. vcsim served the disk's
// bytes once, plus at most one chunk per stream, and the target disk's
// SHA-256 is the source's.
func TestTransferKilledMidCopyResumes(t *testing.T) {
	const streams = 2
	s := newStack(t, stackOptions{transferStreams: streams})
	const name = "big-01"
	spec := vcsimlocal.SampleVM(name, 111)
	spec.Disks = []vcsimlocal.DiskSpec{{SizeBytes: 64 * vcsimlocal.MiB, Seed: 111}}
	src, err := s.vc.AddVM(s.ctx, spec)
	require.NoError(t, err)
	size := src.Disks[0].SizeBytes
	s.vc.PaceExtentReads(name, 24<<20)
	m := s.create(s.newMigration(name, name))

	job1 := naming.TransferJob(m.Name, 1)
	chunk, servedAtKill := s.killTransferMidCopy(m, name, streams)
	require.Less(t, servedAtKill, size, "the copy was over before the kill")

	m = s.waitPhase(m.Name, v1alpha1.PhaseSucceeded, 3*time.Minute)
	require.NotNil(t, m.Status.Transfer)
	assert.Equal(t, int32(2), m.Status.Transfer.Attempt, "one more attempt after the kill")
	assert.Equal(t, int32(1), m.Status.Retries)
	// The kill is history once the retry succeeded: the Retrying event
	// tells it, status.lastError no longer does (LAST ERROR would show it
	// through to Succeeded).
	assert.Nil(t, m.Status.LastError, "the error the retry recovered from")
	s.waitEvent(m, corev1.EventTypeWarning, statemachine.ReasonRetrying, statemachine.ReasonTransferFailed, "transfer job "+job1+" failed")

	served := s.vc.ExtentBytesServed(name)
	resent := served - size
	t.Logf("vcsim served %d bytes for a %d-byte disk: %d re-sent (limit: %d streams x %d-byte chunk = %d)",
		served, size, resent, streams, chunk, int64(streams)*chunk)
	assert.GreaterOrEqual(t, resent, int64(0))
	assert.LessOrEqual(t, resent, int64(streams)*chunk, "more than one chunk per stream was sent again")
	s.verifyTargetDisks(m, src)
}

// killTransferMidCopy waits for the first transfer attempt of migration m
// to run with streams streams per disk, kills its vm-transfer process with
// SIGKILL once the datastore served three chunks of VM vm (paced by the
// test), stops pacing, and waits for the pod to fail. It returns the
// chunk size and the bytes served at the kill.
func (s *stack) killTransferMidCopy(m *v1alpha1.VirtualMachineMigration, vm string, streams int) (chunk, servedAtKill int64) {
	s.t.Helper()
	m = s.waitPhase(m.Name, v1alpha1.PhaseTransferringDisks, 2*time.Minute)
	job1 := naming.TransferJob(m.Name, 1)
	pod := s.waitTransferPod(m, job1)
	gotStreams, chunk := s.transferShape(job1)
	require.Equal(s.t, streams, gotStreams, "streams per disk in the job's arguments")
	pid := s.transferProcess(&pod, time.Minute)
	killAt := 3 * chunk
	err := wait.PollUntilContextTimeout(s.ctx, 10*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return s.vc.ExtentBytesServed(vm) >= killAt, nil
	})
	require.NoError(s.t, err, "the transfer never got %d bytes in", killAt)
	require.NoError(s.t, syscall.Kill(pid, syscall.SIGKILL))
	servedAtKill = s.vc.ExtentBytesServed(vm)
	s.vc.PaceExtentReads(vm, 0)
	s.t.Logf("killed vm-transfer (pid %d) with %d bytes served", pid, servedAtKill)
	killed := s.waitPodTerminated(pod.Name)
	assert.Equal(s.t, int32(128+int32(syscall.SIGKILL)), killed.ExitCode, "exit code of the killed transfer")
	return chunk, servedAtKill
}

// waitTransferPod waits for the pod of a transfer Job to run.
func (s *stack) waitTransferPod(m *v1alpha1.VirtualMachineMigration, job string) corev1.Pod {
	s.t.Helper()
	var found corev1.Pod
	err := wait.PollUntilContextTimeout(s.ctx, 20*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		for _, p := range s.transferPods(m) {
			if p.Labels[batchv1.JobNameLabel] == job && p.Status.Phase == corev1.PodRunning {
				found = p
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(s.t, err, "no running pod of job %s", job)
	return found
}

// transferShape reads the streams per disk and the chunk size a transfer
// Job runs with: its arguments, or vm-transfer's defaults.
func (s *stack) transferShape(job string) (int, int64) {
	s.t.Helper()
	j, err := s.kube.BatchV1().Jobs(s.ns).Get(s.ctx, job, metav1.GetOptions{})
	require.NoError(s.t, err)
	streams, chunk := transfer.DefaultStreams, int64(transfer.DefaultChunkSize)
	for _, a := range j.Spec.Template.Spec.Containers[0].Args {
		if v, ok := strings.CutPrefix(a, "--streams="); ok {
			streams, err = strconv.Atoi(v)
			require.NoError(s.t, err)
		}
		if v, ok := strings.CutPrefix(a, "--chunk-mib="); ok {
			mib, err := strconv.Atoi(v)
			require.NoError(s.t, err)
			chunk = int64(mib) << 20
		}
	}
	return streams, chunk
}

// waitPodTerminated waits for a pod's container to terminate, and returns
// how.
func (s *stack) waitPodTerminated(name string) corev1.ContainerStateTerminated {
	s.t.Helper()
	var term *corev1.ContainerStateTerminated
	err := wait.PollUntilContextTimeout(s.ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := s.kube.CoreV1().Pods(s.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || len(p.Status.ContainerStatuses) == 0 {
			return false, nil
		}
		term = p.Status.ContainerStatuses[0].State.Terminated
		return term != nil && p.Status.Phase == corev1.PodFailed, nil
	})
	require.NoError(s.t, err, "pod %s did not fail", name)
	return *term
}
