package standins

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// PolicyConfig describes a site's own validating webhook, as a policy
// engine (Kyverno, Gatekeeper) registers one: it refuses every create of
// one resource in one namespace with a message. It is neither KubeVirt's
// nor CDI's: tests use it for what the controller makes of a webhook's
// refusal, in the API server's own words (`admission webhook "<name>"
// denied the request: <message>`).
type PolicyConfig struct {
	// RestConfig reaches the API server as an administrator.
	RestConfig *rest.Config
	// Namespace the webhook applies to.
	Namespace string
	// Resource it refuses creates of.
	Resource schema.GroupVersionResource
	// Name of the webhook (a domain name, e.g. vm-policy.example.com).
	Name string
	// Message of its refusals.
	Message string
	// Probe is an object of Resource the API server would otherwise
	// admit, created as a dry run until the webhook refuses it: the API
	// server then calls it.
	Probe *unstructured.Unstructured
}

// PolicyWebhook serves and registers a PolicyConfig.
type PolicyWebhook struct {
	cfg    PolicyConfig
	kube   kubernetes.Interface
	server *http.Server
	served chan error
	calls  atomic.Int64
	// uid is the registered configuration's: Close deletes that one only.
	uid types.UID
}

// StartPolicyWebhook serves the webhook over TLS on 127.0.0.1, registers
// it and returns once the API server calls it. Close unregisters it.
func StartPolicyWebhook(ctx context.Context, cfg PolicyConfig) (*PolicyWebhook, error) {
	kube, err := kubernetes.NewForConfig(cfg.RestConfig)
	if err != nil {
		return nil, err
	}
	p := &PolicyWebhook{cfg: cfg, kube: kube, served: make(chan error, 1)}
	caPEM, cert, err := webhookCertificate()
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("policy webhook: listening: %w", err)
	}
	p.server = &http.Server{
		Handler:           admissionHandler(p.refuse),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { p.served <- p.server.ServeTLS(l, "", "") }()
	if err := p.register(ctx, "https://"+l.Addr().String()+"/validate", caPEM); err != nil {
		p.shutdown()
		return nil, err
	}
	if err := p.waitActive(ctx); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// refuse denies every request.
func (p *PolicyWebhook) refuse(context.Context, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	p.calls.Add(1)
	return &admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: p.cfg.Message}}
}

// register creates the webhook's configuration, for creates of the
// resource in the namespace, failing closed, without side effects.
func (p *PolicyWebhook) register(ctx context.Context, url string, caPEM []byte) error {
	r := p.cfg.Resource
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: p.configurationName(), Labels: map[string]string{LabelStandin: "true"}},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: p.cfg.Name, ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To(url), CABundle: caPEM},
			Rules:         rule(r.Group, r.Version, r.Resource, admissionregistrationv1.Create),
			FailurePolicy: ptr.To(admissionregistrationv1.Fail), SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone),
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: p.cfg.Namespace}},
			TimeoutSeconds:          ptr.To[int32](webhookTimeoutSeconds),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	created, err := p.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, cfg, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("policy webhook: registering %s: %w", cfg.Name, err)
	}
	p.uid = created.UID
	return nil
}

func (p *PolicyWebhook) configurationName() string {
	return "policy-" + p.cfg.Name + "-" + p.cfg.Namespace
}

// waitActive creates the probe as a dry run until the webhook is called.
func (p *PolicyWebhook) waitActive(ctx context.Context) error {
	dyn, err := dynamic.NewForConfig(p.cfg.RestConfig)
	if err != nil {
		return err
	}
	api := dyn.Resource(p.cfg.Resource).Namespace(p.cfg.Namespace)
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, webhookReadyTimeout, true, func(ctx context.Context) (bool, error) {
		_, _ = api.Create(ctx, p.cfg.Probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return p.calls.Load() > 0, nil
	})
	if err != nil {
		return fmt.Errorf("policy webhook %s: the API server did not call it within %s", p.cfg.Name, webhookReadyTimeout)
	}
	return nil
}

// Close unregisters the webhook and stops its server.
func (p *PolicyWebhook) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := p.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, p.configurationName(),
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		klog.FromContext(ctx).Error(err, "policy webhook: unregistering", "configuration", p.configurationName())
	}
	p.shutdown()
}

func (p *PolicyWebhook) shutdown() { shutdownServer(p.server, p.served, "policy webhook") }
