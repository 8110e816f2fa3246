package standins

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// AnnotationCloneToken is where CDI's mutating webhook records that the
// creator of a clone DataVolume was authorized (CDI's
// pkg/controller/common/util.go, AnnCloneToken). The stand-in's token is its
// own signed statement, not CDI's JWT.
const AnnotationCloneToken = "cdi.kubevirt.io/storage.clone.token"

// cloneTokens signs and checks the stand-in's clone tokens with a key that
// lives as long as the stand-ins.
type cloneTokens struct {
	key []byte
}

// cloneTokenPayload is what a clone token vouches for: this source may be
// cloned into this target.
type cloneTokenPayload struct {
	SourceNamespace string `json:"sourceNamespace"`
	SourceName      string `json:"sourceName"`
	TargetNamespace string `json:"targetNamespace"`
	TargetName      string `json:"targetName"`
}

func newCloneTokens() (*cloneTokens, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("clone tokens: generating the key: %w", err)
	}
	return &cloneTokens{key: key}, nil
}

// sign makes a token: the payload and its HMAC, both base64url.
func (t *cloneTokens) sign(p cloneTokenPayload) (string, error) {
	body, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("clone tokens: encoding: %w", err)
	}
	enc := base64.RawURLEncoding.EncodeToString(body)
	mac := hmac.New(sha256.New, t.key)
	mac.Write([]byte(enc))
	return enc + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil)), nil
}

// verify checks a token's signature and that it vouches for want.
func (t *cloneTokens) verify(token string, want cloneTokenPayload) error {
	enc, sig, ok := strings.Cut(token, ".")
	if !ok {
		return errors.New("error verifying token: malformed")
	}
	mac := hmac.New(sha256.New, t.key)
	mac.Write([]byte(enc))
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, mac.Sum(nil)) {
		return errors.New("error verifying token: bad signature")
	}
	body, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return errors.New("error verifying token: malformed payload")
	}
	var p cloneTokenPayload
	if err := json.Unmarshal(body, &p); err != nil {
		return errors.New("error verifying token: malformed payload")
	}
	if p != want {
		return fmt.Errorf("error verifying token: it is for %s/%s into %s/%s", p.SourceNamespace, p.SourceName, p.TargetNamespace, p.TargetName)
	}
	return nil
}

// cdiAuthProxy is CDI's AuthorizationHelperProxy against the real API
// server: SubjectAccessReviews, Namespaces and DataSources.
type cdiAuthProxy struct {
	ctx context.Context
	c   *clients
}

// CreateSar implements cdiv1.AuthorizationHelperProxy with a real
// SubjectAccessReview.
func (p cdiAuthProxy) CreateSar(sar *authorizationv1.SubjectAccessReview) (*authorizationv1.SubjectAccessReview, error) {
	return p.c.kube.AuthorizationV1().SubjectAccessReviews().Create(p.ctx, sar, metav1.CreateOptions{})
}

// GetNamespace implements cdiv1.AuthorizationHelperProxy.
func (p cdiAuthProxy) GetNamespace(name string) (*corev1.Namespace, error) {
	return p.c.kube.CoreV1().Namespaces().Get(p.ctx, name, metav1.GetOptions{})
}

// GetDataSource implements cdiv1.AuthorizationHelperProxy.
func (p cdiAuthProxy) GetDataSource(namespace, name string) (*cdiv1.DataSource, error) {
	return p.c.cdi.CdiV1beta1().DataSources(namespace).Get(p.ctx, name, metav1.GetOptions{})
}

var dataVolumeResource = metav1.GroupVersionResource{Group: cdiv1.SchemeGroupVersion.Group, Version: cdiv1.SchemeGroupVersion.Version, Resource: "datavolumes"}

// mutateDataVolume is CDI's mutating DataVolume webhook (CDI v1.66
// pkg/apiserver/webhooks/datavolume-mutate.go, Admit): it authorizes the
// requesting user for a clone with the CDI API module's own helper,
// DataVolume.AuthorizeUser (pkg/apis/core/v1beta1/authorize.go), which
// lets a clone within one namespace through and otherwise asks the API
// server, by SubjectAccessReviews for the request's user, whether that user
// may create datavolumes/source, or else pods, in the source namespace
// (authorize_utils.go, CanUserClonePVC). A denial fails the request with
// CDI's message; an allowed create gets a clone token annotation.
func (a *Admission) mutateDataVolume(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.Resource != dataVolumeResource {
		return errorResponse(fmt.Errorf("expect resource to be '%s'", dataVolumeResource.Resource))
	}
	dv := &cdiv1.DataVolume{}
	if err := json.Unmarshal(req.Object.Raw, dv); err != nil {
		return errorResponse(err)
	}
	if dv.DeletionTimestamp != nil {
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	resp, err := dv.AuthorizeUser(req.Namespace, req.Name, cdiAuthProxy{ctx: ctx, c: a.c}, req.UserInfo)
	if errors.Is(err, cdiv1.ErrNoTokenOkay) {
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	if err != nil {
		return errorResponse(err)
	}
	if !resp.Allowed {
		return cdiDenied([]metav1.StatusCause{{
			Type: metav1.CauseTypeFieldValueInvalid, Message: resp.Reason,
			Field: field.NewPath("spec", "source", "PVC", "namespace").String(),
		}})
	}
	if req.Operation != admissionv1.Create {
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	return a.addCloneToken(dv, req, resp.Handler)
}

// addCloneToken answers with a JSON patch adding the clone token.
func (a *Admission) addCloneToken(dv *cdiv1.DataVolume, req *admissionv1.AdmissionRequest, h cdiv1.CloneSourceHandler) *admissionv1.AdmissionResponse {
	target := cloneTokenPayload{
		SourceNamespace: h.SourceNamespace, SourceName: h.SourceName,
		TargetNamespace: orDefault(dv.Namespace, req.Namespace), TargetName: orDefault(dv.Name, req.Name),
	}
	target.SourceNamespace = orDefault(target.SourceNamespace, target.TargetNamespace)
	token, err := a.tokens.sign(target)
	if err != nil {
		return errorResponse(err)
	}
	op := map[string]any{"op": "add", "path": "/metadata/annotations", "value": map[string]string{AnnotationCloneToken: token}}
	if len(dv.Annotations) > 0 {
		op = map[string]any{"op": "add", "path": "/metadata/annotations/" + jsonPointerEscape(AnnotationCloneToken), "value": token}
	}
	patch, err := json.Marshal([]any{op})
	if err != nil {
		return errorResponse(err)
	}
	return &admissionv1.AdmissionResponse{Allowed: true, Patch: patch, PatchType: ptr.To(admissionv1.PatchTypeJSONPatch)}
}

// jsonPointerEscape escapes a key for a JSON pointer (RFC 6901).
func jsonPointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// admitDataVolume is CDI's validating DataVolume webhook (CDI v1.66
// pkg/apiserver/webhooks/datavolume-validate.go, Admit), for the rules that
// matter to a clone: the spec is immutable, and validateDataVolumeSpec.
func (a *Admission) admitDataVolume(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.Resource != dataVolumeResource {
		return errorResponse(fmt.Errorf("expect resource to be '%s'", dataVolumeResource.Resource))
	}
	dv := &cdiv1.DataVolume{}
	if err := json.Unmarshal(req.Object.Raw, dv); err != nil {
		return errorResponse(err)
	}
	if req.Operation == admissionv1.Update {
		old := &cdiv1.DataVolume{}
		if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
			return errorResponse(err)
		}
		if cause := dataVolumeSpecUnchanged(old, dv); cause != nil {
			return cdiDenied([]metav1.StatusCause{*cause})
		}
	}
	if req.Operation == admissionv1.Create {
		if cause, err := a.claimNotTaken(ctx, dv); err != nil {
			return errorResponse(err)
		} else if cause != nil {
			return cdiDenied([]metav1.StatusCause{*cause})
		}
	}
	if causes := validateDataVolumeSpec(field.NewPath("spec"), &dv.Spec); len(causes) > 0 {
		return cdiDenied(causes)
	}
	return &admissionv1.AdmissionResponse{Allowed: true}
}

// claimNotTaken is CDI's check that no claim of the DataVolume's name
// exists that a DataVolume does not control (datavolume-validate.go, Admit),
// unless the DataVolume may take it over (claimMayExistBefore): a claim
// populated for it, or one it is allowed to adopt.
func (a *Admission) claimNotTaken(ctx context.Context, dv *cdiv1.DataVolume) (*metav1.StatusCause, error) {
	pvc, err := a.c.kube.CoreV1().PersistentVolumeClaims(dv.Namespace).Get(ctx, dv.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if claimMayExistBefore(pvc, dv) {
		return nil, nil
	}
	if owner := metav1.GetControllerOf(pvc); owner != nil && owner.Kind == "DataVolume" {
		return nil, nil
	}
	return &metav1.StatusCause{
		Type:    metav1.CauseTypeFieldValueDuplicate,
		Message: fmt.Sprintf("Destination PVC %s/%s already exists", pvc.Namespace, pvc.Name),
		Field:   field.NewPath("DataVolume").Child("Name").String(),
	}, nil
}

// Annotations of CDI's claim adoption (CDI v1.65 and v1.66
// pkg/controller/common/util.go).
const (
	// AnnotationAllowClaimAdoption on a DataVolume lets it adopt the claim
	// of its name that exists before it (AnnAllowClaimAdoption): parsed as
	// strconv.ParseBool, it wins over CDI's DataVolumeClaimAdoption feature
	// gate, which the stand-in holds off.
	AnnotationAllowClaimAdoption = "cdi.kubevirt.io/allowClaimAdoption"
	// AnnotationPopulatedFor on a claim names the DataVolume it was
	// populated for, which may then take it (AnnPopulatedFor).
	AnnotationPopulatedFor = "cdi.kubevirt.io/storage.populatedFor"
	// AnnotationCreatedForDataVolume on a claim is the UID of the
	// DataVolume CDI created it for; that DataVolume never adopts it
	// (AnnCreatedForDataVolume), so it still does its work.
	AnnotationCreatedForDataVolume = "cdi.kubevirt.io/createdForDataVolume"
)

// claimMayExistBefore is CDI's ClaimMayExistBeforeDataVolume
// (pkg/controller/common/util.go), which both its webhook and its
// controller ask: the claim was populated for the DataVolume, or the
// DataVolume may adopt it (AllowClaimAdoption: not a claim CDI created for
// this very DataVolume, and the adoption annotation true). Such a claim
// needs no work: the DataVolume takes it as it is.
func claimMayExistBefore(pvc *corev1.PersistentVolumeClaim, dv *cdiv1.DataVolume) bool {
	if pvc == nil || dv == nil {
		return false
	}
	if name, ok := pvc.Annotations[AnnotationPopulatedFor]; ok && name == dv.Name {
		return true
	}
	if uid, ok := pvc.Annotations[AnnotationCreatedForDataVolume]; ok && uid == string(dv.UID) {
		return false
	}
	allow, _ := strconv.ParseBool(dv.Annotations[AnnotationAllowClaimAdoption])
	return allow
}

// errorResponse is a failed admission with a 400 and err's text, as both
// KubeVirt's and CDI's webhooks answer a request they cannot read.
func errorResponse(err error) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Result: &metav1.Status{Message: err.Error(), Code: http.StatusBadRequest}}
}

// cdiDenied is CDI's rejection (CDI v1.66 pkg/apiserver/webhooks/handler.go,
// toRejectedAdmissionResponse): a 422 whose message is every cause's
// message, each after a space.
func cdiDenied(causes []metav1.StatusCause) *admissionv1.AdmissionResponse {
	var msg strings.Builder
	for _, c := range causes {
		msg.WriteString(" " + c.Message)
	}
	return &admissionv1.AdmissionResponse{Result: &metav1.Status{
		Message: msg.String(), Code: http.StatusUnprocessableEntity, Details: &metav1.StatusDetails{Causes: causes},
	}}
}
