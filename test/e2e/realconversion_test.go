//go:build e2e && conversion

package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/steps/pipeline"
	"platform.example/vm-migration/test/framework"
)

// realConversion is the real conversion image on the node: built by make
// conversion-image (cached by content: seconds when nothing changed) and
// imported once per test binary.
var realConversion struct {
	once sync.Once
	err  error
}

// importRealConversionImage builds (or reuses) the project's conversion
// image and imports it into the node.
func importRealConversionImage(t *testing.T, env *framework.Environment) {
	t.Helper()
	realConversion.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		defer cancel()
		start := time.Now()
		cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "conversion-image", "CONVERSION_IMAGE="+realConversionImage)
		cmd.Dir = framework.RepoPath(".")
		out, err := cmd.CombinedOutput()
		if err != nil {
			realConversion.err = fmt.Errorf("make conversion-image: %w: %s", err, out)
			return
		}
		if err := env.ImportImage(ctx, framework.RepoPath("_output/conversion-image/vm-migration-conversion.tar")); err != nil {
			realConversion.err = fmt.Errorf("importing the conversion image: %w", err)
			return
		}
		fmt.Fprintf(os.Stderr, "e2e: conversion image %s built (or reused) and imported in %s\n", realConversionImage, time.Since(start).Round(time.Second))
	})
	require.NoError(t, realConversion.err, "the real conversion image on the node (make conversion-image needs root)")
}

// realGuestStack is a stack whose controller offers /dev/kvm to conversion
// pods through the node's kvm RuntimeClass where the machine has one (the
// conversion then probes KVM and falls back to TCG, and its log says
// which), with the real conversion image on the node; its launcher pods
// run under KVM through launcherRuntimeClass when set.
func realGuestStack(t *testing.T, launcherRuntimeClass string) *stack {
	t.Helper()
	var extra []string
	if rc := framework.Env(t).RuntimeClassKVM(); rc != "" {
		extra = append(extra, "--conversion-runtime-class="+rc)
	}
	s := newStack(t, stackOptions{extraControllerArgs: extra, launcherRuntimeClass: launcherRuntimeClass})
	importRealConversionImage(t, s.env)
	return s
}

// conversionPod is the pod of a migration's conversion Job as it runs.
type conversionPod struct {
	// logPath receives the container's log, streamed through the API
	// server (the kubelet's log) while it runs.
	logPath string
	// selfView is what the pod's own shell saw of itself (kubectl exec):
	// its user, capabilities, no-new-privileges and seccomp mode, and
	// whether its root file system refused a write.
	selfView string
	done     chan struct{}
}

// followConversion waits for the migration's conversion pod to run, asks
// it (kubectl exec through the API server and the kubelet) what it is, and
// streams its log into a file until the container ends.
func (s *stack) followConversion(t *testing.T, m *v1alpha1.VirtualMachineMigration, dir string) *conversionPod {
	t.Helper()
	cp := &conversionPod{logPath: filepath.Join(dir, "conversion.log"), done: make(chan struct{})}
	sel := v1alpha1.LabelMigrationUID + "=" + string(m.UID) + "," + v1alpha1.LabelComponent + "=" + v1alpha1.ComponentConversion
	var pod corev1.Pod
	err := wait.PollUntilContextTimeout(s.ctx, 500*time.Millisecond, 30*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := s.kube.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return false, nil
		}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				pod = p
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err, "no conversion pod of migration %s ran", m.Name)
	t.Logf("conversion pod %s/%s runs on node %s (runtime class %q)", pod.Namespace, pod.Name, pod.Spec.NodeName, ptrString(pod.Spec.RuntimeClassName))
	cp.selfView = s.execIn(t, &pod, `id; grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status; touch /written-by-the-test 2>&1 || true; ls -l /dev/kvm 2>&1 || true`)
	t.Logf("the conversion pod's own view of itself:\n%s", cp.selfView)
	go func() {
		defer close(cp.done)
		if err := s.streamLog(&pod, cp.logPath); err != nil {
			t.Logf("streaming the conversion log: %v", err)
		}
	}()
	return cp
}

// execIn runs a shell command in a pod's first container with kubectl exec
// and returns its output.
func (s *stack) execIn(t *testing.T, pod *corev1.Pod, script string) string {
	t.Helper()
	out, err := exec.CommandContext(s.ctx, s.env.Binary("kubectl"), "--kubeconfig", s.env.KubeconfigPath(),
		"exec", "-n", pod.Namespace, pod.Name, "-c", pod.Spec.Containers[0].Name, "--", "/bin/sh", "-c", script).CombinedOutput()
	require.NoError(t, err, "kubectl exec in %s: %s", pod.Name, out)
	return strings.TrimSpace(string(out))
}

// streamLog follows a pod's container log through the API server into
// path until the container ends.
func (s *stack) streamLog(pod *corev1.Pod, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	rc, err := s.kube.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{
		Container: pipeline.ConversionContainer, Follow: true}).Stream(context.WithoutCancel(s.ctx))
	if err != nil {
		return err
	}
	defer rc.Close()
	_, err = io.Copy(f, rc)
	return err
}

// wait waits for the log stream to end (the container ended).
func (cp *conversionPod) wait(t *testing.T) {
	t.Helper()
	select {
	case <-cp.done:
	case <-time.After(2 * time.Minute):
		assert.Fail(t, "the conversion log stream did not end 2 minutes after the migration moved on")
	}
}

// checkSelfView checks what the conversion pod saw of itself: the staging
// user 107 with no other group, no capability, no new privileges, seccomp
// filtering, and a read-only root.
func checkSelfView(t *testing.T, view string) {
	t.Helper()
	for _, want := range []string{"uid=107", "gid=107", "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000",
		"NoNewPrivs:\t1", "Seccomp:\t2", "Read-only file system"} {
		assert.Contains(t, view, want, "the conversion pod's view of itself")
	}
}

func ptrString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
