package framework

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Identity of the admin user in the token file.
const (
	adminUser  = "test-admin"
	adminGroup = "system:masters"
)

// serviceAccountIssuer is the issuer of the service account tokens the API
// server signs.
const serviceAccountIssuer = "https://kubernetes.default.svc.cluster.local"

// pollInterval is how often readiness is probed.
const pollInterval = 100 * time.Millisecond

// freePorts returns n distinct free TCP ports on 127.0.0.1. The listeners
// are held until all ports are chosen, so the same port is not returned
// twice; another process may still take one before the server binds it.
func freePorts(n int) ([]int, error) {
	var ports []int
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func (e *Environment) startEtcd(ctx context.Context) error {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	clientURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	args := []string{
		"--name=test",
		"--data-dir=" + filepath.Join(e.dir, "etcd"),
		"--listen-client-urls=" + clientURL,
		"--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=test=" + peerURL,
		"--initial-cluster-state=new",
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	}
	p, err := startProcess(e.spawner, BinaryEtcd, filepath.Join(e.binDir, BinaryEtcd), args, e.dir)
	if err != nil {
		return err
	}
	e.processes = append(e.processes, p)
	e.etcdURL = clientURL

	client := &http.Client{Timeout: time.Second}
	return waitFor(ctx, p, "etcd /health", func() (bool, error) {
		resp, err := client.Get(clientURL + "/health")
		if err != nil {
			return false, nil
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK && strings.Contains(string(body), `"health":"true"`), nil
	})
}

func (e *Environment) startAPIServer(ctx context.Context) error {
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	port := ports[0]
	token, err := randomHex(16)
	if err != nil {
		return err
	}
	e.adminToken = token
	tokenFile := filepath.Join(e.dir, "tokens.csv")
	line := fmt.Sprintf("%s,%s,%s,%q\n", token, adminUser, adminUser, adminGroup)
	if err := os.WriteFile(tokenFile, []byte(line), 0o600); err != nil {
		return fmt.Errorf("writing token file: %w", err)
	}
	e.saKeyPath = filepath.Join(e.dir, "service-account.key")
	if err := writeRSAKey(e.saKeyPath); err != nil {
		return err
	}
	certDir := filepath.Join(e.dir, "apiserver-certs")
	e.caPath = filepath.Join(certDir, "apiserver.crt")

	args := []string{
		"--etcd-servers=" + e.etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + certDir,
		"--token-auth-file=" + tokenFile,
		"--authorization-mode=RBAC",
		"--service-account-key-file=" + e.saKeyPath,
		"--service-account-signing-key-file=" + e.saKeyPath,
		"--service-account-issuer=" + serviceAccountIssuer,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--disable-admission-plugins=ServiceAccount",
		"--endpoint-reconciler-type=none",
		"--allow-privileged=true",
	}
	address := "127.0.0.1"
	if e.node != nil {
		args = e.node.apiServerArgs(args)
		address = e.node.network.hostIP.String()
	}
	p, err := startProcess(e.spawner, BinaryKubeAPIServer, filepath.Join(e.binDir, BinaryKubeAPIServer), args, e.dir)
	if err != nil {
		return err
	}
	e.processes = append(e.processes, p)
	host := "https://" + address + ":" + strconv.Itoa(port)

	// The API server writes its self-signed CA and serving certificate
	// once it starts; /readyz turns OK after its post-start hooks (RBAC
	// bootstrap roles, priority levels...) have run.
	var caData []byte
	err = waitFor(ctx, p, "kube-apiserver /readyz", func() (bool, error) {
		if caData == nil {
			b, err := os.ReadFile(e.caPath)
			if err != nil || !validPEMCerts(b) {
				return false, nil
			}
			caData = b
		}
		return probeReadyz(host, token, caData), nil
	})
	if err != nil {
		return err
	}
	e.config = &rest.Config{
		Host:            host,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: caData},
		QPS:             100,
		Burst:           200,
		UserAgent:       "vm-migration-integration-test",
	}
	e.kubeconfigPath = filepath.Join(e.dir, "kubeconfig")
	return writeKubeconfig(e.kubeconfigPath, host, caData, token)
}

func (e *Environment) startControllerManager(ctx context.Context, controllers, extra []string) error {
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	port := ports[0]
	if len(controllers) == 0 {
		controllers = []string{"*"}
	}
	args := []string{
		"--kubeconfig=" + e.kubeconfigPath,
		"--authentication-kubeconfig=" + e.kubeconfigPath,
		"--authorization-kubeconfig=" + e.kubeconfigPath,
		"--leader-elect=false",
		"--controllers=" + strings.Join(controllers, ","),
		"--use-service-account-credentials=false",
		"--service-account-private-key-file=" + e.saKeyPath,
		"--root-ca-file=" + e.caPath,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(e.dir, "controller-manager-certs"),
		"--cluster-name=test",
	}
	args = append(args, extra...)
	p, err := startProcess(e.spawner, BinaryControllerManager, filepath.Join(e.binDir, BinaryControllerManager), args, e.dir)
	if err != nil {
		return err
	}
	e.processes = append(e.processes, p)
	return waitHealthz(ctx, p, "kube-controller-manager /healthz", "https://127.0.0.1:"+strconv.Itoa(port)+"/healthz")
}

// waitHealthz waits until url answers 200. The serving certificates of the
// controller manager and the scheduler are self-signed and only probed for
// health here.
func waitHealthz(ctx context.Context, p *process, what, url string) error {
	client := &http.Client{
		Timeout:   time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // health probe of a local test process
	}
	return waitFor(ctx, p, what, func() (bool, error) {
		resp, err := client.Get(url)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// waitFor polls ready until it returns true, the process exits, or ctx ends.
func waitFor(ctx context.Context, p *process, what string, ready func() (bool, error)) error {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		ok, err := ready()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		if exited, why := p.exited(); exited {
			return fmt.Errorf("waiting for %s: %s %v; log %s:\n%s", what, p.name, why, p.logPath, p.tail(30))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w; log %s:\n%s", what, ctx.Err(), p.logPath, p.tail(30))
		case <-t.C:
		}
	}
}

func probeReadyz(host, token string, caData []byte) bool {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caData) {
		return false
	}
	client := &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
	}
	req, err := http.NewRequest(http.MethodGet, host+"/readyz", nil)
	if err != nil {
		return false
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == http.StatusOK
}

func validPEMCerts(b []byte) bool {
	found := false
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return found && len(strings.TrimSpace(string(b))) == 0
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return false
		}
		found = true
	}
}

func writeRSAKey(path string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("generating service account key: %w", err)
	}
	b := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("writing service account key: %w", err)
	}
	return nil
}

func writeKubeconfig(path, host string, caData []byte, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: host, CertificateAuthorityData: caData}
	cfg.AuthInfos[adminUser] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: adminUser, Namespace: "default"}
	cfg.CurrentContext = "test"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	return nil
}

// writeCertKubeconfig writes a kubeconfig that authenticates with a client
// certificate (the kubelet's, kube-proxy's).
func writeCertKubeconfig(path, host string, caData []byte, certFile, keyFile string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: host, CertificateAuthorityData: caData}
	cfg.AuthInfos["node"] = &clientcmdapi.AuthInfo{ClientCertificate: certFile, ClientKey: keyFile}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "node"}
	cfg.CurrentContext = "test"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	return nil
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("reading random bytes: %w", err)
	}
	return hex.EncodeToString(b), nil
}
