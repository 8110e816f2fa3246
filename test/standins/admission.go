package standins

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// Names and paths of the webhooks, as KubeVirt's virt-operator
// (pkg/virt-operator/resource/generate/components/webhooks.go) and CDI's
// operator (pkg/operator/resources/cluster/apiserver.go) register them, so
// that a denial reads as it does in a real cluster: `admission webhook
// "virtualmachine-validator.kubevirt.io" denied the request: ...`.
const (
	webhookVM         = "virtualmachine-validator.kubevirt.io"
	webhookVMICreate  = "virtualmachineinstances-create-validator.kubevirt.io"
	webhookDVValidate = "datavolume-validate.cdi.kubevirt.io"
	webhookDVMutate   = "datavolume-mutate.cdi.kubevirt.io"

	pathVM         = "/virtualmachines-validate"
	pathVMICreate  = "/virtualmachineinstances-validate-create"
	pathDVValidate = "/datavolume-validate"
	pathDVMutate   = "/datavolume-mutate"
)

// maxAdmissionReview bounds the body of an AdmissionReview request.
const maxAdmissionReview = 8 << 20

// admitFunc answers one admission request.
type admitFunc func(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse

// Admission serves the admission webhooks of the KubeVirt and CDI
// stand-ins over TLS on 127.0.0.1, with a certificate of its own CA, and
// registers them with the API server by URL and CA bundle; see the package
// documentation for the rules.
type Admission struct {
	cfg      Config
	c        *clients
	tokens   *cloneTokens
	server   *http.Server
	url      string
	caBundle []byte
	served   chan error
}

// StartAdmission serves the webhooks alone, without the stand-ins'
// controllers: it registers them (for cfg.Namespace only when it is set;
// cfg.RestConfig is the only other field it reads) and returns once the
// API server calls them. Close unregisters and stops them.
func StartAdmission(ctx context.Context, cfg Config) (*Admission, error) {
	if cfg.RestConfig == nil {
		return nil, errors.New("standins: no rest config")
	}
	c, err := newClients(cfg.RestConfig, false)
	if err != nil {
		return nil, err
	}
	return startAdmission(ctx, cfg, c)
}

func startAdmission(ctx context.Context, cfg Config, c *clients) (*Admission, error) {
	tokens, err := newCloneTokens()
	if err != nil {
		return nil, err
	}
	a := &Admission{cfg: cfg, c: c, tokens: tokens, served: make(chan error, 1)}
	if err := a.serve(); err != nil {
		return nil, err
	}
	if err := a.register(ctx); err != nil {
		a.shutdown()
		return nil, err
	}
	if err := a.waitActive(ctx); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

// serve generates the CA and serving certificate and starts the HTTPS
// server on a free port of 127.0.0.1.
func (a *Admission) serve() error {
	caPEM, cert, err := webhookCertificate()
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("admission: listening: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle(pathVM, admissionHandler(a.admitVirtualMachine))
	mux.Handle(pathVMICreate, admissionHandler(a.admitVirtualMachineInstance))
	mux.Handle(pathDVValidate, admissionHandler(a.admitDataVolume))
	mux.Handle(pathDVMutate, admissionHandler(a.mutateDataVolume))
	a.server = &http.Server{
		Handler:           mux,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
	}
	a.url = "https://" + l.Addr().String()
	a.caBundle = caPEM
	go func() { a.served <- a.server.ServeTLS(l, "", "") }()
	return nil
}

// Close unregisters the webhooks and stops the server.
func (a *Admission) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.unregister(ctx); err != nil {
		klog.FromContext(ctx).Error(err, "admission: unregistering the webhooks")
	}
	a.shutdown()
}

func (a *Admission) shutdown() { shutdownServer(a.server, a.served, "admission") }

// shutdownServer stops a webhook server and logs how its serving ended
// (what: whose server).
func shutdownServer(server *http.Server, served <-chan error, what string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = server.Shutdown(ctx)
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		klog.FromContext(ctx).Error(err, what+": serving")
	}
}

// admissionHandler decodes an AdmissionReview, answers it with admit and
// writes the review back with the request's UID.
func admissionHandler(admit admitFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(io.LimitReader(r.Body, maxAdmissionReview)).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "the body is not an admission.k8s.io/v1 AdmissionReview with a request", http.StatusBadRequest)
			return
		}
		resp := admit(r.Context(), review.Request)
		resp.UID = review.Request.UID
		out := admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
			Response: resp,
		}
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(&out); err != nil {
			klog.FromContext(r.Context()).Error(err, "admission: writing the response")
		}
	})
}

// webhookCertificate makes a CA and a serving certificate for 127.0.0.1
// signed by it; it returns the CA in PEM (the webhooks' caBundle) and the
// serving key pair.
func webhookCertificate() ([]byte, tls.Certificate, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, fmt.Errorf("admission: generating the CA key: %w", err)
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "standins-admission-ca"},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(7 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, fmt.Errorf("admission: signing the CA: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, fmt.Errorf("admission: generating the serving key: %w", err)
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(7 * 24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, fmt.Errorf("admission: signing the serving certificate: %w", err)
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	return caPEM, tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: key}, nil
}
