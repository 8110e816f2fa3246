package builders

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// ChildMeta is the metadata of a child of m: its labels (m's UID and name,
// the component) and, when controlled, m as its controller owner. The
// object gets a UID derived from its name, as the API server would give.
func ChildMeta(m *v1alpha1.VirtualMachineMigration, name, component string, controlled bool) metav1.ObjectMeta {
	meta := metav1.ObjectMeta{
		Name: name, Namespace: m.Namespace, UID: types.UID("uid-" + name),
		Labels: map[string]string{
			v1alpha1.LabelMigrationUID:  string(m.UID),
			v1alpha1.LabelMigrationName: m.Name,
			v1alpha1.LabelComponent:     component,
		},
	}
	if controlled {
		meta.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(m, v1alpha1.SchemeGroupVersion.WithKind("VirtualMachineMigration"))}
	}
	return meta
}

// Foreign is metadata of an object no migration made.
func Foreign(namespace, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: namespace, UID: types.UID("uid-foreign-" + name)}
}

// StagingClaim is a staging volume of m.
func StagingClaim(m *v1alpha1.VirtualMachineMigration, name string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: ChildMeta(m, name, v1alpha1.ComponentStaging, true)}
}

// JobMod changes a Job.
type JobMod = func(*batchv1.Job)

// Job is a Job of m of the given component, running.
func Job(m *v1alpha1.VirtualMachineMigration, name, component string, mods ...JobMod) *batchv1.Job {
	job := &batchv1.Job{ObjectMeta: ChildMeta(m, name, component, true)}
	job.Spec.Template.Labels = job.Labels
	job.Spec.Template.Spec.Containers = []corev1.Container{{Name: component}}
	for _, mod := range mods {
		mod(job)
	}
	return job
}

// JobComplete marks a Job complete.
func JobComplete(job *batchv1.Job) {
	job.Status.Conditions = append(job.Status.Conditions, batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue})
}

// JobFailed marks a Job failed.
func JobFailed(reason, message string) JobMod {
	return func(job *batchv1.Job) {
		job.Status.Conditions = append(job.Status.Conditions, batchv1.JobCondition{
			Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: reason, Message: message})
	}
}

// JobArgs sets the arguments of the Job's container.
func JobArgs(args ...string) JobMod {
	return func(job *batchv1.Job) { job.Spec.Template.Spec.Containers[0].Args = args }
}

// JobPod is the pod the Job controller made for job, its container
// terminated with exitCode and message when terminated is true.
func JobPod(job *batchv1.Job, terminated bool, exitCode int32, message string) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: job.Name + "-pod", Namespace: job.Namespace, UID: types.UID("uid-" + job.Name + "-pod"),
		Labels:          map[string]string{"batch.kubernetes.io/job-name": job.Name},
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))},
	}}
	for k, v := range job.Spec.Template.Labels {
		pod.Labels[k] = v
	}
	status := corev1.ContainerStatus{Name: job.Spec.Template.Spec.Containers[0].Name}
	pod.Status.Phase = corev1.PodRunning
	if terminated {
		status.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: exitCode, Message: message}
		pod.Status.Phase = corev1.PodSucceeded
		if exitCode != 0 {
			pod.Status.Phase = corev1.PodFailed
		}
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{status}
	return pod
}

// ConfigMap is a ConfigMap of m with data.
func ConfigMap(m *v1alpha1.VirtualMachineMigration, name, component string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: ChildMeta(m, name, component, true), Data: data}
}

// ServiceAccount is a transfer attempt's ServiceAccount of m.
func ServiceAccount(m *v1alpha1.VirtualMachineMigration, name string) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{ObjectMeta: ChildMeta(m, name, v1alpha1.ComponentTransfer, true)}
}

// Role is a transfer attempt's Role of m.
func Role(m *v1alpha1.VirtualMachineMigration, name string) *rbacv1.Role {
	return &rbacv1.Role{ObjectMeta: ChildMeta(m, name, v1alpha1.ComponentTransfer, true)}
}

// RoleBinding is a transfer attempt's RoleBinding of m.
func RoleBinding(m *v1alpha1.VirtualMachineMigration, name string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{ObjectMeta: ChildMeta(m, name, v1alpha1.ComponentTransfer, true)}
}

// DataVolume is a target DataVolume of m in the given phase, owned by the
// VirtualMachine vm when vm is not nil.
func DataVolume(m *v1alpha1.VirtualMachineMigration, name string, phase cdiv1.DataVolumePhase, vm *kubevirtv1.VirtualMachine) *cdiv1.DataVolume {
	dv := &cdiv1.DataVolume{ObjectMeta: ChildMeta(m, name, v1alpha1.ComponentImport, false)}
	dv.Status.Phase = phase
	if vm != nil {
		dv.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(vm, kubevirtv1.GroupVersion.WithKind("VirtualMachine"))}
	}
	return dv
}

// VirtualMachine is the target VM of m with the given run strategy.
func VirtualMachine(m *v1alpha1.VirtualMachineMigration, name string, strategy kubevirtv1.VirtualMachineRunStrategy) *kubevirtv1.VirtualMachine {
	vm := &kubevirtv1.VirtualMachine{ObjectMeta: ChildMeta(m, name, v1alpha1.ComponentVM, false)}
	vm.Spec.RunStrategy = &strategy
	return vm
}

// VirtualMachineInstance is the target VM's instance in the given phase.
func VirtualMachineInstance(m *v1alpha1.VirtualMachineMigration, name string, phase kubevirtv1.VirtualMachineInstancePhase) *kubevirtv1.VirtualMachineInstance {
	vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: ChildMeta(m, name, v1alpha1.ComponentVM, false)}
	vmi.Status.Phase = phase
	return vmi
}

// CredentialsSecret is a vSphere credentials Secret that opts in with the
// LabelVSphereCredentials label; data holds username, password and
// optionally thumbprint or ca.crt.
func CredentialsSecret(namespace, name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: namespace, UID: types.UID("uid-secret-" + name),
		Labels: map[string]string{v1alpha1.LabelVSphereCredentials: "true"},
	}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

// StorageClass is a storage class, the cluster default when def is true.
func StorageClass(name string, def bool) *storagev1.StorageClass {
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "example.com/csi"}
	if def {
		sc.Annotations = map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}
	}
	return sc
}
