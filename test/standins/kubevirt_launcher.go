package standins

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"platform.example/vm-migration/test/images/launcher"
)

// The launcher pod, as KubeVirt v1.9.0's virt-controller renders
// virt-launcher's (pkg/virt-controller/services/template.go): the
// instance's labels plus kubevirt.io=virt-launcher, kubevirt.io/created-by
// (the instance's UID) and vm.kubevirt.io/name (its host name), the
// kubevirt.io/domain annotation, a container "compute", restart policy
// Never, controlled by the instance. Unlike KubeVirt's, its name is
// deterministic (virt-launcher-<instance>), it runs the launcher image of
// test/images as user 107 in a pod fit for PodSecurity restricted (no
// capability: TCG needs none, and /dev/kvm comes from a RuntimeClass), and
// it asks for little (KubeVirt requests the guest's memory plus overhead
// and 100m per vCPU; twenty instances of the tests would not fit the
// test node's two cores).
const (
	launcherAppLabelValue = "virt-launcher"
	launcherContainer     = "compute"
	launcherPodPrefix     = "virt-launcher-"
	// launcherRunVolume is the emptyDir of the sockets and the EFI
	// variable store.
	launcherRunVolume = "private"
	// launcherEnvInstance carries the instance to the launcher
	// (test/images/cmd/vmi-launcher).
	launcherEnvInstance = "VMI"
	// AnnotationLauncherRuntimeClass on an instance (its VM's template)
	// runs its launcher under KVM through the named RuntimeClass, whatever
	// Config.LauncherRuntimeClass says: the KVM probe's instance has it.
	AnnotationLauncherRuntimeClass = "standins.platform.example/launcher-runtime-class"
	// defaultGracePeriod is KubeVirt's termination grace period of an
	// instance that names none.
	defaultGracePeriod = int64(30)
)

// launcherPodName is the launcher pod's name.
func launcherPodName(vmi *kubevirtv1.VirtualMachineInstance) string {
	return launcherPodPrefix + vmi.Name
}

// hostName is KubeVirt's host name of an instance (a DNS label).
func hostName(vmi *kubevirtv1.VirtualMachineInstance) string {
	h := vmi.Name
	if vmi.Spec.Hostname != "" {
		h = vmi.Spec.Hostname
	}
	if len(h) > 63 {
		h = h[:63]
	}
	return strings.TrimRight(h, "-.")
}

// launcherPod renders the instance's launcher pod.
func (k *KubeVirt) launcherPod(vmi *kubevirtv1.VirtualMachineInstance) (*corev1.Pod, error) {
	grace := defaultGracePeriod
	if vmi.Spec.TerminationGracePeriodSeconds != nil {
		grace = *vmi.Spec.TerminationGracePeriodSeconds
	}
	env, err := instanceEnv(vmi)
	if err != nil {
		return nil, err
	}
	labels := map[string]string{}
	for k, v := range vmi.Labels {
		labels[k] = v
	}
	labels[kubevirtv1.AppLabel] = launcherAppLabelValue
	labels[kubevirtv1.CreatedByLabel] = string(vmi.UID)
	labels[kubevirtv1.DeprecatedVirtualMachineNameLabel] = hostName(vmi)
	accel := launcher.AccelTCG
	var runtimeClass *string
	rc := k.cfg.LauncherRuntimeClass
	if a := vmi.Annotations[AnnotationLauncherRuntimeClass]; a != "" {
		rc = a
	}
	if rc != "" {
		accel, runtimeClass = launcher.AccelKVM, ptr.To(rc)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: launcherPodName(vmi), Namespace: vmi.Namespace, Labels: labels,
			Annotations: map[string]string{kubevirtv1.DomainAnnotation: vmi.Name},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: kubevirtv1.SchemeGroupVersion.String(), Kind: "VirtualMachineInstance", Name: vmi.Name, UID: vmi.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, Hostname: hostName(vmi),
			// KubeVirt gives the launcher the instance's grace and a margin.
			TerminationGracePeriodSeconds: ptr.To(grace + 15),
			RuntimeClassName:              runtimeClass,
			AutomountServiceAccountToken:  ptr.To(false),
			SecurityContext:               launcherPodSecurity(),
			Containers: []corev1.Container{launcherContainerSpec(k.cfg.LauncherImage, env,
				[]string{"--accel=" + accel, "--shutdown-timeout=" + strconv.FormatInt(grace, 10) + "s"})},
		},
	}
	addLauncherVolumes(pod, vmi)
	return pod, nil
}

// instanceEnv is the instance as the launcher takes it: its identity and
// spec as JSON.
func instanceEnv(vmi *kubevirtv1.VirtualMachineInstance) ([]corev1.EnvVar, error) {
	b, err := json.Marshal(&kubevirtv1.VirtualMachineInstance{
		TypeMeta:   metav1.TypeMeta{APIVersion: kubevirtv1.SchemeGroupVersion.String(), Kind: "VirtualMachineInstance"},
		ObjectMeta: metav1.ObjectMeta{Name: vmi.Name, Namespace: vmi.Namespace, UID: vmi.UID},
		Spec:       vmi.Spec,
	})
	if err != nil {
		return nil, fmt.Errorf("encoding instance %s/%s for its launcher: %w", vmi.Namespace, vmi.Name, err)
	}
	return []corev1.EnvVar{{Name: launcherEnvInstance, Value: string(b)}}, nil
}

// launcherPodSecurity is the pod's security context: user, group and
// fsGroup 107 (so the kubelet gives the claims' disks to QEMU), non-root,
// the runtime's seccomp profile.
func launcherPodSecurity() *corev1.PodSecurityContext {
	id := int64(launcherUID)
	return &corev1.PodSecurityContext{
		RunAsUser: &id, RunAsGroup: &id, FSGroup: &id, RunAsNonRoot: ptr.To(true),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// launcherUID is the launcher image's user (test/images.LauncherUID).
const launcherUID = 107

// launcherContainerSpec is the "compute" container: the launcher with its
// status port, ready once QEMU runs the guest.
func launcherContainerSpec(image string, env []corev1.EnvVar, args []string) corev1.Container {
	return corev1.Container{
		Name: launcherContainer, Image: image, ImagePullPolicy: corev1.PullIfNotPresent, Args: args, Env: env,
		Ports: []corev1.ContainerPort{{Name: "status", ContainerPort: launcher.Port, Protocol: corev1.ProtocolTCP}},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: launcher.ReadyPath, Port: intstr.FromInt32(launcher.Port)}},
			PeriodSeconds: 1, FailureThreshold: 1,
		},
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("128Mi"),
		}},
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
		VolumeMounts:             []corev1.VolumeMount{{Name: launcherRunVolume, MountPath: launcher.DefaultRunDir}},
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
	}
}

// addLauncherVolumes mounts the run folder and each disk's claim (a
// DataVolume's claim has its name) where the launcher looks for it.
func addLauncherVolumes(pod *corev1.Pod, vmi *kubevirtv1.VirtualMachineInstance) {
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: launcherRunVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	c := &pod.Spec.Containers[0]
	for i, v := range vmi.Spec.Volumes {
		claim := ""
		switch {
		case v.DataVolume != nil:
			claim = v.DataVolume.Name
		case v.PersistentVolumeClaim != nil:
			claim = v.PersistentVolumeClaim.ClaimName
		default:
			continue
		}
		name := fmt.Sprintf("disk-%d", i)
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: launcher.DefaultDiskDir + "/" + v.Name})
	}
}
