//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/test/framework"
	"platform.example/vm-migration/test/vcsimlocal"
)

// condition is a migration's condition of that type, or nil.
func condition(m *v1alpha1.VirtualMachineMigration, t string) *metav1.Condition {
	return meta.FindStatusCondition(m.Status.Conditions, t)
}

// hasCondition reports whether a migration has the condition with that
// status and reason.
func hasCondition(m *v1alpha1.VirtualMachineMigration, t string, status metav1.ConditionStatus, reason string) bool {
	c := condition(m, t)
	return c != nil && c.Status == status && c.Reason == reason
}

// deleteMigration deletes a migration (its finalizer then runs the cancel).
func (s *stack) deleteMigration(name string) {
	s.t.Helper()
	err := s.mig.MigrationV1alpha1().VirtualMachineMigrations(s.ns).Delete(s.ctx, name, metav1.DeleteOptions{})
	require.NoError(s.t, err, "deleting migration %s", name)
}

// waitEvent waits for an event on the migration (events are recorded
// asynchronously) of that type and reason whose message holds every
// fragment, and returns it.
func (s *stack) waitEvent(m *v1alpha1.VirtualMachineMigration, eventType, reason string, fragments ...string) corev1.Event {
	s.t.Helper()
	var found *corev1.Event
	var seen []string
	err := wait.PollUntilContextTimeout(s.ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := s.kube.CoreV1().Events(s.ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(m.UID)})
		if err != nil {
			return false, nil
		}
		seen = seen[:0]
		for i, e := range list.Items {
			seen = append(seen, fmt.Sprintf("%s %s: %s", e.Type, e.Reason, e.Message))
			if e.Type == eventType && e.Reason == reason && containsAll(e.Message, fragments...) {
				found = &list.Items[i]
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(s.t, err, "no %s event %s with %q on migration %s; events:\n  %s", eventType, reason, fragments, m.Name, strings.Join(seen, "\n  "))
	return *found
}

// containsAll reports whether s holds every fragment.
func containsAll(s string, fragments ...string) bool {
	for _, f := range fragments {
		if !strings.Contains(s, f) {
			return false
		}
	}
	return true
}

// waitPowerOp waits until a VM with a simulated guest received the
// operation, and returns the first such.
func (s *stack) waitPowerOp(vm, op string, timeout time.Duration) vcsimlocal.PowerOp {
	s.t.Helper()
	var got vcsimlocal.PowerOp
	err := wait.PollUntilContextTimeout(s.ctx, 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		for _, o := range s.vc.PowerOps(vm) {
			if o.Op == op {
				got = o
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(s.t, err, "VM %s received no %s within %s; it received %v", vm, op, timeout, opNames(s.vc.PowerOps(vm)))
	return got
}

// opNames are the kinds of power operations, in order.
func opNames(ops []vcsimlocal.PowerOp) []string {
	out := []string{}
	for _, o := range ops {
		out = append(out, o.Op)
	}
	return out
}

// transferPods lists the pods of the migration's transfer Jobs.
func (s *stack) transferPods(m *v1alpha1.VirtualMachineMigration) []corev1.Pod {
	s.t.Helper()
	sel := v1alpha1.LabelMigrationUID + "=" + string(m.UID) + "," + v1alpha1.LabelComponent + "=" + v1alpha1.ComponentTransfer
	pods, err := s.kube.CoreV1().Pods(s.ns).List(s.ctx, metav1.ListOptions{LabelSelector: sel})
	require.NoError(s.t, err)
	return pods.Items
}

// transferProcess finds the vm-transfer process of a transfer pod on the
// node: the process of the pod's container whose command is vm-transfer,
// as the machine numbers it. It waits for the container to run.
func (s *stack) transferProcess(pod *corev1.Pod, timeout time.Duration) int {
	s.t.Helper()
	var pid int
	var last error
	err := wait.PollUntilContextTimeout(s.ctx, 20*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		p, err := s.kube.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Running == nil {
			return false, nil
		}
		pids, err := framework.ContainerPIDs(p.Status.ContainerStatuses[0].ContainerID)
		if err != nil {
			last = err
			return false, nil
		}
		for _, candidate := range pids {
			if comm, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(candidate), "comm")); err == nil && strings.TrimSpace(string(comm)) == "vm-transfer" {
				pid = candidate
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(s.t, err, "no vm-transfer process runs in pod %s within %s (last: %v)", pod.Name, timeout, last)
	return pid
}

// nameOfAttempt is the name of a transfer attempt's ServiceAccount, Role
// and RoleBinding.
func nameOfAttempt(migration string, attempt int32) string {
	return naming.TransferAccess(migration, attempt)
}

// foreignObject is an object a test created that no migration may touch.
type foreignObject struct {
	kind, name string
	uid        types.UID
	labels     map[string]string
}

func (f foreignObject) describe() string { return f.kind + " " + f.name }

// createForeignAccess creates a ServiceAccount, a Role and a RoleBinding
// named name with the given labels, as someone else's.
func (s *stack) createForeignAccess(name string, labels map[string]string) []foreignObject {
	s.t.Helper()
	meta := metav1.ObjectMeta{Name: name, Namespace: s.ns, Labels: labels}
	sa, err := s.kube.CoreV1().ServiceAccounts(s.ns).Create(s.ctx, &corev1.ServiceAccount{ObjectMeta: meta}, metav1.CreateOptions{})
	require.NoError(s.t, err)
	role, err := s.kube.RbacV1().Roles(s.ns).Create(s.ctx, &rbacv1.Role{ObjectMeta: meta, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}}}, metav1.CreateOptions{})
	require.NoError(s.t, err)
	rb, err := s.kube.RbacV1().RoleBindings(s.ns).Create(s.ctx, &rbacv1.RoleBinding{ObjectMeta: meta,
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: s.ns}}}, metav1.CreateOptions{})
	require.NoError(s.t, err)
	return []foreignObject{
		{kind: "serviceaccount", name: name, uid: sa.UID, labels: labels},
		{kind: "role", name: name, uid: role.UID, labels: labels},
		{kind: "rolebinding", name: name, uid: rb.UID, labels: labels},
	}
}

// sameObject says why a foreign object is not as the test created it:
// gone, replaced, being deleted or relabelled.
func (s *stack) sameObject(f foreignObject) error {
	var obj metav1.Object
	var err error
	switch f.kind {
	case "serviceaccount":
		obj, err = s.kube.CoreV1().ServiceAccounts(s.ns).Get(s.ctx, f.name, metav1.GetOptions{})
	case "role":
		obj, err = s.kube.RbacV1().Roles(s.ns).Get(s.ctx, f.name, metav1.GetOptions{})
	default:
		obj, err = s.kube.RbacV1().RoleBindings(s.ns).Get(s.ctx, f.name, metav1.GetOptions{})
	}
	switch {
	case err != nil:
		return err
	case obj.GetUID() != f.uid:
		return fmt.Errorf("replaced: uid %s, created as %s", obj.GetUID(), f.uid)
	case obj.GetDeletionTimestamp() != nil:
		return fmt.Errorf("being deleted since %s", obj.GetDeletionTimestamp())
	case !maps.Equal(obj.GetLabels(), f.labels):
		return fmt.Errorf("labels %v, created with %v", obj.GetLabels(), f.labels)
	}
	return nil
}
