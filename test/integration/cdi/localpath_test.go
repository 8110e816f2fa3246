//go:build integration

package cdi

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/steps/pipeline"
	"platform.example/vm-migration/test/builders"
	"platform.example/vm-migration/test/framework"
	"platform.example/vm-migration/test/framework/cdi"
	"platform.example/vm-migration/test/framework/localpath"
)

var storageProfiles = schema.GroupVersionResource{Group: "cdi.kubevirt.io", Version: "v1beta1", Resource: "storageprofiles"}

// localPathRoot is the folder on the node that holds the provisioner's
// volumes, and localPathBuild its build, set once it is installed.
var (
	localPathRoot  string
	localPathBuild *localpath.Build
)

// installLocalPath imports the provisioner's images and installs it, when
// its build is named (LOCAL_PATH_DIR: make test-cdi sets it).
func installLocalPath(ctx context.Context, t *testing.T, env *framework.Environment) error {
	dir := os.Getenv(localpath.EnvDir)
	if dir == "" {
		return nil
	}
	b, root, err := localpath.InstallOnNode(ctx, env, dir, t.Logf)
	if err != nil {
		return err
	}
	localPathRoot, localPathBuild = root, b
	return nil
}

// localPathEnv is cdiEnv for the tests of the real storage: it skips them
// without the provisioner's build.
func localPathEnv(t *testing.T) *framework.Environment {
	t.Helper()
	if os.Getenv(localpath.EnvDir) == "" {
		t.Skipf("%s is not set: run make test-cdi (it builds local-path-provisioner)", localpath.EnvDir)
	}
	env := cdiEnv(t)
	require.NotEmpty(t, localPathRoot, "local-path-provisioner installed")
	return env
}

// TestLocalPathVolumesAreMadeAndRemoved: a claim of the local-path class
// waits for its first pod; the provisioner's helper pod then makes its
// folder on the node and the provisioner a local volume on it, pinned to
// the node, which the pod (restricted: user 107, fsGroup 107) writes;
// deleting the claim deletes the volume and, through the helper pod's
// teardown, the folder.
func TestLocalPathVolumesAreMadeAndRemoved(t *testing.T) {
	env := localPathEnv(t)
	cs := env.Kubernetes(t)
	ns := env.Namespace(t)
	ctx := context.Background()

	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(localpath.StorageClass),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("16Mi")}},
		},
	}
	_, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim, metav1.CreateOptions{})
	require.NoError(t, err, "creating the claim")
	time.Sleep(2 * time.Second)
	c, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.ClaimPending, c.Status.Phase, "a claim of a WaitForFirstConsumer class waits for its pod")

	pod := writerPod(ns, "writer", "data", "echo migrated > /data/file && id -u > /data/user")
	_, err = cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err, "creating the writer pod")
	waitPodSucceeded(t, cs, ns, "writer", 2*time.Minute)

	c, err = cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, corev1.ClaimBound, c.Status.Phase, "the claim once its pod ran")
	pv, err := cs.CoreV1().PersistentVolumes().Get(ctx, c.Spec.VolumeName, metav1.GetOptions{})
	require.NoError(t, err, "the claim's volume")
	assert.Equal(t, localpath.Provisioner, pv.Annotations["pv.kubernetes.io/provisioned-by"], "who made the volume")
	require.NotNil(t, pv.Spec.Local, "a local volume (the class's defaultVolumeType), so the kubelet applies fsGroup")
	assert.True(t, strings.HasPrefix(pv.Spec.Local.Path, localPathRoot+"/"), "volume folder %s under %s", pv.Spec.Local.Path, localPathRoot)
	assert.NotNil(t, pv.Spec.NodeAffinity, "the volume is pinned to the node")
	got, err := os.ReadFile(filepath.Join(pv.Spec.Local.Path, "file"))
	require.NoError(t, err, "the pod's file on the node")
	assert.Equal(t, "migrated\n", string(got))
	user, _ := os.ReadFile(filepath.Join(pv.Spec.Local.Path, "user"))
	assert.Equal(t, "107\n", string(user), "the pod ran as its own user")

	require.NoError(t, cs.CoreV1().Pods(ns).Delete(ctx, "writer", metav1.DeleteOptions{}))
	require.NoError(t, cs.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "data", metav1.DeleteOptions{}))
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	require.NoError(t, err, "the volume deleted with its claim")
	_, err = os.Stat(pv.Spec.Local.Path)
	assert.True(t, os.IsNotExist(err), "the volume's folder removed by the teardown (stat: %v)", err)
}

// TestRenderedDataVolumeClonesThroughRealCDI: the DataVolume the
// controller renders for a disk (pipeline.RenderDataVolumes: a clone of
// the disk's staging claim, spec.storage without a size, content type
// kubevirt, bound at once) into the local-path class is admitted by CDI's
// webhooks and completed by CDI's controller with the strategy it chose
// for the class, with CDI's own pods on the node, and the target holds
// the staged bytes. local-path is a provisioner CDI does not know: its
// StorageProfile has no claim property sets, so a mapping that names no
// access modes is first refused by CDI in its own words, until the
// profile says what the class supports, as a cluster's admin sets it.
func TestRenderedDataVolumeClonesThroughRealCDI(t *testing.T) {
	env := localPathEnv(t)
	cs := env.Kubernetes(t)
	dc := env.Dynamic(t)
	ns := env.Namespace(t)
	ctx := context.Background()

	m := builders.Migration(builders.InNamespace(ns), builders.DefaultStorage(localpath.StorageClass), builders.Reached(v1alpha1.PhaseCreatingVM))
	m.Status.Disks = m.Status.Disks[:1]
	disk := m.Status.Disks[0]

	// The staging claim as the transfer leaves it: the disk's bytes in
	// disk.img of a Filesystem claim (here imported by CDI from HTTP).
	image := make([]byte, imageSize)
	_, err := rand.Read(image)
	require.NoError(t, err, "making the disk's bytes")
	want := sha256.Sum256(image)
	srv := serveImage(t, env, image)
	_, err = dc.Resource(dataVolumes).Namespace(ns).Create(ctx, dataVolumeOf(ns, disk.StagingClaim, srv.url, "8Mi", localpath.StorageClass), metav1.CreateOptions{})
	require.NoError(t, err, "creating the staging claim's import")
	waitDataVolume(t, dc, cs, ns, disk.StagingClaim, 4*time.Minute)

	profile, err := dc.Resource(storageProfiles).Get(ctx, localpath.StorageClass, metav1.GetOptions{})
	require.NoError(t, err, "CDI's StorageProfile of the class")
	sets, _, _ := unstructured.NestedSlice(profile.Object, "status", "claimPropertySets")
	strategy, _, _ := unstructured.NestedString(profile.Object, "status", "cloneStrategy")
	t.Logf("StorageProfile %s as CDI computed it: provisioner %v, claimPropertySets %v, cloneStrategy %q", localpath.StorageClass,
		nestedValue(profile, "status", "provisioner"), sets, strategy)
	assert.Empty(t, sets, "CDI knows no claim properties of %s", localpath.Provisioner)

	dvs, err := pipeline.RenderDataVolumes(m, nil)
	require.NoError(t, err, "rendering the DataVolume")
	rendered := toUnstructured(t, dvs[0])
	_, err = dc.Resource(dataVolumes).Namespace(ns).Create(ctx, rendered, metav1.CreateOptions{})
	require.NoError(t, err, "CDI's webhooks admit the rendered DataVolume")
	seen := watchPods(t, cs, ns)
	why := waitDataVolumeEvent(t, cs, ns, disk.DataVolume, "ErrClaimNotValid", time.Minute)
	t.Logf("without access modes CDI says: %s", why)
	assert.Contains(t, why, "cannot get access mode from StorageProfile "+localpath.StorageClass, "CDI's reason")
	c, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, disk.DataVolume, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "no target claim while CDI cannot render it (%v, %v)", c, err)

	// The admin's fix: the profile says what the class's claims are. CDI
	// takes the waiting DataVolume up again.
	start := time.Now()
	err = cdi.SetClaimProperties(ctx, env.Config(), localpath.StorageClass, "ReadWriteOnce", "Filesystem")
	require.NoError(t, err, "setting the StorageProfile's claim property sets")
	dv := waitDataVolume(t, dc, cs, ns, disk.DataVolume, 4*time.Minute)
	cloneType, _, _ := unstructured.NestedString(dv.Object, "metadata", "annotations", "cdi.kubevirt.io/cloneType")
	pods := seen()
	t.Logf("clone Succeeded %s after the profile's fix, strategy %q; CDI's pods in the namespace: %s", time.Since(start).Round(time.Millisecond), cloneType, strings.Join(pods, "; "))
	assert.Equal(t, "copy", cloneType, "the strategy CDI chose for a provisioner without CSI clones nor snapshots: a host-assisted copy")
	assert.True(t, servedBy(pods, "cdi-clone-source"), "CDI's cloner pod ran: %v", pods)
	assert.True(t, servedBy(pods, "cdi-upload-server"), "CDI's upload server pod ran: %v", pods)

	target, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, disk.DataVolume, metav1.GetOptions{})
	require.NoError(t, err, "the target claim")
	pv, err := cs.CoreV1().PersistentVolumes().Get(ctx, target.Spec.VolumeName, metav1.GetOptions{})
	require.NoError(t, err, "the target's volume")
	require.NotNil(t, pv.Spec.Local, "a local-path volume")
	f, err := os.Open(filepath.Join(pv.Spec.Local.Path, "disk.img"))
	require.NoError(t, err, "disk.img in the target")
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	require.NoError(t, err)
	assert.Equal(t, int64(imageSize), n, "the target's disk.img size")
	assert.Equal(t, hex.EncodeToString(want[:]), hex.EncodeToString(h.Sum(nil)), "the target holds the staged bytes")
}

// writerPod runs script in the local-path helper image (busybox) as a
// restricted pod, user and fsGroup 107, with claim at /data.
func writerPod(ns, name, claim, script string) *corev1.Pod {
	image := localPathBuild.Helper
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy:   corev1.RestartPolicyNever,
			SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](107), RunAsNonRoot: ptr.To(true), FSGroup: ptr.To[int64](107), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "writer", Image: image, ImagePullPolicy: corev1.PullNever, Command: []string{"/bin/sh", "-c", script},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
				VolumeMounts:    []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}},
		},
	}
}

func waitPodSucceeded(t *testing.T, cs kubernetes.Interface, ns, name string, timeout time.Duration) {
	t.Helper()
	var phase corev1.PodPhase
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		phase = p.Status.Phase
		return phase == corev1.PodSucceeded || phase == corev1.PodFailed, nil
	})
	if err != nil || phase != corev1.PodSucceeded {
		t.Fatalf("pod %s/%s: phase %q, want Succeeded (%v)\n%s", ns, name, phase, err, describeNamespace(cs, ns))
	}
}

// waitDataVolumeEvent waits for a Warning event of reason on the
// DataVolume and returns its message.
func waitDataVolumeEvent(t *testing.T, cs kubernetes.Interface, ns, name, reason string, timeout time.Duration) string {
	t.Helper()
	var message string
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		events, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		if err != nil {
			return false, nil
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Kind == "DataVolume" && e.Reason == reason {
				message = e.Message
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no %s event on DataVolume %s/%s (%v)\n%s", reason, ns, name, err, describeNamespace(cs, ns))
	}
	return message
}

// watchPods records the pods CDI starts in ns (cdi.WatchPods) until the
// test ends.
func watchPods(t *testing.T, cs kubernetes.Interface, ns string) func() []string {
	t.Helper()
	list, stop, err := cdi.WatchPods(context.Background(), cs, ns)
	require.NoError(t, err)
	t.Cleanup(stop)
	return list
}

// servedBy reports whether one of CDI's pods listed (cdi.WatchPods) plays part.
func servedBy(pods []string, part string) bool {
	return slices.ContainsFunc(pods, func(p string) bool { return strings.Contains(p, " ("+part+") ") })
}

// toUnstructured is a typed object as the dynamic client takes it.
func toUnstructured(t *testing.T, obj runtime.Object) *unstructured.Unstructured {
	t.Helper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	require.NoError(t, err, "converting %T", obj)
	return &unstructured.Unstructured{Object: u}
}
