package cdi

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Certificate lifetimes: a test cluster lives minutes; CDI's operator
// would rotate its signers after 24 h and its leaf certificates after 12 h.
const (
	signerLifetime = 48 * time.Hour
	leafLifetime   = 24 * time.Hour
	rsaBits        = 2048
)

// keyPair is a certificate and its key, PEM-encoded.
type keyPair struct {
	cert, key []byte
	parsed    *x509.Certificate
	signer    *rsa.PrivateKey
}

// newSigner makes a self-signed CA named cn.
func newSigner(cn string, now time.Time) (*keyPair, error) {
	return issue(nil, &x509.Certificate{
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(signerLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	})
}

// serverCert issues a serving certificate for a Service's names.
func (ca *keyPair) serverCert(service, namespace string, now time.Time) (*keyPair, error) {
	return issue(ca, &x509.Certificate{
		Subject:     pkix.Name{CommonName: service},
		DNSNames:    serviceNames(service, namespace),
		NotBefore:   now.Add(-time.Minute),
		NotAfter:    now.Add(leafLifetime),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

// clientCert issues a client certificate for user.
func (ca *keyPair) clientCert(user string, now time.Time) (*keyPair, error) {
	return issue(ca, &x509.Certificate{
		Subject:     pkix.Name{CommonName: user},
		NotBefore:   now.Add(-time.Minute),
		NotAfter:    now.Add(leafLifetime),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

// serviceNames are the DNS names a Service is reached by.
func serviceNames(service, namespace string) []string {
	return []string{
		service, service + "." + namespace, service + "." + namespace + ".svc",
		service + "." + namespace + ".svc.cluster.local",
	}
}

// issue signs tmpl with ca, or self-signs it when ca is nil.
func issue(ca *keyPair, tmpl *x509.Certificate) (*keyPair, error) {
	key, err := rsa.GenerateKey(rand.Reader, rsaBits)
	if err != nil {
		return nil, fmt.Errorf("generating a key for %s: %w", tmpl.Subject.CommonName, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, fmt.Errorf("choosing a serial number: %w", err)
	}
	tmpl.SerialNumber = serial
	parent, signer := tmpl, key
	if ca != nil {
		parent, signer = ca.parsed, ca.signer
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		return nil, fmt.Errorf("issuing the certificate of %s: %w", tmpl.Subject.CommonName, err)
	}
	parsed, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("reading back the certificate of %s: %w", tmpl.Subject.CommonName, err)
	}
	return &keyPair{
		cert:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		key:    pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
		parsed: parsed,
		signer: key,
	}, nil
}

// tlsSecret is a kubernetes.io/tls Secret holding kp.
func tlsSecret(namespace, name string, kp *keyPair) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: commonLabels()},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: kp.cert, corev1.TLSPrivateKeyKey: kp.key},
	}
}

// bundle is the CA bundle ConfigMap of a signer, as CDI's cert manager
// writes it (key ca-bundle.crt).
func bundle(namespace, name string, ca *keyPair) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: commonLabels()},
		Data:       map[string]string{"ca-bundle.crt": string(ca.cert)},
	}
}

// tokenKeySecret is cdi-api-signing-key: the RSA key CDI's API server
// signs upload and clone tokens with and the controller verifies them
// with (id_rsa, PKCS#1; id_rsa.pub, PKIX), as CDI's keystore writes it.
func tokenKeySecret(namespace string) (*corev1.Secret, error) {
	key, err := rsa.GenerateKey(rand.Reader, rsaBits)
	if err != nil {
		return nil, fmt.Errorf("generating the token signing key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("encoding the token public key: %w", err)
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: apiSigningKeySecret, Namespace: namespace, Labels: commonLabels()},
		Type:       corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			"id_rsa":     pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
			"id_rsa.pub": pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}),
		},
	}, nil
}

// pki is every certificate object of an installation, and the API
// server's CA bundle for the webhooks and the APIService.
type pki struct {
	secrets    []*corev1.Secret
	configMaps []*corev1.ConfigMap
	apiCA      []byte
}

// newPKI makes CDI's certificates as CDI's operator defines them
// (pkg/operator/resources/cert): four signers, their bundles, the API
// server's and upload proxy's serving certificates, the upload client
// certificate; and the token key.
func newPKI(namespace string, now time.Time) (*pki, error) {
	p := &pki{}
	for _, def := range []struct {
		signer, bundle, target, service, user string
	}{
		{signer: "cdi-apiserver-signer", bundle: "cdi-apiserver-signer-bundle", target: "cdi-apiserver-server-cert", service: apiService},
		{signer: "cdi-uploadproxy-signer", bundle: "cdi-uploadproxy-signer-bundle", target: "cdi-uploadproxy-server-cert", service: uploadProxyName},
		{signer: "cdi-uploadserver-signer", bundle: "cdi-uploadserver-signer-bundle"},
		{signer: "cdi-uploadserver-client-signer", bundle: "cdi-uploadserver-client-signer-bundle", target: "cdi-uploadserver-client-cert", user: "client.upload-server.cdi.kubevirt.io"},
	} {
		ca, err := newSigner(namespace+"_"+def.signer+"@"+fmt.Sprint(now.Unix()), now)
		if err != nil {
			return nil, err
		}
		p.secrets = append(p.secrets, tlsSecret(namespace, def.signer, ca))
		p.configMaps = append(p.configMaps, bundle(namespace, def.bundle, ca))
		if def.signer == "cdi-apiserver-signer" {
			p.apiCA = ca.cert
		}
		var leaf *keyPair
		switch {
		case def.service != "":
			leaf, err = ca.serverCert(def.service, namespace, now)
		case def.user != "":
			leaf, err = ca.clientCert(def.user, now)
		default:
			continue
		}
		if err != nil {
			return nil, err
		}
		p.secrets = append(p.secrets, tlsSecret(namespace, def.target, leaf))
	}
	tokens, err := tokenKeySecret(namespace)
	if err != nil {
		return nil, err
	}
	p.secrets = append(p.secrets, tokens)
	return p, nil
}
