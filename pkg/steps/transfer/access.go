package transfer

import (
	"errors"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
)

// Component is the value of the component label on these objects.
const Component = "transfer"

// ProgressAccess is what one transfer attempt needs to report progress:
// the ConfigMap it writes to and the identity allowed to write it.
type ProgressAccess struct {
	// ConfigMap receives the progress and result documents.
	ConfigMap *corev1.ConfigMap
	// ServiceAccount the transfer pod runs as.
	ServiceAccount *corev1.ServiceAccount
	// Role allows get and patch of ConfigMap, and nothing else.
	Role *rbacv1.Role
	// RoleBinding grants Role to ServiceAccount.
	RoleBinding *rbacv1.RoleBinding
}

// ProgressConfigMapName is the progress ConfigMap of a transfer attempt.
func ProgressConfigMapName(migration string, attempt int32) string {
	return naming.Child(migration, "transfer", strconv.Itoa(int(attempt)), "progress")
}

// AccessName is the name of the attempt's ServiceAccount, Role and
// RoleBinding: the Job's own name.
func AccessName(migration string, attempt int32) string {
	return naming.TransferJob(migration, attempt)
}

// RenderProgressAccess renders the progress ConfigMap and the RBAC of a
// transfer attempt. Create them before the Job; the pod then runs as
// ServiceAccount with its token mounted and the flags of PodArgs.
func RenderProgressAccess(m *v1alpha1.VirtualMachineMigration, attempt int32) (*ProgressAccess, error) {
	switch {
	case m == nil || m.Name == "" || m.Namespace == "":
		return nil, errors.New("rendering transfer progress access: the migration has no name or namespace")
	case m.UID == "":
		return nil, fmt.Errorf("rendering transfer progress access for %s/%s: the migration has no UID", m.Namespace, m.Name)
	case attempt < 1:
		return nil, fmt.Errorf("rendering transfer progress access for %s/%s: attempt %d, attempts count from 1", m.Namespace, m.Name, attempt)
	}
	cmName := ProgressConfigMapName(m.Name, attempt)
	name := AccessName(m.Name, attempt)
	return &ProgressAccess{
		ConfigMap: &corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: meta(m, cmName),
		},
		ServiceAccount: &corev1.ServiceAccount{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			ObjectMeta: meta(m, name),
			// Pods opt in explicitly; no other pod gets this token by accident.
			AutomountServiceAccountToken: ptr.To(false),
		},
		Role: &rbacv1.Role{
			TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "Role"},
			ObjectMeta: meta(m, name),
			Rules: []rbacv1.PolicyRule{{
				APIGroups:     []string{""},
				Resources:     []string{"configmaps"},
				ResourceNames: []string{cmName},
				Verbs:         []string{"get", "patch"},
			}},
		},
		RoleBinding: &rbacv1.RoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "RoleBinding"},
			ObjectMeta: meta(m, name),
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: m.Namespace}},
		},
	}, nil
}

// PodArgs are the vm-transfer flags that report into the access's ConfigMap.
func (a *ProgressAccess) PodArgs() []string {
	return []string{"--progress-configmap=" + a.ConfigMap.Namespace + "/" + a.ConfigMap.Name}
}

// meta is the metadata of an object of the attempt: labels that tie it to
// the migration, and the migration as its controller owner.
func meta(m *v1alpha1.VirtualMachineMigration, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:      name,
		Namespace: m.Namespace,
		Labels: map[string]string{
			v1alpha1.LabelMigrationName: naming.DNS1123Label(m.Name),
			v1alpha1.LabelMigrationUID:  string(m.UID),
			v1alpha1.LabelComponent:     Component,
		},
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(m, v1alpha1.SchemeGroupVersion.WithKind("VirtualMachineMigration"))},
	}
}
