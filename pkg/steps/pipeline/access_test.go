package pipeline

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/test/builders"
)

var dns1123Label = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

func accessMigration(name string) *v1alpha1.VirtualMachineMigration {
	return builders.Migration(builders.Named(name), builders.InNamespace("team-a"))
}

func TestRenderProgressAccess(t *testing.T) {
	long := strings.Repeat("very-long-migration-name-", 4)
	tests := []struct {
		name        string
		migration   string
		attempt     int32
		wantName    string
		wantCMName  string
		wantCMPrefx string
	}{
		{name: "first attempt", migration: "web-01", attempt: 1, wantName: "web-01-transfer-1", wantCMName: "web-01-transfer-1-progress"},
		{name: "third attempt", migration: "web-01", attempt: 3, wantName: "web-01-transfer-3", wantCMName: "web-01-transfer-3-progress"},
		{name: "long name is shortened with a hash", migration: long, attempt: 2, wantCMPrefx: "very-long-migration"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := accessMigration(tc.migration)
			a, err := RenderProgressAccess(m, tc.attempt)
			require.NoError(t, err, "rendering the progress access of attempt %d", tc.attempt)
			name, cm := a.ServiceAccount.Name, a.ConfigMap.Name
			if tc.wantName != "" {
				assert.Equal(t, tc.wantName, name, "the service account's name")
			}
			if tc.wantCMName != "" {
				assert.Equal(t, tc.wantCMName, cm, "the progress configmap's name")
			}
			assert.True(t, strings.HasPrefix(cm, tc.wantCMPrefx), "progress configmap %q does not start with %q", cm, tc.wantCMPrefx)
			for _, n := range []string{name, cm} {
				assert.LessOrEqual(t, len(n), 63, "%q is not a DNS-1123 label of at most 63 characters", n)
				assert.Regexp(t, dns1123Label, n, "%q is not a DNS-1123 label of at most 63 characters", n)
			}
			assert.Equal(t, name, a.Role.Name, "the role is named as the service account")
			assert.Equal(t, name, a.RoleBinding.Name, "the role binding is named as the service account")

			// Deterministic: the same inputs give the same objects.
			again, err := RenderProgressAccess(m, tc.attempt)
			require.NoError(t, err, "rendering the same attempt again")
			assert.Equal(t, cm, again.ConfigMap.Name, "the progress configmap's name is not deterministic")
			assert.Equal(t, name, again.ServiceAccount.Name, "the service account's name is not deterministic")
			other, err := RenderProgressAccess(m, tc.attempt+1)
			require.NoError(t, err, "rendering the next attempt")
			assert.NotEqual(t, cm, other.ConfigMap.Name, "two attempts share a progress configmap")
			assert.NotEqual(t, name, other.ServiceAccount.Name, "two attempts share a service account")

			// Every object: the migration's namespace, labels and controller owner.
			for _, meta := range []metav1.ObjectMeta{a.ConfigMap.ObjectMeta, a.ServiceAccount.ObjectMeta, a.Role.ObjectMeta, a.RoleBinding.ObjectMeta} {
				assert.Equal(t, m.Namespace, meta.Namespace, "%s: in the migration's namespace", meta.Name)
				assert.Equal(t, string(m.UID), meta.Labels[v1alpha1.LabelMigrationUID], "%s: labelled with the migration's UID", meta.Name)
				assert.Equal(t, v1alpha1.ComponentTransfer, meta.Labels[v1alpha1.LabelComponent], "%s: labelled as the transfer's", meta.Name)
				ref := metav1.GetControllerOf(&meta)
				if assert.NotNil(t, ref, "%s: controlled by the migration", meta.Name) {
					assert.Equal(t, m.UID, ref.UID, "%s: controlled by the migration", meta.Name)
					assert.Equal(t, "VirtualMachineMigration", ref.Kind, "%s: controlled by the migration", meta.Name)
					assert.Equal(t, ptr.To(true), ref.BlockOwnerDeletion, "%s: blocks the migration's deletion until deleted", meta.Name)
				}
			}

			// Least privilege: get and patch of that one ConfigMap, nothing else.
			want := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{cm}, Verbs: []string{"get", "patch"}}
			assert.Equal(t, []rbacv1.PolicyRule{want}, a.Role.Rules, "the role allows get and patch of the progress configmap, nothing else")
			assert.Equal(t, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}, a.RoleBinding.RoleRef, "the binding grants the transfer's own role")
			assert.Equal(t, []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: m.Namespace}}, a.RoleBinding.Subjects,
				"the binding grants the role to the transfer's service account only")
			assert.Equal(t, ptr.To(false), a.ServiceAccount.AutomountServiceAccountToken, "the service account must not mount its token unless the pod asks")
			assert.Empty(t, a.ConfigMap.Data, "the progress configmap starts empty")
			assert.Equal(t, []string{"--progress-configmap=team-a/" + cm}, a.PodArgs(), "the pod is told its progress configmap")
		})
	}
}

func TestRenderProgressAccessRefuses(t *testing.T) {
	noUID := accessMigration("web")
	noUID.UID = ""
	tests := []struct {
		name    string
		m       *v1alpha1.VirtualMachineMigration
		attempt int32
		want    string
	}{
		{name: "nil migration", m: nil, attempt: 1, want: "no name"},
		{name: "no uid", m: noUID, attempt: 1, want: "no UID"},
		{name: "attempt zero", m: accessMigration("web"), attempt: 0, want: "attempts count from 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := RenderProgressAccess(tc.m, tc.attempt)
			assert.ErrorContains(t, err, tc.want, "the progress access is refused")
		})
	}
}
