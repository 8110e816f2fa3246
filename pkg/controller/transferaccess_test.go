package controller

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
)

// TestCleanupFinishesTransferAccessLeftByACrash: the staging claims, Jobs
// and ConfigMaps are gone, but a crash left the transfer attempt's
// ServiceAccount. The migration must not succeed before it is deleted.
func TestCleanupFinishesTransferAccessLeftByACrash(t *testing.T) {
	m := newMigration(withFinalizer, inPhase(v1alpha1.PhaseCleaningUp), func(m *v1alpha1.VirtualMachineMigration) {
		m.Status.Transfer = &v1alpha1.JobStatus{JobName: "web-01-transfer-2", Attempt: 2}
	})
	f := newFixture(t, m)
	ctx := context.Background()
	name := naming.TransferAccess(m.Name, 2)
	for _, sa := range []*corev1.ServiceAccount{
		{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: m.Namespace, Labels: map[string]string{v1alpha1.LabelMigrationUID: string(m.UID)}}},
		// Attempt 1's name, but another migration's object: not ours to delete.
		{ObjectMeta: metav1.ObjectMeta{Name: naming.TransferAccess(m.Name, 1), Namespace: m.Namespace, Labels: map[string]string{v1alpha1.LabelMigrationUID: "other"}}},
	} {
		_, err := f.kube.CoreV1().ServiceAccounts(m.Namespace).Create(ctx, sa, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	f.sync(m)
	cur := f.refresh(m)
	require.Equal(t, v1alpha1.PhaseCleaningUp, cur.Status.Phase, "succeeded with transfer access left")
	_, err := f.kube.CoreV1().ServiceAccounts(m.Namespace).Get(ctx, name, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the attempt's ServiceAccount was not deleted: %v", err)

	f.sync(cur)
	cur = f.refresh(cur)
	require.Equal(t, v1alpha1.PhaseSucceeded, cur.Status.Phase)
}
