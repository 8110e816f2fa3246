//go:build integration

package controlplane

import (
	"context"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"platform.example/vm-migration/test/framework"
)

func TestMain(m *testing.M) {
	framework.Run(m, framework.WithControllerManager())
}

// TestJobControllerAndGarbageCollector checks that kube-controller-manager
// runs: the Job controller creates a Pod for a Job, and deleting the Job
// lets the garbage collector delete the Pod.
func TestJobControllerAndGarbageCollector(t *testing.T) {
	env := framework.Env(t)
	ns := env.Namespace(t)
	cs := env.Kubernetes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "transfer", Namespace: ns},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "c", Image: "registry.example.com/none:1"}},
		}}},
	}
	created, err := cs.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
	require.NoError(t, err, "creating the Job")
	// The polls below run until ctx, the test's 90s, ends: a bound shared
	// by the whole test, which is why they are not require.Eventually.
	selector := "batch.kubernetes.io/controller-uid=" + string(created.UID)
	var podName string
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil || len(pods.Items) == 0 {
			return false, nil
		}
		podName = pods.Items[0].Name
		return true, nil
	})
	require.NoError(t, err, "the Job controller created no Pod")

	bg := metav1.DeletePropagationBackground
	require.NoError(t, cs.BatchV1().Jobs(ns).Delete(ctx, "transfer", metav1.DeleteOptions{PropagationPolicy: &bg}), "deleting the Job")
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, podName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		// Without a kubelet, a Pod with a deletion timestamp is never
		// removed by a node; the garbage collector's delete is the
		// evidence.
		return err == nil && p.DeletionTimestamp != nil, nil
	})
	require.NoError(t, err, "the garbage collector did not delete Pod %s", podName)
}

// TestNamespaceDeletion checks that the namespace controller finishes
// deleting a namespace, as the framework's per-test namespaces expect when
// the controller manager runs.
func TestNamespaceDeletion(t *testing.T) {
	env := framework.Env(t)
	cs := env.Kubernetes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "deleted-namespace"}}
	_, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	require.NoError(t, err, "creating namespace %s", ns.Name)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: ns.Name}}
	_, err = cs.CoreV1().ConfigMaps(ns.Name).Create(ctx, cm, metav1.CreateOptions{})
	require.NoError(t, err, "creating a ConfigMap in %s", ns.Name)
	require.NoError(t, cs.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}), "deleting namespace %s", ns.Name)
	// Until ctx, the test's 90s, ends.
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	require.NoError(t, err, "namespace %s not deleted", ns.Name)
}

// TestProcessesAndKubeconfig checks the framework's processes (each leads
// its own process group) and its kubeconfig.
func TestProcessesAndKubeconfig(t *testing.T) {
	env := framework.Env(t)
	pids := env.PIDs()
	for _, name := range []string{framework.BinaryEtcd, framework.BinaryKubeAPIServer, framework.BinaryControllerManager} {
		if !assert.Contains(t, pids, name, "%s not running", name) {
			continue
		}
		pid := pids[name]
		pgid, err := syscall.Getpgid(pid)
		if !assert.NoError(t, err, "%s (pid %d): its process group", name, pid) {
			continue
		}
		assert.Equal(t, pid, pgid, "%s (pid %d): its process group, want its own", name, pid)
		assert.NotEqual(t, syscall.Getpgrp(), pgid, "%s shares the test binary's process group", name)
	}
	_, err := os.Stat(env.KubeconfigPath())
	require.NoError(t, err, "kubeconfig")
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed")
	}
	out, err := exec.Command(kubectl, "--kubeconfig", env.KubeconfigPath(), "auth", "whoami", "-o", "jsonpath={.status.userInfo.groups}").CombinedOutput()
	if assert.NoError(t, err, "kubectl auth whoami with the kubeconfig:\n%s", out) {
		assert.Contains(t, string(out), "system:masters", "kubectl auth whoami with the kubeconfig: the groups")
	}
}

// TestDeliberateFailure fails, panics or hangs when
// FRAMEWORK_DELIBERATE_FAILURE is fail, panic or hang, to show that no
// etcd or kube-apiserver outlives a failing run (pgrep afterwards). It
// skips otherwise.
func TestDeliberateFailure(t *testing.T) {
	framework.Env(t)
	switch os.Getenv("FRAMEWORK_DELIBERATE_FAILURE") {
	case "fail":
		require.FailNow(t, "deliberate failure")
	case "panic":
		panic("deliberate panic")
	case "hang":
		// go test -timeout ends the binary from the testing package's timer.
		select {}
	default:
		t.Skip("set FRAMEWORK_DELIBERATE_FAILURE=fail|panic|hang to check teardown of failing runs")
	}
}
