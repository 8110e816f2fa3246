//go:build e2e

package e2e

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	kubevirtv1 "kubevirt.io/api/core/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// TestMigratedVMRunsInALauncherPod migrates a sample VM (random-byte
// disks: the guest sits in firmware) and finds its instance run as
// KubeVirt runs one: a launcher pod on the node, controlled by the
// instance, labelled as virt-launcher's, holding QEMU with the VM's
// disks and MACs (its log says so); the instance Running on the node
// with the pod's IP on its pod-network interface, no guest agent. Halting
// the VM stops QEMU and the pod goes.
func TestMigratedVMRunsInALauncherPod(t *testing.T) {
	s := newStack(t, stackOptions{})
	const name = "lx-01"
	src := s.addVM(name, 17)
	m := s.create(s.newMigration(name, name))
	s.waitPhase(m.Name, v1alpha1.PhaseSucceeded, 3*time.Minute)
	vmi := s.waitInstance(name, time.Minute, "Running", func(vmi *kubevirtv1.VirtualMachineInstance) bool {
		return vmi.Status.Phase == kubevirtv1.Running
	})
	t.Logf("instance Scheduling to Running in %s", phaseTime(vmi, kubevirtv1.Scheduling, kubevirtv1.Running))

	pod := s.launcherPod(vmi)
	assert.Equal(t, "virt-launcher", pod.Labels[kubevirtv1.AppLabel], "the launcher pod's app label")
	assert.Equal(t, string(vmi.UID), pod.Labels[kubevirtv1.CreatedByLabel], "the launcher pod's created-by label")
	assert.Equal(t, name, pod.Labels[kubevirtv1.DeprecatedVirtualMachineNameLabel], "the launcher pod's VM name label")
	assert.Equal(t, s.env.NodeName(), pod.Spec.NodeName, "the launcher pod's node")
	assert.Equal(t, s.env.NodeName(), vmi.Status.NodeName, "the instance's node")
	assert.Equal(t, map[types.UID]string{pod.UID: s.env.NodeName()}, vmi.Status.ActivePods, "the instance's active pods")
	assert.True(t, instanceCondition(vmi, kubevirtv1.VirtualMachineInstanceReady), "the instance is Ready")
	assert.False(t, instanceCondition(vmi, kubevirtv1.VirtualMachineInstanceAgentConnected), "no agent in a guest of random bytes")

	followed := s.followLog(pod)
	log := s.podLog(pod)
	require.Contains(t, log, "launcher: qemu started", "the launcher's log")
	for _, d := range m.Status.Disks {
		assert.Contains(t, log, "/var/run/kubevirt-private/vmi-disks/"+d.Name+"/disk.img", "QEMU's command line lacks disk %s", d.Name)
	}
	for _, mac := range src.MACs {
		assert.Contains(t, log, "mac="+mac, "QEMU's command line lacks the source MAC")
	}
	assert.Contains(t, log, "OVMF_CODE_4M.secboot.fd", "the sample VM is EFI with secure boot")
	require.Len(t, vmi.Status.Interfaces, len(src.MACs), "the instance's interfaces")
	primary := vmi.Status.Interfaces[0]
	assert.Equal(t, "domain", primary.InfoSource, "the pod network's interface, from the domain only")
	if assert.NotEmpty(t, pod.Status.PodIP, "the pod's IP") {
		assert.Equal(t, pod.Status.PodIP, primary.IP, "the pod network's interface carries the pod's IP, as KubeVirt reports it")
	}

	start := time.Now()
	_, err := s.kv.KubevirtV1().VirtualMachines(s.ns).Patch(s.ctx, name, types.MergePatchType,
		[]byte(`{"spec":{"runStrategy":"Halted"}}`), metav1.PatchOptions{})
	require.NoError(t, err, "halting the VM")
	s.waitNoVMI(name, time.Minute)
	s.waitPodGone(pod, time.Minute)
	t.Logf("VM halted: instance and launcher pod gone in %s", time.Since(start).Round(time.Millisecond))
	assert.Contains(t, followed.wait(t), "launcher: telling QEMU to quit", "how the launcher stopped QEMU")
}

// waitInstance polls the VM's instance until cond holds.
func (s *stack) waitInstance(name string, timeout time.Duration, what string, cond func(*kubevirtv1.VirtualMachineInstance) bool) *kubevirtv1.VirtualMachineInstance {
	s.t.Helper()
	var last *kubevirtv1.VirtualMachineInstance
	err := wait.PollUntilContextTimeout(s.ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		vmi, err := s.kv.KubevirtV1().VirtualMachineInstances(s.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = vmi
		return cond(vmi), nil
	})
	if last == nil {
		require.NoError(s.t, err, "instance %s never existed within %s", name, timeout)
	}
	require.NoError(s.t, err, "instance %s: %s not reached within %s: phase %s, conditions %+v", name, what, timeout, last.Status.Phase, last.Status.Conditions)
	return last
}

// launcherPod reads the instance's launcher pod: the one pod labelled as
// created by it (virt-controller names it virt-launcher-<instance>-<random>,
// the stand-in virt-launcher-<instance>), controlled by it.
func (s *stack) launcherPod(vmi *kubevirtv1.VirtualMachineInstance) *corev1.Pod {
	s.t.Helper()
	pods, err := s.kube.CoreV1().Pods(s.ns).List(s.ctx, metav1.ListOptions{LabelSelector: kubevirtv1.CreatedByLabel + "=" + string(vmi.UID)})
	require.NoError(s.t, err, "listing the launcher pods of instance %s", vmi.Name)
	require.Len(s.t, pods.Items, 1, "the launcher pods of instance %s", vmi.Name)
	pod := &pods.Items[0]
	assert.True(s.t, strings.HasPrefix(pod.Name, "virt-launcher-"+vmi.Name), "the launcher pod's name %s", pod.Name)
	c := metav1.GetControllerOf(pod)
	require.NotNil(s.t, c, "the launcher pod has no controller")
	require.Equal(s.t, vmi.UID, c.UID, "the launcher pod's controller, want the instance")
	return pod
}

// podLog is a pod's first container's log, through the API server.
func (s *stack) podLog(pod *corev1.Pod) string {
	s.t.Helper()
	raw, err := s.kube.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: pod.Spec.Containers[0].Name}).DoRaw(s.ctx)
	require.NoError(s.t, err, "reading the log of pod %s", pod.Name)
	return string(raw)
}

// followedLog is a container's log streamed through the API server until
// the container ends.
type followedLog struct {
	done chan struct{}
	buf  strings.Builder
	err  error
}

// followLog streams a pod's first container's log from its start.
func (s *stack) followLog(pod *corev1.Pod) *followedLog {
	f := &followedLog{done: make(chan struct{})}
	go func() {
		defer close(f.done)
		rc, err := s.kube.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{
			Container: pod.Spec.Containers[0].Name, Follow: true}).Stream(context.WithoutCancel(s.ctx))
		if err != nil {
			f.err = err
			return
		}
		defer rc.Close()
		_, f.err = io.Copy(&f.buf, rc)
	}()
	return f
}

// wait returns the whole log once the container ended.
func (f *followedLog) wait(t *testing.T) string {
	t.Helper()
	select {
	case <-f.done:
	case <-time.After(time.Minute):
		require.FailNow(t, "the log stream did not end a minute after the container should have")
	}
	assert.NoError(t, f.err, "streaming the log")
	return f.buf.String()
}

// waitPodGone waits until the pod is deleted.
func (s *stack) waitPodGone(pod *corev1.Pod, timeout time.Duration) {
	s.t.Helper()
	err := wait.PollUntilContextTimeout(s.ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		got, err := s.kube.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err) || (err == nil && got.UID != pod.UID), nil
	})
	require.NoError(s.t, err, "pod %s still exists after %s", pod.Name, timeout)
}

// instanceCondition says whether the instance's condition is true.
func instanceCondition(vmi *kubevirtv1.VirtualMachineInstance, t kubevirtv1.VirtualMachineInstanceConditionType) bool {
	for _, c := range vmi.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// phaseTime is the time between two phase transitions of an instance.
func phaseTime(vmi *kubevirtv1.VirtualMachineInstance, from, to kubevirtv1.VirtualMachineInstancePhase) time.Duration {
	at := map[kubevirtv1.VirtualMachineInstancePhase]time.Time{}
	for _, p := range vmi.Status.PhaseTransitionTimestamps {
		at[p.Phase] = p.PhaseTransitionTimestamp.Time
	}
	if at[from].IsZero() {
		at[from] = vmi.CreationTimestamp.Time
	}
	return at[to].Sub(at[from]).Round(time.Millisecond)
}
