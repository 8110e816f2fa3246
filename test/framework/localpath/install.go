package localpath

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"platform.example/vm-migration/test/framework/apply"
)

const (
	// Namespace is where the provisioner runs, with its helper pods.
	Namespace = "local-path-storage"
	// StorageClass is the class of its volumes.
	StorageClass = "local-path"
	// Provisioner is the provisioner's name in the class and on the
	// volumes it makes.
	Provisioner = "rancher.io/local-path"

	fieldManager   = "vm-migration-local-path-install"
	name           = "local-path-provisioner"
	serviceAccount = "local-path-provisioner-service-account"
	configMap      = "local-path-config"
	configDir      = "/etc/config/"
	defaultTimeout = 2 * time.Minute
	// user is the provisioner's user (its image's).
	user = 65532
)

// Options says what Install installs and how it reports.
type Options struct {
	// Build is the provisioner's build (its images already on the node).
	Build *Build
	// Root is the folder on the node that holds every volume; Install
	// creates it.
	Root string
	// Timeout bounds the installation; zero means two minutes.
	Timeout time.Duration
	// Logf, when set, is told each step and how long it took.
	Logf func(format string, args ...any)
}

// Install installs the provisioner into the cluster cfg reaches, as the
// package doc says, and returns once its Deployment is Available.
func Install(ctx context.Context, cfg *rest.Config, o Options) error {
	if o.Timeout == 0 {
		o.Timeout = defaultTimeout
	}
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	a, err := apply.New(cfg, fieldManager, Namespace, func(format string, args ...any) { logf("local-path: "+format, args...) })
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.Root, 0o755); err != nil {
		return fmt.Errorf("installing local-path-provisioner: the volumes' folder: %w", err)
	}
	objects := func(objs ...runtime.Object) func(context.Context) error {
		return func(ctx context.Context) error {
			for _, obj := range objs {
				if _, err := a.Apply(ctx, obj); err != nil {
					return err
				}
			}
			return nil
		}
	}
	config, err := configMapOf(o)
	if err != nil {
		return err
	}
	return a.Install(ctx, "local-path-provisioner "+o.Build.Version, []apply.Step{
		{What: "namespace, ServiceAccount and RBAC", Do: objects(append([]runtime.Object{namespace(), &corev1.ServiceAccount{
			ObjectMeta: metav1.ObjectMeta{Name: serviceAccount, Namespace: Namespace},
		}}, rbac()...)...)},
		{What: "ConfigMap, Deployment and StorageClass", Do: objects(config, deployment(o.Build), storageClass())},
		{What: "Deployment Available", Do: func(ctx context.Context) error { return a.WaitDeployments(ctx, Namespace, name) }},
	})
}

// namespace is the provisioner's namespace: privileged, as its helper pods
// mount a folder of the node (hostPath) and run as root.
func namespace() *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "privileged",
	}}}
}

// rbac is what the upstream manifest grants: the pods of its namespace
// (the helper pods), reading nodes, claims, ConfigMaps, pods and their
// logs, StorageClasses, writing volumes and events.
func rbac() []runtime.Object {
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: serviceAccount, Namespace: Namespace}}
	read := []string{"get", "list", "watch"}
	return []runtime.Object{
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name + "-role", Namespace: Namespace}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "create", "patch", "update", "delete"}},
		}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name + "-bind", Namespace: Namespace}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name + "-role"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name + "-role"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"nodes", "persistentvolumeclaims", "configmaps", "pods", "pods/log"}, Verbs: read},
			{APIGroups: []string{""}, Resources: []string{"persistentvolumes"}, Verbs: []string{"get", "list", "watch", "create", "patch", "update", "delete"}},
			{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
			{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"storageclasses"}, Verbs: read},
		}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name + "-bind"}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name + "-role"}},
	}
}

// setupScript makes a volume's folder, writable by every pod user (the
// importer runs as 107, the controller's Jobs as their own users);
// teardownScript removes it.
const (
	setupScript    = "#!/bin/sh\nset -eu\nmkdir -m 0777 -p \"$VOL_DIR\"\n"
	teardownScript = "#!/bin/sh\nset -eu\nrm -rf \"$VOL_DIR\"\n"
)

// configMapOf is local-path-config: every node's volumes under o.Root, the
// scripts, and the helper pod's template with the helper image.
func configMapOf(o Options) (*corev1.ConfigMap, error) {
	config, err := json.Marshal(map[string]any{"nodePathMap": []map[string]any{{
		"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": []string{o.Root},
	}}})
	if err != nil {
		return nil, fmt.Errorf("local-path config.json: %w", err)
	}
	helper, err := yaml.Marshal(&corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "helper-pod"},
		Spec: corev1.PodSpec{
			PriorityClassName: "system-node-critical",
			Tolerations:       []corev1.Toleration{{Key: "node.kubernetes.io/disk-pressure", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			Containers:        []corev1.Container{{Name: "helper-pod", Image: o.Build.Helper, ImagePullPolicy: corev1.PullIfNotPresent}},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("local-path helperPod.yaml: %w", err)
	}
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: configMap, Namespace: Namespace}, Data: map[string]string{
		"config.json": string(config), "setup": setupScript, "teardown": teardownScript, "helperPod.yaml": string(helper),
	}}, nil
}

// deployment runs the provisioner, one replica, without leader election
// (as upstream builds it), as a restricted non-root container.
func deployment(b *Build) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: serviceAccount,
					Containers: []corev1.Container{{
						Name:            name,
						Image:           b.Provisioner,
						ImagePullPolicy: corev1.PullIfNotPresent,
						Command: []string{"/usr/bin/local-path-provisioner", "--debug", "start", "--config", configDir + "config.json",
							"--helper-image", b.Helper, "--service-account-name", serviceAccount, "--configmap-name", configMap},
						Env: []corev1.EnvVar{
							{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
							{Name: "CONFIG_MOUNT_PATH", Value: configDir},
						},
						VolumeMounts: []corev1.VolumeMount{{Name: "config-volume", MountPath: configDir}},
						SecurityContext: &corev1.SecurityContext{
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
							SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
							AllowPrivilegeEscalation: ptr.To(false),
							RunAsNonRoot:             ptr.To(true),
							RunAsUser:                ptr.To[int64](user),
							ReadOnlyRootFilesystem:   ptr.To(true),
						},
					}},
					Volumes: []corev1.Volume{{Name: "config-volume", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
						LocalObjectReference: corev1.LocalObjectReference{Name: configMap},
					}}}},
				},
			},
		},
	}
}

// storageClass is local-path: volumes bound where their first pod runs,
// of type local, deleted with their claims.
func storageClass() *storagev1.StorageClass {
	wffc, reclaim := storagev1.VolumeBindingWaitForFirstConsumer, corev1.PersistentVolumeReclaimDelete
	return &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: StorageClass, Annotations: map[string]string{"defaultVolumeType": "local"}},
		Provisioner:       Provisioner,
		VolumeBindingMode: &wffc,
		ReclaimPolicy:     &reclaim,
	}
}
