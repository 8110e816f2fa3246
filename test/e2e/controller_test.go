//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"platform.example/vm-migration/test/framework"
	"platform.example/vm-migration/test/images"
)

// The controller as it ships: manifests/ applied with kubectl apply -k
// from a local overlay (writeOverlay) that changes the image references
// and adds the flags below; its ServiceAccount, RBAC, leader election (two
// replicas), probes and security context are manifests/'s own.
const (
	controllerDeployment = "migration-controller"
	controllerContainer  = "controller"
	controllerLease      = "vm-migration-controller"
	// rolloutAnnotation on the pod template starts a new rollout for each
	// test, so every test gets fresh controller processes (metrics,
	// caches) with the flags it asks for.
	rolloutAnnotation = "e2e.platform.example/test"
)

// suiteFlags are the flags the e2e overlay adds to the shipped Deployment:
// faster polling than the production defaults (10 s and 30 s), so that a
// migration of a few MiB takes seconds; the simulated conversion image as
// the default one; and the real conversion image allowed per migration
// (the real-guest tests name it).
var suiteFlags = []string{
	"--poll-interval=1s", "--wait-interval=2s",
	"--conversion-image=" + conversionImage,
	"--allowed-conversion-images=" + realConversionImage,
}

// suite is what TestMain's first test sets up once: the images on the node
// and the controller's install.
var suite struct {
	once sync.Once
	err  error
	// baseArgs are the controller container's arguments after the install.
	baseArgs []string
}

// setupSuite builds and imports the images and installs the controller,
// once per test binary; every stack checks its outcome.
func setupSuite(t *testing.T, env *framework.Environment) {
	t.Helper()
	suite.once.Do(func() { suite.err = installSuite(env) })
	require.NoError(t, suite.err, "setting up the suite: images on the node and the controller's install")
}

// installSuite builds the controller's image (as make image does), the
// simulated conversion image and the launcher image the KubeVirt stand-in
// runs instances with, imports them into the node, and applies the
// overlay of manifests/.
func installSuite(env *framework.Environment) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	ctrl, err := images.Controller(ctx, transferImage)
	if err != nil {
		return err
	}
	conv, err := images.SimulatedConversion(ctx, conversionImage)
	if err != nil {
		return err
	}
	launcher, err := images.Launcher(ctx, launcherImage)
	if err != nil {
		return err
	}
	for _, img := range []*framework.BuiltImage{ctrl, conv, launcher} {
		if err := env.ImportImage(ctx, img.Tarball); err != nil {
			return fmt.Errorf("importing %s: %w", img.Reference, err)
		}
	}
	fmt.Fprintf(os.Stderr, "e2e: images %s, %s and %s built and imported in %s\n", ctrl.Reference, conv.Reference, launcher.Reference,
		time.Since(start).Round(time.Millisecond))
	if realKubeVirt() {
		what, err := installKubeVirt(ctx, env)
		if err != nil {
			return fmt.Errorf("installing KubeVirt's control plane: %w", err)
		}
		fmt.Fprintf(os.Stderr, "e2e: %s\n", what)
	}
	if realCDI() {
		what, err := installCDI(ctx, env)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "e2e: %s\n", what)
	}
	overlay := framework.RepoPath("_output/e2e/overlay")
	if err := os.MkdirAll(overlay, 0o755); err != nil {
		return err
	}
	if err := writeOverlay(overlay, transferImage, suiteFlags); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, env.Binary("kubectl"), "--kubeconfig", env.KubeconfigPath(),
		"apply", "-k", overlay).CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubectl apply -k of the e2e overlay of manifests/: %w: %s", err, out)
	}
	kube, err := kubernetes.NewForConfig(env.Config())
	if err != nil {
		return err
	}
	dep, err := kube.AppsV1().Deployments(controllerNamespace).Get(ctx, controllerDeployment, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading the controller's Deployment: %w", err)
	}
	suite.baseArgs = containerOf(dep).Args
	return nil
}

// writeOverlay writes a kustomization into dir that builds on manifests/
// and changes only the controller's image reference and adds flags (the
// kustomization names manifests/ by a relative path).
func writeOverlay(dir, image string, flags []string) error {
	rel, err := filepath.Rel(dir, framework.RepoPath("manifests"))
	if err != nil {
		return err
	}
	repo, tag, _ := strings.Cut(image, ":")
	var patch strings.Builder
	for _, f := range flags {
		fmt.Fprintf(&patch, "      - op: add\n        path: /spec/template/spec/containers/0/args/-\n        value: %q\n", f)
	}
	k := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - %s
images:
  - name: platform.example/vm-migration-controller
    newName: %s
    newTag: %s
patches:
  - target:
      kind: Deployment
      name: %s
    patch: |-
%s`, rel, repo, tag, controllerDeployment, patch.String())
	return os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o600)
}

// containerOf is the controller's container of a Deployment.
func containerOf(dep *appsv1.Deployment) *corev1.Container {
	for i := range dep.Spec.Template.Spec.Containers {
		if c := &dep.Spec.Template.Spec.Containers[i]; c.Name == controllerContainer {
			return c
		}
	}
	return &corev1.Container{}
}

// rolloutController gives the Deployment the suite's arguments plus
// extra, the shipped replica count, and a pod template annotation naming
// the test, and waits until the rollout completed and a new pod leads.
func (s *stack) rolloutController(extra []string) {
	s.t.Helper()
	args := append(append([]string{}, suite.baseArgs...), extra...)
	patch := map[string]any{"spec": map[string]any{
		"replicas": 2,
		"template": map[string]any{
			"metadata": map[string]any{"annotations": map[string]string{rolloutAnnotation: s.t.Name() + "@" + time.Now().Format(time.RFC3339Nano)}},
			"spec":     map[string]any{"containers": []map[string]any{{"name": controllerContainer, "args": args}}},
		},
	}}
	s.patchDeployment(patch)
	pods := s.waitRollout(2)
	s.waitLeaderAmong(pods)
}

// scaleControllerToZero stops the controller's Deployment (its pods gone)
// for tests that run the controller as processes of their own.
func (s *stack) scaleControllerToZero() {
	s.t.Helper()
	s.patchDeployment(map[string]any{"spec": map[string]any{"replicas": 0}})
	s.waitRollout(0)
}

func (s *stack) patchDeployment(patch map[string]any) {
	s.t.Helper()
	b, err := json.Marshal(patch)
	require.NoError(s.t, err)
	_, err = s.kube.AppsV1().Deployments(controllerNamespace).Patch(s.ctx, controllerDeployment, types.StrategicMergePatchType, b, metav1.PatchOptions{})
	require.NoError(s.t, err, "patching the controller's Deployment")
}

// waitRollout waits until the Deployment's latest generation is rolled out
// with n ready replicas and no pod of an older template is left, and
// returns the names of its pods.
func (s *stack) waitRollout(n int32) []string {
	s.t.Helper()
	var names []string
	var last string
	err := wait.PollUntilContextTimeout(s.ctx, 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		dep, err := s.kube.AppsV1().Deployments(controllerNamespace).Get(ctx, controllerDeployment, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		st := dep.Status
		last = fmt.Sprintf("observed generation %d of %d, %d updated, %d ready, %d in all", st.ObservedGeneration, dep.Generation, st.UpdatedReplicas, st.ReadyReplicas, st.Replicas)
		if st.ObservedGeneration < dep.Generation || st.UpdatedReplicas != n || st.ReadyReplicas != n || st.Replicas != n {
			return false, nil
		}
		pods, err := s.kube.CoreV1().Pods(controllerNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=vm-migration-controller"})
		if err != nil {
			return false, nil
		}
		names = names[:0]
		for _, p := range pods.Items {
			names = append(names, p.Name)
		}
		return len(pods.Items) == int(n), nil
	})
	require.NoError(s.t, err, "the controller's Deployment did not roll out %d replicas: %s", n, last)
	sort.Strings(names)
	return names
}

// waitLeaderAmong waits until one of pods holds the controller's Lease
// (an identity is the pod's host name, then an underscore).
func (s *stack) waitLeaderAmong(pods []string) string {
	s.t.Helper()
	var leader string
	err := wait.PollUntilContextTimeout(s.ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := s.kube.CoordinationV1().Leases(controllerNamespace).Get(ctx, controllerLease, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		holder := ptr.Deref(l.Spec.HolderIdentity, "")
		for _, p := range pods {
			if strings.HasPrefix(holder, p+"_") {
				leader = p
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(s.t, err, "no pod of %v leads", pods)
	return leader
}

// leaderPod is the controller pod holding the Lease now.
func (s *stack) leaderPod() *corev1.Pod {
	s.t.Helper()
	l, err := s.kube.CoordinationV1().Leases(controllerNamespace).Get(s.ctx, controllerLease, metav1.GetOptions{})
	require.NoError(s.t, err, "reading the controller's Lease")
	name, _, ok := strings.Cut(ptr.Deref(l.Spec.HolderIdentity, ""), "_")
	require.True(s.t, ok, "the Lease's holder %q names no pod", ptr.Deref(l.Spec.HolderIdentity, ""))
	pod, err := s.kube.CoreV1().Pods(controllerNamespace).Get(s.ctx, name, metav1.GetOptions{})
	require.NoError(s.t, err, "reading the leading controller pod %s", name)
	return pod
}

// controllerMetricsURL is the base URL of the leading controller's
// metrics server (the machine reaches the pods' network through the node).
func (s *stack) controllerMetricsURL() string {
	s.t.Helper()
	pod := s.leaderPod()
	require.NotEmpty(s.t, pod.Status.PodIP, "the leading controller pod %s has no IP", pod.Name)
	return "http://" + pod.Status.PodIP + ":8080"
}
