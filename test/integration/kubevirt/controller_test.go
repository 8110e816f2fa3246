//go:build integration

package kubevirt

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	"platform.example/vm-migration/test/framework"
)

// kubevirtNamespace is where virt-controller looks for its KubeVirt CR and
// takes its lease when it runs outside a pod (no service account
// namespace file).
const kubevirtNamespace = "kubevirt"

// watchFor is how long the test lets virt-controller run after it leads.
const watchFor = 30 * time.Second

var kubevirtGVR = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "kubevirts"}

// TestVirtControllerLeadsWithAKubeVirtCR runs virt-controller as a process
// against the control plane holding every generated CRD and a KubeVirt CR
// with emulation on, checks that it takes its lease and starts its
// controllers, and logs what it printed, so a reader sees what it waits for.
func TestVirtControllerLeadsWithAKubeVirtCR(t *testing.T) {
	dir := kubevirtDir(t)
	env := framework.Env(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	require.NoError(t, env.InstallCRDs(ctx, filepath.Join(dir, "crds")))

	cs := env.Kubernetes(t)
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kubevirtNamespace}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err, "creating namespace %s", kubevirtNamespace)
	}
	kv := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1",
		"kind":       "KubeVirt",
		"metadata":   map[string]any{"name": "kubevirt", "namespace": kubevirtNamespace},
		"spec": map[string]any{
			"configuration": map[string]any{
				"developerConfiguration": map[string]any{"useEmulation": true},
			},
		},
	}}
	_, err = env.Dynamic(t).Resource(kubevirtGVR).Namespace(kubevirtNamespace).Create(ctx, kv, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err, "creating the KubeVirt CR")
	}

	logPath := filepath.Join(t.TempDir(), "virt-controller.log")
	stop := startVirtController(t, filepath.Join(dir, "virt-controller"), env.KubeconfigPath(), logPath)
	defer stop()

	// Its lease names this host once it leads.
	host, err := os.Hostname()
	require.NoError(t, err)
	var holder string
	err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		lease, err := cs.CoordinationV1().Leases(kubevirtNamespace).Get(ctx, "virt-controller", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if lease.Spec.HolderIdentity != nil {
			holder = *lease.Spec.HolderIdentity
		}
		return holder == host, nil
	})
	require.NoError(t, err, "virt-controller took no lease (holder %q); its log:\n%s", holder, framework.TailBytes(logPath, 8000))

	time.Sleep(watchFor)
	log := readLog(t, logPath)
	require.Contains(t, log, "STARTING controllers", "virt-controller led but started no controllers; its log:\n%s", framework.TailBytes(logPath, 8000))
	t.Logf("virt-controller leads as %s; the last of its log %s after:\n%s", holder, watchFor, framework.TailBytes(logPath, 6000))
	t.Logf("distinct messages it logged:\n%s", distinctMessages(log))
}

// startVirtController starts virt-controller with kubeconfig, its output in
// logPath, its metrics on a free loopback port, and returns a function that
// stops it.
func startVirtController(t *testing.T, binary, kubeconfig, logPath string) func() {
	t.Helper()
	port := freePort(t)
	out, err := os.Create(logPath)
	require.NoError(t, err)
	cmd := exec.Command(binary,
		"--kubeconfig", kubeconfig,
		"--listen", "127.0.0.1",
		"--port", fmt.Sprint(port),
		"--launcher-image", "localhost/kubevirt/virt-launcher:test",
	)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start(), "starting %s", binary)
	return func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		_ = out.Close()
	}
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// readLog returns the whole log file.
func readLog(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

// distinctMessages returns the "msg" values of KubeVirt's JSON log lines,
// each once, in the order first seen, so a long log reads as what happened.
func distinctMessages(log string) string {
	seen := map[string]bool{}
	var msgs []string
	for _, line := range strings.Split(log, "\n") {
		i := strings.Index(line, `"msg":"`)
		if i < 0 {
			continue
		}
		msg := line[i+len(`"msg":"`):]
		if j := strings.Index(msg, `"`); j >= 0 {
			msg = msg[:j]
		}
		if len(msg) > 160 {
			msg = msg[:160]
		}
		if !seen[msg] {
			seen[msg] = true
			msgs = append(msgs, msg)
		}
	}
	return strings.Join(msgs, "\n")
}
