package standins

import (
	"context"
	"fmt"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// webhookTimeoutSeconds is how long the API server waits for an answer.
const webhookTimeoutSeconds = 10

// webhookReadyTimeout bounds the wait for the API server to call the
// webhooks after they are registered.
const webhookReadyTimeout = 30 * time.Second

// configurationName names the webhook configurations: one pair per
// namespace the stand-ins serve, or one for the whole cluster.
func (a *Admission) configurationName() string {
	if a.cfg.Namespace == "" {
		return "standins-kubevirt-cdi"
	}
	return "standins-kubevirt-cdi-" + a.cfg.Namespace
}

// rule matches operations on one resource of one group version.
func rule(group, version, resource string, ops ...admissionregistrationv1.OperationType) []admissionregistrationv1.RuleWithOperations {
	return []admissionregistrationv1.RuleWithOperations{{
		Operations: ops,
		Rule: admissionregistrationv1.Rule{
			APIGroups: []string{group}, APIVersions: []string{version}, Resources: []string{resource},
			Scope: ptr.To(admissionregistrationv1.NamespacedScope),
		},
	}}
}

// clientConfig points the API server at one of the webhooks.
func (a *Admission) clientConfig(path string) admissionregistrationv1.WebhookClientConfig {
	return admissionregistrationv1.WebhookClientConfig{URL: ptr.To(a.url + path), CABundle: a.caBundle}
}

// namespaceSelector limits the webhooks to the configured namespace.
func (a *Admission) namespaceSelector() *metav1.LabelSelector {
	if a.cfg.Namespace == "" {
		return &metav1.LabelSelector{}
	}
	return &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: a.cfg.Namespace}}
}

// validatingWebhook is one validating webhook with the settings KubeVirt
// and CDI use: fail closed, no side effects, admission/v1.
func (a *Admission) validatingWebhook(name, path string, rules []admissionregistrationv1.RuleWithOperations) admissionregistrationv1.ValidatingWebhook {
	return admissionregistrationv1.ValidatingWebhook{
		Name: name, ClientConfig: a.clientConfig(path), Rules: rules,
		FailurePolicy: ptr.To(admissionregistrationv1.Fail), SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone),
		NamespaceSelector: a.namespaceSelector(), TimeoutSeconds: ptr.To[int32](webhookTimeoutSeconds),
		AdmissionReviewVersions: []string{"v1"},
	}
}

// register creates (or replaces) the validating and mutating webhook
// configurations.
func (a *Admission) register(ctx context.Context) error {
	kv, cdi := kubevirtv1.SchemeGroupVersion, cdiv1.SchemeGroupVersion
	create, update := admissionregistrationv1.Create, admissionregistrationv1.Update
	meta := metav1.ObjectMeta{Name: a.configurationName(), Labels: map[string]string{LabelStandin: "true"}}
	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: meta}
	if !a.cfg.RealCDI {
		validating.Webhooks = append(validating.Webhooks,
			a.validatingWebhook(webhookDVValidate, pathDVValidate, rule(cdi.Group, cdi.Version, "datavolumes", create, update)))
	}
	if !a.cfg.RealKubeVirt {
		validating.Webhooks = append(validating.Webhooks,
			a.validatingWebhook(webhookVM, pathVM, rule(kv.Group, kv.Version, "virtualmachines", create, update)),
			a.validatingWebhook(webhookVMICreate, pathVMICreate, rule(kv.Group, kv.Version, "virtualmachineinstances", create)))
	}
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: meta}
	if !a.cfg.RealCDI {
		dvMutate := a.validatingWebhook(webhookDVMutate, pathDVMutate, rule(cdi.Group, cdi.Version, "datavolumes", create, update))
		mutating.Webhooks = []admissionregistrationv1.MutatingWebhook{{
			Name: dvMutate.Name, ClientConfig: dvMutate.ClientConfig, Rules: dvMutate.Rules,
			FailurePolicy: dvMutate.FailurePolicy, SideEffects: dvMutate.SideEffects,
			NamespaceSelector: dvMutate.NamespaceSelector, TimeoutSeconds: dvMutate.TimeoutSeconds,
			AdmissionReviewVersions: dvMutate.AdmissionReviewVersions,
		}}
	}
	reg := a.c.kube.AdmissionregistrationV1()
	if err := a.unregister(ctx); err != nil {
		return err
	}
	if _, err := reg.ValidatingWebhookConfigurations().Create(ctx, validating, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("admission: registering the validating webhooks: %w", err)
	}
	if _, err := reg.MutatingWebhookConfigurations().Create(ctx, mutating, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("admission: registering the mutating webhook: %w", err)
	}
	return nil
}

// unregister deletes the webhook configurations, if they exist.
func (a *Admission) unregister(ctx context.Context) error {
	reg := a.c.kube.AdmissionregistrationV1()
	name := a.configurationName()
	if err := reg.ValidatingWebhookConfigurations().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("admission: deleting validating webhook configuration %s: %w", name, err)
	}
	if err := reg.MutatingWebhookConfigurations().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("admission: deleting mutating webhook configuration %s: %w", name, err)
	}
	return nil
}

// waitActive polls with dry-run requests until the API server calls each
// webhook: a VM without a run strategy is denied by the VM webhook (not
// registered beside the real KubeVirt), a
// DataVolume with both pvc and storage by the DataVolume webhook, and a
// clone DataVolume comes back with the clone token the mutating webhook adds.
func (a *Admission) waitActive(ctx context.Context) error {
	ns := a.cfg.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	vm := &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "standins-webhook-probe", Namespace: ns},
		Spec:       kubevirtv1.VirtualMachineSpec{Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{}},
	}
	claim := &cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: ns, Name: "standins-webhook-probe"}}
	bad := &cdiv1.DataVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "standins-webhook-probe", Namespace: ns},
		Spec:       cdiv1.DataVolumeSpec{Source: claim, PVC: &corev1.PersistentVolumeClaimSpec{}, Storage: &cdiv1.StorageSpec{}},
	}
	good := &cdiv1.DataVolume{ObjectMeta: bad.ObjectMeta, Spec: cdiv1.DataVolumeSpec{Source: claim, Storage: &cdiv1.StorageSpec{}}}
	var last string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, webhookReadyTimeout, true, func(ctx context.Context) (bool, error) {
		if !a.cfg.RealKubeVirt {
			_, err := a.c.kv.KubevirtV1().VirtualMachines(ns).Create(ctx, vm, dry)
			if !deniedBy(err, webhookVM) {
				last = fmt.Sprintf("VM probe: %v", err)
				return false, nil
			}
		}
		if a.cfg.RealCDI {
			return true, nil
		}
		_, err := a.c.cdi.CdiV1beta1().DataVolumes(ns).Create(ctx, bad, dry)
		if !deniedBy(err, webhookDVValidate) {
			last = fmt.Sprintf("DataVolume validation probe: %v", err)
			return false, nil
		}
		got, err := a.c.cdi.CdiV1beta1().DataVolumes(ns).Create(ctx, good, dry)
		if err != nil || got.Annotations[AnnotationCloneToken] == "" {
			last = fmt.Sprintf("DataVolume mutation probe: %v", err)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("admission: the API server does not call the webhooks at %s (last: %s): %w", a.url, last, err)
	}
	return nil
}

// deniedBy reports whether err is a denial by the named webhook.
func deniedBy(err error, webhook string) bool {
	return err != nil && strings.Contains(err.Error(), fmt.Sprintf("admission webhook %q denied the request", webhook))
}
