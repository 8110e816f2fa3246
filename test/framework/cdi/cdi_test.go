package cdi

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"platform.example/vm-migration/test/framework/apply"
)

func parseCert(t *testing.T, b []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(b)
	require.NotNil(t, block, "a PEM certificate")
	c, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err, "parsing the certificate")
	return c
}

// TestPKIHasCDIsCertificates: the Secrets and bundles CDI's operator
// defines, each leaf verified by its signer's bundle for the names CDI's
// servers and clients use, and the token key pair in CDI's encoding.
func TestPKIHasCDIsCertificates(t *testing.T) {
	now := time.Now()
	p, err := newPKI(Namespace, now)
	require.NoError(t, err, "making the certificates")
	secrets := map[string]*corev1.Secret{}
	for _, s := range p.secrets {
		assert.Equal(t, Namespace, s.Namespace, "namespace of %s", s.Name)
		secrets[s.Name] = s
	}
	bundles := map[string]string{}
	for _, cm := range p.configMaps {
		bundles[cm.Name] = cm.Data["ca-bundle.crt"]
	}
	assert.Len(t, secrets, 8, "secrets")
	assert.Len(t, bundles, 4, "bundles")
	for _, c := range []struct {
		leaf, bundle, name string
		usage              x509.ExtKeyUsage
	}{
		{"cdi-apiserver-server-cert", "cdi-apiserver-signer-bundle", "cdi-api.cdi.svc", x509.ExtKeyUsageServerAuth},
		{"cdi-uploadproxy-server-cert", "cdi-uploadproxy-signer-bundle", "cdi-uploadproxy.cdi.svc", x509.ExtKeyUsageServerAuth},
		{"cdi-uploadserver-client-cert", "cdi-uploadserver-client-signer-bundle", "", x509.ExtKeyUsageClientAuth},
	} {
		s := secrets[c.leaf]
		require.NotNil(t, s, "secret %s", c.leaf)
		assert.Equal(t, corev1.SecretTypeTLS, s.Type, "type of %s", c.leaf)
		assert.NotEmpty(t, s.Data[corev1.TLSPrivateKeyKey], "key of %s", c.leaf)
		pool := x509.NewCertPool()
		require.True(t, pool.AppendCertsFromPEM([]byte(bundles[c.bundle])), "bundle %s", c.bundle)
		_, err := parseCert(t, s.Data[corev1.TLSCertKey]).Verify(x509.VerifyOptions{
			DNSName: c.name, Roots: pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{c.usage},
		})
		assert.NoError(t, err, "%s verified by %s", c.leaf, c.bundle)
	}
	assert.Equal(t, "client.upload-server.cdi.kubevirt.io", parseCert(t, secrets["cdi-uploadserver-client-cert"].Data[corev1.TLSCertKey]).Subject.CommonName, "upload client name")
	for _, signer := range []string{"cdi-apiserver-signer", "cdi-uploadproxy-signer", "cdi-uploadserver-signer", "cdi-uploadserver-client-signer"} {
		require.Contains(t, secrets, signer, "signer secret")
		assert.True(t, parseCert(t, secrets[signer].Data[corev1.TLSCertKey]).IsCA, "%s is a CA", signer)
	}
	assert.Equal(t, bundles["cdi-apiserver-signer-bundle"], string(p.apiCA), "the webhooks' CA bundle")

	keys := secrets[apiSigningKeySecret]
	require.NotNil(t, keys, "the token key secret")
	priv, _ := pem.Decode(keys.Data["id_rsa"])
	require.NotNil(t, priv, "id_rsa is PEM")
	assert.Equal(t, "RSA PRIVATE KEY", priv.Type, "id_rsa's block")
	key, err := x509.ParsePKCS1PrivateKey(priv.Bytes)
	require.NoError(t, err, "id_rsa is PKCS#1")
	pub, _ := pem.Decode(keys.Data["id_rsa.pub"])
	require.NotNil(t, pub, "id_rsa.pub is PEM")
	parsed, err := x509.ParsePKIXPublicKey(pub.Bytes)
	require.NoError(t, err, "id_rsa.pub is PKIX")
	assert.True(t, key.PublicKey.Equal(parsed), "id_rsa.pub is id_rsa's public key")
}

// TestSetCABundle: every webhook of a configuration, and an APIService,
// get the CA bundle in base64; other kinds are refused.
func TestSetCABundle(t *testing.T) {
	ca := []byte("-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n")
	want := base64.StdEncoding.EncodeToString(ca)
	hooks := &unstructured.Unstructured{Object: map[string]any{
		"kind":     "ValidatingWebhookConfiguration",
		"metadata": map[string]any{"name": "v"},
		"webhooks": []any{
			map[string]any{"name": "a", "clientConfig": map[string]any{"service": map[string]any{"name": "cdi-api"}}},
			map[string]any{"name": "b", "clientConfig": map[string]any{}},
		},
	}}
	require.NoError(t, apply.SetCABundle(hooks, ca), "webhooks")
	list, _, _ := unstructured.NestedSlice(hooks.Object, "webhooks")
	for _, h := range list {
		got, _, _ := unstructured.NestedString(h.(map[string]any), "clientConfig", "caBundle")
		assert.Equal(t, want, got, "caBundle of webhook %v", h.(map[string]any)["name"])
	}
	api := &unstructured.Unstructured{Object: map[string]any{"kind": "APIService", "metadata": map[string]any{"name": "x"}}}
	require.NoError(t, apply.SetCABundle(api, ca), "APIService")
	got, _, _ := unstructured.NestedString(api.Object, "spec", "caBundle")
	assert.Equal(t, want, got, "the APIService's caBundle")
	assert.Error(t, apply.SetCABundle(&unstructured.Unstructured{Object: map[string]any{"kind": "Secret"}}, ca), "a Secret")
}

// TestLoadBuild reads the images list hack/build-cdi-images.sh writes.
func TestLoadBuild(t *testing.T) {
	dir := t.TempDir()
	list := ""
	for _, n := range []string{"importer", "cloner", "uploadserver", "controller", "apiserver", "uploadproxy"} {
		list += n + " platform.example/vm-migration/cdi-" + n + ":v1.65.0 cdi-" + n + ".tar\n"
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "images"), []byte(list), 0o644))
	b, err := LoadBuild(dir, "")
	require.NoError(t, err, "loading a complete list")
	assert.Equal(t, "platform.example/vm-migration/cdi-importer:v1.65.0", b.Images.Importer, "importer")
	assert.Equal(t, "platform.example/vm-migration/cdi-controller:v1.65.0", b.Images.Controller, "controller")
	assert.Len(t, b.Tarballs, 6, "tarballs")
	assert.Equal(t, filepath.Join(dir, "crds"), b.CRDDir, "the folder's crds link")
	b, err = LoadBuild(dir, "/elsewhere/crds")
	require.NoError(t, err)
	assert.Equal(t, "/elsewhere/crds", b.CRDDir, "an explicit CRD folder")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "images"), []byte("importer a:b c.tar\n"), 0o644))
	_, err = LoadBuild(dir, "")
	assert.ErrorContains(t, err, "has no", "an incomplete list")
	_, err = LoadBuild(t.TempDir(), "")
	assert.ErrorContains(t, err, "run hack/build-cdi-images.sh", "no list")
}

// TestDeploymentsAsCDIsOperatorShapesThem: the details CDI's components
// depend on.
func TestDeploymentsAsCDIsOperatorShapesThem(t *testing.T) {
	img := Images{Controller: "c", APIServer: "a", UploadProxy: "u", Importer: "i", Cloner: "cl", UploadServer: "us"}
	c := controllerDeployment(img)
	env := map[string]string{}
	for _, e := range c.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	assert.Equal(t, map[string]string{
		"IMPORTER_IMAGE": "i", "CLONER_IMAGE": "cl", "UPLOADSERVER_IMAGE": "us", "UPLOADPROXY_SERVICE": UploadProxyName,
		"OVIRT_POPULATOR_IMAGE": ovirtPopulatorImage, "PULL_POLICY": "IfNotPresent",
	}, env, "the controller's environment")
	assert.Equal(t, ControllerServiceAccount, c.Spec.Template.Spec.ServiceAccountName, "the controller's service account")
	assert.Equal(t, tokenKeyDir, c.Spec.Template.Spec.Containers[0].VolumeMounts[0].MountPath, "token keys")
	api := apiServerDeployment(img)
	assert.Equal(t, "/healthz", api.Spec.Template.Spec.Containers[0].ReadinessProbe.HTTPGet.Path, "the API server's readiness")
	up := uploadProxyDeployment(img)
	assert.Equal(t, apiSigningKeySecret, up.Spec.Template.Spec.Containers[0].Env[0].ValueFrom.SecretKeyRef.Name, "the upload proxy's public key comes from the Secret")
	assert.Empty(t, up.Spec.Template.Spec.Containers[0].Env[0].Value, "no key in the environment")
	for name, d := range map[string]struct {
		pull  corev1.PullPolicy
		label string
	}{
		ControllerName:  {c.Spec.Template.Spec.Containers[0].ImagePullPolicy, c.Spec.Selector.MatchLabels[componentLabel]},
		APIServerName:   {api.Spec.Template.Spec.Containers[0].ImagePullPolicy, api.Spec.Selector.MatchLabels[componentLabel]},
		UploadProxyName: {up.Spec.Template.Spec.Containers[0].ImagePullPolicy, up.Spec.Selector.MatchLabels[componentLabel]},
	} {
		assert.Equal(t, corev1.PullIfNotPresent, d.pull, "%s pull policy", name)
		assert.Equal(t, name, d.label, "%s selector", name)
	}
}
