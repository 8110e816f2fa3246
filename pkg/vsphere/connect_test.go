package vsphere

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/soap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestCredentialsFromSecret(t *testing.T) {
	tp := strings.Repeat("ab", 20)
	tests := map[string]struct {
		data    map[string][]byte
		want    Credentials
		wantErr string
	}{
		"username and password": {
			data: map[string][]byte{"username": []byte("admin\n"), "password": []byte(testPassword + "\n")},
			want: Credentials{Username: "admin", Password: testPassword},
		},
		"thumbprint normalised": {
			data: map[string][]byte{"username": []byte("admin"), "password": []byte(testPassword), "thumbprint": []byte(tp + "\n")},
			want: Credentials{Username: "admin", Password: testPassword, Thumbprint: strings.TrimSuffix(strings.Repeat("AB:", 20), ":")},
		},
		"missing both": {
			data:    map[string][]byte{},
			wantErr: "missing or empty keys: username, password",
		},
		"empty password": {
			data:    map[string][]byte{"username": []byte("admin"), "password": []byte("\n")},
			wantErr: "missing or empty keys: password",
		},
		"bad ca": {
			data:    map[string][]byte{"username": []byte("admin"), "password": []byte(testPassword), "ca.crt": []byte("not pem")},
			wantErr: "key ca.crt: no PEM certificate found",
		},
		"bad thumbprint": {
			data:    map[string][]byte{"username": []byte("admin"), "password": []byte(testPassword), "thumbprint": []byte("zz")},
			wantErr: "key thumbprint: thumbprint is not hexadecimal",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vcenter"}, Data: tc.data}
			got, err := CredentialsFromSecret(secret)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				assert.Contains(t, err.Error(), "ns/vcenter")
				assert.NotContains(t, err.Error(), testPassword)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			assert.NotContains(t, got.String(), testPassword)
		})
	}
	_, err := CredentialsFromSecret(nil)
	assert.Error(t, err)
}

func TestLoadCredentialsDir(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "username"), []byte("admin\n"), 0o600))
	_, err := LoadCredentialsDir(dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "missing or empty keys: password")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "password"), []byte(testPassword), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "thumbprint"), []byte("sha1:"+strings.Repeat("0a", 20)), 0o600))
	got, err := LoadCredentialsDir(dir)
	require.NoError(t, err)
	assert.Equal(t, "admin", got.Username)
	assert.Equal(t, testPassword, got.Password)
	assert.Equal(t, strings.TrimSuffix(strings.Repeat("0A:", 20), ":"), got.Thumbprint)
}

func TestNormalizeThumbprint(t *testing.T) {
	sha256 := strings.Repeat("a1", 32)
	want256 := strings.TrimSuffix(strings.Repeat("A1:", 32), ":")
	for in, want := range map[string]string{
		sha256:                   want256,
		"SHA256:" + sha256:       want256,
		"sha-256=" + sha256:      want256,
		strings.ToUpper(want256): want256,
		" " + strings.ReplaceAll(want256, ":", " ") + "\n": want256,
	} {
		got, err := NormalizeThumbprint(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "abc", strings.Repeat("a", 38), "xyz" + sha256[3:]} {
		_, err := NormalizeThumbprint(bad)
		assert.Error(t, err, bad)
	}
}

func TestNormalizeURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://vc.example.com":           "https://vc.example.com/sdk",
		"https://vc.example.com/":          "https://vc.example.com/sdk",
		"https://vc.example.com/sdk":       "https://vc.example.com/sdk",
		"https://vc.example.com:8443/sdk/": "https://vc.example.com:8443/sdk",
		"vc.example.com":                   "https://vc.example.com/sdk",
		"https://vc.example.com/sdk?x=1":   "https://vc.example.com/sdk",
	} {
		u, err := NormalizeURL(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, u.String(), in)
	}
	for _, bad := range []string{"", "http://vc.example.com", "https://", "https://admin:" + testPassword + "@vc.example.com"} {
		_, err := NormalizeURL(bad)
		require.Error(t, err, bad)
		assert.NotContains(t, err.Error(), testPassword)
	}
}

func TestConnectTLS(t *testing.T) {
	for _, kind := range bothModels {
		t.Run(string(kind), func(t *testing.T) {
			env := newSim(t, kind, nil)
			cert := env.server.Certificate()
			caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
			base := Credentials{Username: testUser, Password: testPassword}
			withTP := func(tp string) Credentials { c := base; c.Thumbprint = tp; return c }
			withCA := func(ca []byte) Credentials { c := base; c.CACertPEM = ca; return c }

			ok := map[string]struct {
				ep    Endpoint
				creds Credentials
			}{
				"sha256 thumbprint lowercase":  {env.ep, env.creds},
				"sha1 thumbprint with colons":  {env.ep, withTP(strings.ToLower(soap.ThumbprintSHA1(cert)))},
				"ca certificate":               {env.ep, withCA(caPEM)},
				"insecure when asked":          {Endpoint{URL: env.ep.URL, InsecureSkipVerify: true}, base},
				"url with sdk already present": {Endpoint{URL: env.ep.URL + "/sdk"}, env.creds},
			}
			for name, tc := range ok {
				t.Run(name, func(t *testing.T) {
					s, err := Connect(testCtx(t), tc.ep, tc.creds)
					require.NoError(t, err)
					assert.Equal(t, kind == vpx, s.IsVC())
					dc, err := s.Datacenter(testCtx(t))
					require.NoError(t, err)
					if kind == esx {
						assert.Equal(t, "ha-datacenter", dc.Name())
					}
					require.NoError(t, s.Logout(testCtx(t)))
					require.NoError(t, s.Logout(testCtx(t)), "second logout is a no-op")
				})
			}

			fail := map[string]struct {
				creds Credentials
				class Class
			}{
				"no verification material":   {base, ClassPermanent},
				"wrong thumbprint":           {withTP(strings.Repeat("00", 32)), ClassPermanent},
				"wrong password":             {Credentials{Username: testUser, Password: "nope", Thumbprint: env.creds.Thumbprint}, ClassAuth},
				"password with no user":      {Credentials{Password: testPassword, Thumbprint: env.creds.Thumbprint}, ClassPermanent},
				"unknown ca (self as other)": {withCA(testCAPEM(t)), ClassPermanent},
			}
			for name, tc := range fail {
				t.Run(name, func(t *testing.T) {
					_, err := Connect(testCtx(t), env.ep, tc.creds)
					require.Error(t, err)
					assert.Equal(t, tc.class, Classify(err), err.Error())
					assert.NotContains(t, err.Error(), testPassword)
				})
			}
		})
	}
}

// testCAPEM returns a fresh self-signed CA certificate that signs nothing
// the simulator serves.
func testCAPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "unrelated test ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
