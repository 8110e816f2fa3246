package standins

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

var (
	virtualMachineResource = metav1.GroupVersionResource{
		Group: kubevirtv1.SchemeGroupVersion.Group, Version: kubevirtv1.SchemeGroupVersion.Version, Resource: "virtualmachines",
	}
	virtualMachineInstanceResource = metav1.GroupVersionResource{
		Group: kubevirtv1.SchemeGroupVersion.Group, Version: kubevirtv1.SchemeGroupVersion.Version, Resource: "virtualmachineinstances",
	}
)

// maxReportedCauses is how many causes KubeVirt puts in the message.
const maxReportedCauses = 10

// admitVirtualMachine is KubeVirt's VM webhook (kubevirt v1.9.0
// pkg/virt-api/webhooks/validating-webhook/admitters/vms-admitter.go,
// VMsAdmitter.Admit) for the rules listed in kubevirt_rules.go: a VM being
// deleted passes; otherwise ValidateVirtualMachineSpec's rules apply, then
// the storage admitter's namespace rule, and spec.running draws KubeVirt's
// deprecation warning.
func (a *Admission) admitVirtualMachine(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.Resource != virtualMachineResource {
		return errorResponse(fmt.Errorf("expect resource to be '%s'", virtualMachineResource.Resource))
	}
	vm := &kubevirtv1.VirtualMachine{}
	if err := json.Unmarshal(req.Object.Raw, vm); err != nil {
		return errorResponse(err)
	}
	if vm.DeletionTimestamp != nil {
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	if causes := validateVirtualMachineSpec(field.NewPath("spec"), &vm.Spec); len(causes) > 0 {
		return kubevirtDenied(causes)
	}
	if causes := dataVolumeTemplateNamespaces(vm, req.Namespace); len(causes) > 0 {
		return kubevirtDenied(causes)
	}
	resp := &admissionv1.AdmissionResponse{Allowed: true}
	if vm.Spec.Running != nil {
		resp.Warnings = append(resp.Warnings, "spec.running is deprecated, please use spec.runStrategy instead.")
	}
	return resp
}

// admitVirtualMachineInstance is KubeVirt's VMI create webhook
// (vmi-create-admitter.go, VMICreateAdmitter.Admit): the spec rules, a
// disk or filesystem for every volume, and a memory size.
func (a *Admission) admitVirtualMachineInstance(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.Resource != virtualMachineInstanceResource {
		return errorResponse(fmt.Errorf("expect resource to be '%s'", virtualMachineInstanceResource.Resource))
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := json.Unmarshal(req.Object.Raw, vmi); err != nil {
		return errorResponse(err)
	}
	path := field.NewPath("spec")
	causes := validateInstanceSpec(path, &vmi.Spec)
	causes = append(causes, volumesHaveDisks(path, &vmi.Spec)...)
	causes = append(causes, memoryRequested(path, &vmi.Spec)...)
	if len(causes) > 0 {
		return kubevirtDenied(causes)
	}
	return &admissionv1.AdmissionResponse{Allowed: true}
}

// kubevirtDenied is KubeVirt's rejection (pkg/util/webhooks/webhooks.go,
// ToAdmissionResponse): a 422 Invalid whose message joins the first ten
// causes' messages with ", ".
func kubevirtDenied(causes []metav1.StatusCause) *admissionv1.AdmissionResponse {
	shown := causes
	if len(shown) > maxReportedCauses {
		shown = shown[:maxReportedCauses]
	}
	msgs := make([]string, len(shown))
	for i, c := range shown {
		msgs[i] = c.Message
	}
	msg := strings.Join(msgs, ", ")
	if more := len(causes) - len(shown); more > 0 {
		msg = fmt.Sprintf("%s, and %d more validation errors", msg, more)
	}
	return &admissionv1.AdmissionResponse{Result: &metav1.Status{
		Message: msg, Reason: metav1.StatusReasonInvalid, Code: http.StatusUnprocessableEntity,
		Details: &metav1.StatusDetails{Causes: causes},
	}}
}
