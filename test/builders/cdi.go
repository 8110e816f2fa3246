package builders

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// AdoptClaim plays CDI's claim adoption for a DataVolume that succeeded:
// the claim of its name, when it exists without a controller, gets the
// DataVolume as its controller and is bound (the tests that play CDI by
// hand use it; the stand-in and the real CDI do it themselves).
func AdoptClaim(ctx context.Context, kube kubernetes.Interface, dv *cdiv1.DataVolume) error {
	claims := kube.CoreV1().PersistentVolumeClaims(dv.Namespace)
	pvc, err := claims.Get(ctx, dv.Name, metav1.GetOptions{})
	if err != nil || metav1.GetControllerOf(pvc) != nil {
		return nil
	}
	pvc.OwnerReferences = append(pvc.OwnerReferences, *metav1.NewControllerRef(dv, cdiv1.SchemeGroupVersion.WithKind("DataVolume")))
	if pvc, err = claims.Update(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("adopting claim %s/%s: %w", dv.Namespace, dv.Name, err)
	}
	pvc.Status.Phase = corev1.ClaimBound
	if _, err = claims.UpdateStatus(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("binding claim %s/%s: %w", dv.Namespace, dv.Name, err)
	}
	return nil
}
