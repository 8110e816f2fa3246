package pipeline

import (
	"regexp"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
			if err != nil {
				t.Fatal(err)
			}
			name, cm := a.ServiceAccount.Name, a.ConfigMap.Name
			if tc.wantName != "" && name != tc.wantName {
				t.Errorf("name %q, want %q", name, tc.wantName)
			}
			if tc.wantCMName != "" && cm != tc.wantCMName {
				t.Errorf("configmap %q, want %q", cm, tc.wantCMName)
			}
			if !strings.HasPrefix(cm, tc.wantCMPrefx) {
				t.Errorf("configmap %q does not start with %q", cm, tc.wantCMPrefx)
			}
			for _, n := range []string{name, cm} {
				if len(n) > 63 || !dns1123Label.MatchString(n) {
					t.Errorf("%q is not a DNS-1123 label of at most 63 characters", n)
				}
			}
			if a.Role.Name != name || a.RoleBinding.Name != name {
				t.Errorf("role %q and binding %q should be named %q", a.Role.Name, a.RoleBinding.Name, name)
			}

			// Deterministic: the same inputs give the same objects.
			again, _ := RenderProgressAccess(m, tc.attempt)
			if again.ConfigMap.Name != cm || again.ServiceAccount.Name != name {
				t.Error("names are not deterministic")
			}
			if other, _ := RenderProgressAccess(m, tc.attempt+1); other.ConfigMap.Name == cm || other.ServiceAccount.Name == name {
				t.Error("two attempts share names")
			}

			// Every object: the migration's namespace, labels and controller owner.
			for _, meta := range []metav1.ObjectMeta{a.ConfigMap.ObjectMeta, a.ServiceAccount.ObjectMeta, a.Role.ObjectMeta, a.RoleBinding.ObjectMeta} {
				if meta.Namespace != m.Namespace {
					t.Errorf("%s: namespace %q", meta.Name, meta.Namespace)
				}
				if meta.Labels[v1alpha1.LabelMigrationUID] != string(m.UID) || meta.Labels[v1alpha1.LabelComponent] != v1alpha1.ComponentTransfer {
					t.Errorf("%s: labels %v", meta.Name, meta.Labels)
				}
				ref := metav1.GetControllerOf(&meta)
				if ref == nil || ref.UID != m.UID || ref.Kind != "VirtualMachineMigration" || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
					t.Errorf("%s: controller reference %+v", meta.Name, ref)
				}
			}

			// Least privilege: get and patch of that one ConfigMap, nothing else.
			want := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{cm}, Verbs: []string{"get", "patch"}}
			if len(a.Role.Rules) != 1 || !equalRule(a.Role.Rules[0], want) {
				t.Errorf("rules %+v, want only %+v", a.Role.Rules, want)
			}
			if a.RoleBinding.RoleRef != (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}) {
				t.Errorf("role ref %+v", a.RoleBinding.RoleRef)
			}
			if len(a.RoleBinding.Subjects) != 1 || a.RoleBinding.Subjects[0] != (rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: m.Namespace}) {
				t.Errorf("subjects %+v", a.RoleBinding.Subjects)
			}
			if a.ServiceAccount.AutomountServiceAccountToken == nil || *a.ServiceAccount.AutomountServiceAccountToken {
				t.Error("the service account must not mount its token unless the pod asks")
			}
			if len(a.ConfigMap.Data) != 0 {
				t.Errorf("the progress configmap starts empty, has %v", a.ConfigMap.Data)
			}
			if got := a.PodArgs(); len(got) != 1 || got[0] != "--progress-configmap=team-a/"+cm {
				t.Errorf("pod args %v", got)
			}
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
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func equalRule(a, b rbacv1.PolicyRule) bool {
	eq := func(x, y []string) bool { return strings.Join(x, ",") == strings.Join(y, ",") }
	return eq(a.APIGroups, b.APIGroups) && eq(a.Resources, b.Resources) && eq(a.ResourceNames, b.ResourceNames) &&
		eq(a.Verbs, b.Verbs) && len(a.NonResourceURLs) == 0
}
