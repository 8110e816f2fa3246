//go:build integration

package node

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"platform.example/vm-migration/test/framework"
	"platform.example/vm-migration/test/integration/node/probereport"
)

const (
	probePackage = "platform.example/vm-migration/test/integration/node/podprobe"
	probeImage   = "platform.example/vm-migration/podprobe:test"
	// probeUser and probeFSGroup are the probe pod's identity.
	probeUser    = 65532
	probeFSGroup = 2000
)

var (
	importOnce sync.Once
	importErr  error
)

// importProbe builds the probe image and imports it into the node, once
// per suite.
func importProbe(t *testing.T, env *framework.Environment) {
	t.Helper()
	importOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		start := time.Now()
		img, err := framework.BuildGoImage(ctx, framework.GoImage{Package: probePackage, Reference: probeImage})
		if err != nil {
			importErr = err
			return
		}
		built := time.Since(start)
		importErr = env.ImportImage(ctx, img.Tarball)
		t.Logf("probe image built in %s (cached: %t), imported in %s", built.Round(time.Millisecond), img.Cached, (time.Since(start) - built).Round(time.Millisecond))
	})
	require.NoError(t, importErr, "building and importing the probe image")
}

// restrictedNamespace is a fresh namespace whose PodSecurity admission
// enforces the restricted level.
func restrictedNamespace(t *testing.T, env *framework.Environment, cs kubernetes.Interface) string {
	t.Helper()
	ns := env.Namespace(t)
	ctx := context.Background()
	obj, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	require.NoError(t, err, "reading namespace %s", ns)
	obj.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	obj.Labels["pod-security.kubernetes.io/enforce-version"] = "latest"
	_, err = cs.CoreV1().Namespaces().Update(ctx, obj, metav1.UpdateOptions{})
	require.NoError(t, err, "labelling namespace %s restricted", ns)
	return ns
}

// restrictedContainer is the container security context PodSecurity
// restricted asks for, plus a read-only root.
func restrictedContainer() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

func restrictedPod() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To(int64(probeUser)),
		RunAsGroup:     ptr.To(int64(probeUser)),
		FSGroup:        ptr.To(int64(probeFSGroup)),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// hostServer serves a fixed answer on the environment's host address, the
// way vcsim and webhooks in the test process serve pods.
func hostServer(t *testing.T, env *framework.Environment, answer string) string {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(env.HostAddress(), "0"))
	require.NoError(t, err, "listening on the host address %s", env.HostAddress())
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, answer) }), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + l.Addr().String() + "/"
}

// localClaim creates a local volume and a claim bound to it, and waits for
// Bound (a pod on an unbound claim makes the scheduler back off).
func localClaim(t *testing.T, env *framework.Environment, cs kubernetes.Interface, ns string) (*corev1.PersistentVolume, string) {
	t.Helper()
	ctx := context.Background()
	pv, err := env.CreateLocalVolume(ctx, ns+"-data", "64Mi")
	require.NoError(t, err, "creating a local volume")
	t.Cleanup(func() {
		_ = cs.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
	})
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(framework.NodeStorageClass),
			VolumeName:       pv.Name,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")}},
		},
	}
	_, err = cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{})
	require.NoError(t, err, "creating claim")
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		c, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{})
		return err == nil && c.Status.Phase == corev1.ClaimBound, nil
	})
	require.NoError(t, err, "claim data bound to %s", pv.Name)
	return pv, "data"
}

// waitPod waits until done accepts the pod, and returns it.
func waitPod(t *testing.T, cs kubernetes.Interface, ns, name string, timeout time.Duration, what string, done func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = p
		return done(p), nil
	})
	require.NoError(t, err, "pod %s/%s %s; last status: %+v", ns, name, what, statusOf(last))
	return last
}

func statusOf(p *corev1.Pod) any {
	if p == nil {
		return nil
	}
	return p.Status
}

// TestRestrictedPodOnTheNode runs the probe, built here, in a namespace
// enforcing PodSecurity restricted, with an emptyDir and a local volume
// with fsGroup, and checks what it saw of itself: its numeric identity
// and the fsGroup, no capabilities, no new privileges, seccomp filtering,
// a read-only root, writable volumes (the local one given to the fsGroup
// by the kubelet), the API server through the kubernetes Service with its
// own token, and a server of the test process at the host address. Its
// report also comes back through kubectl logs.
func TestRestrictedPodOnTheNode(t *testing.T) {
	env := framework.Env(t)
	cs := env.Kubernetes(t)
	importProbe(t, env)
	ns := restrictedNamespace(t, env, cs)
	ctx := context.Background()
	_, err := cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "probe-view", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "default", Namespace: ns}},
	}, metav1.CreateOptions{})
	require.NoError(t, err, "letting the default ServiceAccount view the namespace")
	hostURL := hostServer(t, env, "hello from the test process")
	pv, claim := localClaim(t, env, cs, ns)

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy:   corev1.RestartPolicyNever,
			SecurityContext: restrictedPod(),
			Containers: []corev1.Container{{
				Name: "probe", Image: probeImage, ImagePullPolicy: corev1.PullNever,
				SecurityContext: restrictedContainer(),
				Env:             []corev1.EnvVar{{Name: "EMPTYDIR", Value: "/scratch"}, {Name: "VOLUME", Value: "/data"}, {Name: "HOST_URL", Value: hostURL}},
				VolumeMounts:    []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}, {Name: "data", MountPath: "/data"}},
			}},
			Volumes: []corev1.Volume{
				{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}},
			},
		},
	}
	start := time.Now()
	_, err = cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err, "creating the probe pod (PodSecurity restricted must admit it)")
	done := waitPod(t, cs, ns, "probe", time.Minute, "ends", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	})
	t.Logf("probe pod created to %s in %s", done.Status.Phase, time.Since(start).Round(time.Millisecond))
	require.Equal(t, corev1.PodSucceeded, done.Status.Phase, "probe pod phase; status %+v", done.Status)
	require.Len(t, done.Status.ContainerStatuses, 1, "container statuses")
	term := done.Status.ContainerStatuses[0].State.Terminated
	require.NotNil(t, term, "the probe's terminated state")
	var r probereport.Report
	require.NoError(t, json.Unmarshal([]byte(term.Message), &r), "the probe's termination message %q", term.Message)
	t.Logf("probe report: %s", term.Message)

	ids := fmt.Sprintf("%d %d %d %d", probeUser, probeUser, probeUser, probeUser)
	assert.Equal(t, ids, r.Status["Uid"], "Uid (real, effective, saved, fs)")
	assert.Equal(t, ids, r.Status["Gid"], "Gid (real, effective, saved, fs)")
	assert.Contains(t, strings.Fields(r.Status["Groups"]), fmt.Sprint(probeFSGroup), "supplementary groups, want the fsGroup")
	assert.Equal(t, "0000000000000000", r.Status["CapEff"], "effective capabilities, want none")
	assert.Equal(t, "0000000000000000", r.Status["CapPrm"], "permitted capabilities, want none")
	assert.Equal(t, "1", r.Status["NoNewPrivs"], "NoNewPrivs")
	assert.Equal(t, "2", r.Status["Seccomp"], "Seccomp mode, want 2 (filter: RuntimeDefault)")
	assert.Contains(t, r.RootWrite, "read-only file system", "a write to / must be refused")
	assert.Equal(t, "ok", r.EmptyDirWrite, "write to the emptyDir")
	assert.Equal(t, "ok", r.VolumeWrite, "write to the local volume")
	assert.Equal(t, uint32(probeFSGroup), r.VolumeGID, "the local volume's group, want the fsGroup the kubelet applied")
	assert.Empty(t, r.APIError, "listing ConfigMaps through the kubernetes Service")
	assert.Contains(t, r.ConfigMaps, "kube-root-ca.crt", "ConfigMaps the pod listed")
	assert.Equal(t, "hello from the test process", r.HostAnswer, "the answer of the server at the host address")

	// The bytes are in the volume's folder on the machine, with the group.
	fi, err := os.Stat(filepath.Join(pv.Spec.Local.Path, "probe"))
	require.NoError(t, err, "the file the probe wrote into the local volume")
	assert.Equal(t, uint32(probeFSGroup), fi.Sys().(*syscall.Stat_t).Gid, "group of the probe's file")

	out, err := exec.Command(env.Binary("kubectl"), "--kubeconfig", env.KubeconfigPath(), "logs", "-n", ns, "probe").CombinedOutput()
	require.NoError(t, err, "kubectl logs: %s", out)
	assert.Equal(t, strings.TrimSpace(term.Message), strings.TrimSpace(string(out)), "kubectl logs, want the probe's report")

	// PodSecurity admission judges pods in the namespace: one that allows
	// privilege escalation is refused.
	bad := pod.DeepCopy()
	bad.Name = "escalating"
	bad.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = ptr.To(true)
	_, err = cs.CoreV1().Pods(ns).Create(ctx, bad, metav1.CreateOptions{})
	require.Error(t, err, "a pod allowing privilege escalation in a restricted namespace")
	assert.True(t, apierrors.IsForbidden(err), "error %v, want Forbidden by PodSecurity", err)
	assert.Contains(t, err.Error(), "violates PodSecurity", "the refusal")
}

// TestKVMRuntimeClassOffersTheDevice: where the machine has /dev/kvm, a
// restricted pod of the kvm RuntimeClass (no capabilities, seccomp
// RuntimeDefault, non-root) opens it and reads its API version; a pod
// without the class has no /dev/kvm.
func TestKVMRuntimeClassOffersTheDevice(t *testing.T) {
	env := framework.Env(t)
	if env.RuntimeClassKVM() == "" {
		t.Skip("this machine has no /dev/kvm: no kvm RuntimeClass")
	}
	cs := env.Kubernetes(t)
	importProbe(t, env)
	ns := restrictedNamespace(t, env, cs)
	ctx := context.Background()
	for name, class := range map[string]*string{"with-kvm": ptr.To(env.RuntimeClassKVM()), "without": nil} {
		pod := neverPullPod(ns, name, probeImage)
		pod.Spec.RuntimeClassName = class
		pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "KVM", Value: "1"}, {Name: "EMPTYDIR", Value: "/tmp"}}
		_, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		require.NoError(t, err, "creating pod %s", name)
	}
	reports := map[string]probereport.Report{}
	for _, name := range []string{"with-kvm", "without"} {
		ended := waitPod(t, cs, ns, name, time.Minute, "ends", func(p *corev1.Pod) bool {
			return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
		})
		require.Equal(t, corev1.PodSucceeded, ended.Status.Phase, "pod %s; status %+v", name, ended.Status)
		var r probereport.Report
		require.NoError(t, json.Unmarshal([]byte(ended.Status.ContainerStatuses[0].State.Terminated.Message), &r), "the report of %s", name)
		reports[name] = r
	}
	t.Logf("/dev/kvm with the kvm RuntimeClass: %s; without: %s", reports["with-kvm"].KVM, reports["without"].KVM)
	assert.Equal(t, "api 12", reports["with-kvm"].KVM, "KVM_GET_API_VERSION in a kvm pod")
	assert.Equal(t, "0000000000000000", reports["with-kvm"].Status["CapEff"], "capabilities of the kvm pod")
	assert.Contains(t, reports["without"].KVM, "no such file", "/dev/kvm in a pod without the class")
}

// neverPullPod is a pod whose image must already be on the node.
func neverPullPod(ns, name, image string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy:   corev1.RestartPolicyNever,
			SecurityContext: restrictedPod(),
			Containers: []corev1.Container{{
				Name: "main", Image: image, ImagePullPolicy: corev1.PullNever, SecurityContext: restrictedContainer(),
			}},
		},
	}
}

func waitingReason(p *corev1.Pod) string {
	for _, s := range p.Status.ContainerStatuses {
		if s.State.Waiting != nil {
			return s.State.Waiting.Reason
		}
	}
	return ""
}

// TestImagesNotOnTheNodeAreNeverPulled: with imagePullPolicy Never, a
// reference that was never imported, and one imported then removed with
// RemoveImage, leave the pod waiting with ErrImageNeverPull, as on a real
// cluster.
func TestImagesNotOnTheNodeAreNeverPulled(t *testing.T) {
	env := framework.Env(t)
	cs := env.Kubernetes(t)
	ns := restrictedNamespace(t, env, cs)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	removed := "platform.example/vm-migration/podprobe:removed"
	img, err := framework.BuildGoImage(ctx, framework.GoImage{Package: probePackage, Reference: removed})
	require.NoError(t, err, "building the image to remove")
	require.NoError(t, env.ImportImage(ctx, img.Tarball), "importing %s", removed)
	require.NoError(t, env.RemoveImage(ctx, removed), "removing %s", removed)

	for name, image := range map[string]string{"never-imported": "platform.example/vm-migration/never-imported:v1", "removed": removed} {
		_, err := cs.CoreV1().Pods(ns).Create(ctx, neverPullPod(ns, name, image), metav1.CreateOptions{})
		require.NoError(t, err, "creating pod %s", name)
		waitPod(t, cs, ns, name, time.Minute, "waits with ErrImageNeverPull", func(p *corev1.Pod) bool {
			return waitingReason(p) == "ErrImageNeverPull"
		})
	}
}

// TestWorkloadsRunOnTheNode: a Deployment of the sandbox image becomes
// Available, kubectl exec reaches into its container, and a Job of the
// probe completes, through the real controller manager, scheduler and
// kubelet.
func TestWorkloadsRunOnTheNode(t *testing.T) {
	env := framework.Env(t)
	cs := env.Kubernetes(t)
	importProbe(t, env)
	ns := restrictedNamespace(t, env, cs)
	ctx := context.Background()
	labels := map[string]string{"app": "waiter"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "waiter", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       neverPullPod(ns, "", framework.SandboxImage).Spec,
			},
		},
	}
	dep.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
	start := time.Now()
	_, err := cs.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{})
	require.NoError(t, err, "creating the deployment")
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, "waiter", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range d.Status.Conditions {
			if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue && d.Status.AvailableReplicas == 2 {
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err, "deployment waiter Available with 2 replicas")
	t.Logf("deployment created to Available (2 replicas) in %s", time.Since(start).Round(time.Millisecond))

	// exec goes through the API server to the kubelet (its client
	// certificate), containerd and runc in the container: the image has no
	// such command, and runc inside the container says so.
	out, err := exec.Command(env.Binary("kubectl"), "--kubeconfig", env.KubeconfigPath(), "exec", "-n", ns, "deploy/waiter", "--", "/no-such-command").CombinedOutput()
	require.Error(t, err, "kubectl exec of a missing command")
	assert.Contains(t, string(out), `exec: "/no-such-command": stat /no-such-command: no such file or directory`, "kubectl exec's answer, want runc's from inside the container")

	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To(int32(0)),
			Template:     corev1.PodTemplateSpec{Spec: neverPullPod(ns, "", probeImage).Spec},
		},
	}
	start = time.Now()
	_, err = cs.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
	require.NoError(t, err, "creating the job")
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		j, err := cs.BatchV1().Jobs(ns).Get(ctx, "probe", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range j.Status.Conditions {
			if c.Status != corev1.ConditionTrue {
				continue
			}
			if c.Type == batchv1.JobFailed {
				return false, fmt.Errorf("job failed: %s", c.Message)
			}
			if c.Type == batchv1.JobComplete {
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err, "job probe Complete")
	t.Logf("job created to Complete in %s", time.Since(start).Round(time.Millisecond))
}
