//go:build e2e && conversion

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"

	kvclient "platform.example/vm-migration/pkg/generated/kubevirt/clientset/versioned"
	"platform.example/vm-migration/pkg/steps/pipeline"
	"platform.example/vm-migration/test/framework"
	"platform.example/vm-migration/test/standins"
)

// kvmProbeTimeout bounds the KVM probe's boot: the guest reaches its
// marker in well under a minute under TCG; a KVM that hangs says nothing.
const kvmProbeTimeout = 3 * time.Minute

// launcherKVM is the KVM probe's outcome, once per test binary.
var launcherKVM struct {
	once sync.Once
	// runtimeClass is the RuntimeClass the real guests' launchers get:
	// empty (TCG) unless the probe booted the guest under KVM.
	runtimeClass, outcome string
}

// launcherAccelerator decides how the real guests' launcher pods run
// QEMU: under KVM, through the node's kvm RuntimeClass, only where that
// RuntimeClass exists and a probe booted a real guest under KVM to its
// marker (the BIOS guest image as built, its disk on SATA, which its
// VMware initramfs drives), in a launcher pod as the stand-ins make them;
// TCG otherwise.
func launcherAccelerator(t *testing.T, env *framework.Environment, image string) string {
	t.Helper()
	launcherKVM.once.Do(func() {
		if realKubeVirt() {
			// virt-controller renders the launcher pods, from a KubeVirt
			// CR with useEmulation: the probe's stand-in pods and the
			// RuntimeClass have no place there.
			launcherKVM.outcome = "tcg: KubeVirt's virt-controller renders the launcher pods (useEmulation)"
			return
		}
		rc := env.RuntimeClassKVM()
		if rc == "" {
			launcherKVM.outcome = "tcg: the machine has no /dev/kvm"
			return
		}
		start := time.Now()
		ok, detail := probeKVM(t, env, rc, image)
		if ok {
			launcherKVM.runtimeClass = rc
			launcherKVM.outcome = fmt.Sprintf("kvm: the probe booted the guest under KVM in %s", time.Since(start).Round(time.Second))
			return
		}
		launcherKVM.outcome = fmt.Sprintf("tcg: the KVM probe failed after %s: %s", time.Since(start).Round(time.Second), detail)
	})
	t.Logf("launcher accelerator: %s", launcherKVM.outcome)
	return launcherKVM.runtimeClass
}

// probeKVM boots the guest image under KVM in a launcher pod, with
// stand-ins of its own in a namespace of its own, and says whether the
// guest printed its marker.
func probeKVM(t *testing.T, env *framework.Environment, runtimeClass, image string) (bool, string) {
	setupSuite(t, env)
	ns := env.Namespace(t)
	kube := kubernetes.NewForConfigOrDie(env.Config())
	(&stack{t: t, ctx: context.Background(), ns: ns, kube: kube}).enforceRestricted()
	kv := kvclient.NewForConfigOrDie(env.Config())
	ctx, cancel := context.WithTimeout(context.Background(), kvmProbeTimeout+2*time.Minute)
	defer cancel()
	root := t.TempDir()
	for _, d := range []string{filepath.Dir(root), root} {
		require.NoError(t, os.Chmod(d, 0o755), "opening %s to the pods' users", d)
	}
	cfg := standins.Config{RestConfig: env.Config(), Root: root, Namespace: ns, LocalVolumeNode: env.NodeName(), LauncherImage: launcherImage}
	stop := runProbeStandins(t, ctx, cfg)
	defer stop()
	if err := probeDisk(ctx, kube, cfg, ns, image); err != nil {
		return false, err.Error()
	}
	if _, err := kv.KubevirtV1().VirtualMachines(ns).Create(ctx, probeVM(ns, runtimeClass), metav1.CreateOptions{}); err != nil {
		return false, fmt.Sprintf("creating the probe VM: %v", err)
	}
	defer func() {
		_ = kv.KubevirtV1().VirtualMachines(ns).Delete(context.Background(), "kvm-probe", metav1.DeleteOptions{})
	}()
	return waitProbeMarker(ctx, kube, ns)
}

// runProbeStandins runs the probe's stand-ins until the returned stop.
func runProbeStandins(t *testing.T, ctx context.Context, cfg standins.Config) func() {
	t.Helper()
	sctx, scancel := context.WithCancel(ctx)
	ready, done := make(chan struct{}), make(chan error, 1)
	cfg.Ready = ready
	go func() { done <- standins.Run(sctx, cfg) }()
	select {
	case <-ready:
	case err := <-done:
		scancel()
		require.FailNow(t, fmt.Sprintf("the KVM probe's stand-ins exited: %v", err))
	}
	return func() {
		scancel()
		<-done
	}
}

// probeDisk makes the probe's claim and copies the guest image into it.
func probeDisk(ctx context.Context, kube kubernetes.Interface, cfg standins.Config, ns, image string) error {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "kvm-probe", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(standins.DefaultStorageClass),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}},
		},
	}
	if _, err := kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the probe's claim: %w", err)
	}
	var dir string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := standins.ClaimDir(ctx, cfg, ns, pvc.Name)
		dir = d
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("the probe's claim was not bound: %w", err)
	}
	if out, err := exec.CommandContext(ctx, "cp", "--sparse=always", image, filepath.Join(dir, pipeline.ImageFile)).CombinedOutput(); err != nil {
		return fmt.Errorf("copying the guest image into the probe's claim: %w: %s", err, out)
	}
	return nil
}

// probeVM boots the probe's claim on SATA, BIOS, one vCPU, 1 GiB, no NIC,
// under KVM through the RuntimeClass.
func probeVM(ns, runtimeClass string) *kubevirtv1.VirtualMachine {
	return &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "kvm-probe", Namespace: ns},
		Spec: kubevirtv1.VirtualMachineSpec{
			RunStrategy: ptr.To(kubevirtv1.RunStrategyAlways),
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{standins.AnnotationLauncherRuntimeClass: runtimeClass}},
				Spec: kubevirtv1.VirtualMachineInstanceSpec{
					Domain: kubevirtv1.DomainSpec{
						Memory: &kubevirtv1.Memory{Guest: ptr.To(resource.MustParse("1Gi"))},
						Devices: kubevirtv1.Devices{
							AutoattachPodInterface: ptr.To(false),
							Disks: []kubevirtv1.Disk{{Name: "disk-0", BootOrder: ptr.To[uint](1),
								DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusSATA}}}},
						},
					},
					Volumes: []kubevirtv1.Volume{{Name: "disk-0", VolumeSource: kubevirtv1.VolumeSource{
						PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
							PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "kvm-probe"}}}}},
				},
			},
		},
	}
}

// waitProbeMarker follows the probe's launcher pod until the guest's
// marker shows in its log (KVM works), the pod ends, or the time is up.
func waitProbeMarker(ctx context.Context, kube kubernetes.Interface, ns string) (bool, string) {
	deadline := time.Now().Add(kvmProbeTimeout)
	var log string
	for time.Now().Before(deadline) {
		time.Sleep(2 * time.Second)
		pod, err := kube.CoreV1().Pods(ns).Get(ctx, "virt-launcher-kvm-probe", metav1.GetOptions{})
		if err != nil {
			continue
		}
		raw, err := kube.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err == nil {
			log = string(raw)
		}
		if strings.Contains(log, guestMarker) {
			return true, ""
		}
		if pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
			return false, "the launcher ended: " + lastLines(log, 6)
		}
	}
	return false, fmt.Sprintf("no %s line within %s; the console's end: %s", guestMarker, kvmProbeTimeout, lastLines(log, 6))
}

// lastLines are the last n non-empty lines of s but QEMU's command line,
// joined by " | ".
func lastLines(s string, n int) string {
	var lines []string
	for l := range strings.SplitSeq(s, "\n") {
		// QEMU's command line says nothing of why it failed.
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "launcher: qemu started") {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
