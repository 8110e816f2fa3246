package pipeline

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
)

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
	cmName := naming.TransferProgressConfigMap(m.Name, attempt)
	name := naming.TransferAccess(m.Name, attempt)
	return &ProgressAccess{
		ConfigMap: &corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: childMeta(m, cmName, v1alpha1.ComponentTransfer, true),
		},
		ServiceAccount: &corev1.ServiceAccount{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			ObjectMeta: childMeta(m, name, v1alpha1.ComponentTransfer, true),
			// Pods opt in explicitly; no other pod gets this token by accident.
			AutomountServiceAccountToken: ptr.To(false),
		},
		Role: &rbacv1.Role{
			TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "Role"},
			ObjectMeta: childMeta(m, name, v1alpha1.ComponentTransfer, true),
			Rules: []rbacv1.PolicyRule{{
				APIGroups:     []string{""},
				Resources:     []string{"configmaps"},
				ResourceNames: []string{cmName},
				Verbs:         []string{"get", "patch"},
			}},
		},
		RoleBinding: &rbacv1.RoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "RoleBinding"},
			ObjectMeta: childMeta(m, name, v1alpha1.ComponentTransfer, true),
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: m.Namespace}},
		},
	}, nil
}

// progressFlag is vm-transfer's flag naming the progress ConfigMap.
const progressFlag = "--progress-configmap="

// PodArgs are the vm-transfer flags that report into the access's ConfigMap.
func (a *ProgressAccess) PodArgs() []string {
	return []string{progressFlag + a.ConfigMap.Namespace + "/" + a.ConfigMap.Name}
}
