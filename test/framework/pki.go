package framework

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"time"
)

// certValidity is how long the node's certificates are valid: far longer
// than any test run, short enough to be plainly test material.
const certValidity = 7 * 24 * time.Hour

// certAuthority signs the node's certificates: the client certificates of
// the kubelet, kube-proxy and the API server's kubelet client, and the
// kubelet's serving certificate. The API server trusts it for clients
// (--client-ca-file) and for kubelets (--kubelet-certificate-authority).
type certAuthority struct {
	cert     *x509.Certificate
	key      *ecdsa.PrivateKey
	certPath string
}

// newCertAuthority creates a self-signed CA named cn and writes its
// certificate to path.
func newCertAuthority(path, cn string) (*certAuthority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the node CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("signing the node CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing the node CA: %w", err)
	}
	if err := writePEM(path, "CERTIFICATE", der, 0o644); err != nil {
		return nil, err
	}
	return &certAuthority{cert: cert, key: key, certPath: path}, nil
}

// certRequest says what a certificate is for.
type certRequest struct {
	commonName    string
	organizations []string
	ips           []net.IP
	dnsNames      []string
	server        bool
}

// issue signs a certificate for req and writes it and its key to
// <prefix>.crt and <prefix>.key.
func (ca *certAuthority) issue(prefix string, req certRequest) (certPath, keyPath string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("generating a key for %s: %w", req.commonName, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return "", "", fmt.Errorf("choosing a serial number: %w", err)
	}
	usage := x509.ExtKeyUsageClientAuth
	if req.server {
		usage = x509.ExtKeyUsageServerAuth
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: req.commonName, Organization: req.organizations},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		IPAddresses:  req.ips,
		DNSNames:     req.dnsNames,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return "", "", fmt.Errorf("signing the certificate of %s: %w", req.commonName, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", fmt.Errorf("encoding the key of %s: %w", req.commonName, err)
	}
	certPath, keyPath = prefix+".crt", prefix+".key"
	if err := writePEM(certPath, "CERTIFICATE", der, 0o644); err != nil {
		return "", "", err
	}
	if err := writePEM(keyPath, "EC PRIVATE KEY", keyDER, 0o600); err != nil {
		return "", "", err
	}
	return certPath, keyPath, nil
}

func writePEM(path, blockType string, der []byte, mode os.FileMode) error {
	b := pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der})
	if err := os.WriteFile(path, b, mode); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
