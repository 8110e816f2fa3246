package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	migclient "platform.example/vm-migration/pkg/generated/migration/clientset/versioned"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/test/framework"
	"platform.example/vm-migration/test/standins"
	"platform.example/vm-migration/test/vcsimlocal"
)

// Identities and images of the benchmark.
const (
	benchNamespace      = "bench"
	credentialsSecret   = "vcsim-credentials"
	controllerNamespace = "vm-migration-system"
	controllerAccount   = "migration-controller"
	transferImage       = "platform.example/vm-migration-controller:bench"
	conversionImage     = "standins.platform.example/virt-v2v:simulated"
)

// managerArgs lift kube-controller-manager's client rate limit (20 QPS by
// default), so that the Job controller and the garbage collector keep up
// and the benchmark measures our controller, not the controller manager.
var managerArgs = []string{"--kube-api-qps=500", "--kube-api-burst=1000", "--concurrent-job-syncs=20", "--concurrent-gc-syncs=40"}

// startControlPlane starts etcd, kube-apiserver and kube-controller-manager,
// installs the CRDs and the controller's identity and RBAC, and creates
// the benchmark's namespace.
func startControlPlane(ctx context.Context) (*framework.Environment, error) {
	env, err := framework.Start(
		framework.WithCRDs(framework.RepoPath("manifests/crd"), framework.RepoPath("test/crds")),
		framework.WithControllerManager(), framework.WithControllerManagerArgs(managerArgs...))
	if err != nil {
		return nil, err
	}
	for _, f := range []string{"manifests/base/namespace.yaml", "manifests/base/serviceaccount.yaml", "manifests/rbac.yaml"} {
		if _, err := env.Apply(ctx, framework.RepoPath(f), ""); err != nil {
			env.Stop()
			return nil, err
		}
	}
	kube, err := kubernetes.NewForConfig(adminConfig(env))
	if err != nil {
		env.Stop()
		return nil, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNamespace}}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		env.Stop()
		return nil, fmt.Errorf("creating namespace %s: %w", benchNamespace, err)
	}
	return env, nil
}

// startVCSim serves vcsim with n content-less VMs spread over hosts
// standalone ESXi hosts, created by workers goroutines.
func startVCSim(ctx context.Context, n, hosts, workers int) (*vcsimlocal.Server, error) {
	vc, err := vcsimlocal.Start(ctx, vcsimlocal.Options{Hosts: hosts})
	if err != nil {
		return nil, err
	}
	var next atomic.Int64
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n && errs[w] == nil; i = int(next.Add(1) - 1) {
				host := fmt.Sprintf("%s_H%d", vcsimlocal.Datacenter, i%hosts)
				_, errs[w] = vc.AddVM(ctx, vcsimlocal.EmptyVM(vmName(i), host, uint64(i+1)))
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		vc.Close()
		return nil, err
	}
	return vc, nil
}

// vmName is the name of the i-th source VM and of its migration.
func vmName(i int) string { return fmt.Sprintf("vm-%05d", i) }

// startStandins runs the stand-ins in light mode and the pod completer
// (pods.go) until ctx ends; the returned channel yields their error when
// they stop.
func startStandins(ctx context.Context, env *framework.Environment, root string, node completerOptions) (<-chan error, error) {
	cfg := adminConfig(env)
	ready := make(chan struct{})
	done := make(chan error, 1)
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	mig, err := migclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	go func() {
		cctx, stopCompleter := context.WithCancel(ctx)
		completed := make(chan error, 1)
		go func() { completed <- runPodCompleter(cctx, kube, mig, benchNamespace, node) }()
		err := standins.Run(ctx, standins.Config{
			RestConfig: cfg, Root: root, Namespace: benchNamespace, NodeName: benchNode,
			Light: true, Workers: 8, Ready: ready,
		})
		stopCompleter()
		done <- errors.Join(err, <-completed)
	}()
	select {
	case <-ready:
		return done, nil
	case err := <-done:
		return nil, fmt.Errorf("the stand-ins stopped before they were ready: %w", err)
	case <-time.After(2 * time.Minute):
		return nil, errors.New("the stand-ins were not ready after 2 minutes")
	}
}

// createSecret stores the vcsim login as the opted-in credentials Secret.
func createSecret(ctx context.Context, kube kubernetes.Interface, vc *vcsimlocal.Server) error {
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: credentialsSecret, Namespace: benchNamespace,
			Labels: map[string]string{v1alpha1.LabelVSphereCredentials: "true"}},
		StringData: map[string]string{"username": vc.Username, "password": vc.Password, "thumbprint": vc.Thumbprint, "endpoints": vc.URL},
	}
	if _, err := kube.CoreV1().Secrets(benchNamespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the credentials secret: %w", err)
	}
	return nil
}

// controllerKubeconfig writes a kubeconfig that reaches the API server
// through the proxy as the controller's ServiceAccount, with a token that
// outlives the longest run.
func controllerKubeconfig(ctx context.Context, kube kubernetes.Interface, server string, ca []byte, path string) error {
	tr, err := kube.CoreV1().ServiceAccounts(controllerNamespace).CreateToken(ctx, controllerAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](48 * 3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("requesting a token for the controller: %w", err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["bench"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos["controller"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["bench"] = &clientcmdapi.Context{Cluster: "bench", AuthInfo: "controller"}
	cfg.CurrentContext = "bench"
	return clientcmd.WriteToFile(*cfg, path)
}

// controller is the controller's process.
type controller struct {
	cmd         *exec.Cmd
	metricsURL  string
	heapURL     string
	healthURL   string
	exited      chan struct{}
	waitErr     error
	logFilePath string
}

// startController runs the controller binary with its production flags
// (leader election on), the flags the stand-ins need (the transfer and
// conversion images), --profiling (the live heap is read through its heap
// profile) and extra, logging to dir, inside cg when there is one. It
// must run on the thread that lives as long as the benchmark (see main):
// the process gets SIGKILL when that thread ends.
func startController(binary, kubeconfig, dir string, extra []string, cg *memoryCgroup) (*controller, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	c := &controller{
		metricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[0]),
		heapURL:    fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/heap?gc=1", ports[0]),
		healthURL:  fmt.Sprintf("http://127.0.0.1:%d/readyz", ports[1]),
		exited:     make(chan struct{}), logFilePath: filepath.Join(dir, "migration-controller.log"),
	}
	args := append([]string{
		"--kubeconfig=" + kubeconfig,
		"--transfer-image=" + transferImage, "--conversion-image=" + conversionImage,
		"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(ports[0]),
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(ports[1]),
		"--profiling",
	}, extra...)
	logFile, err := os.Create(c.logFilePath)
	if err != nil {
		return nil, fmt.Errorf("creating the controller's log: %w", err)
	}
	c.cmd = exec.Command(binary, args...)
	if cg != nil {
		c.cmd = cg.command(binary, args...)
	}
	c.cmd.Stdout, c.cmd.Stderr = logFile, logFile
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", binary, err)
	}
	go func() {
		c.waitErr = c.cmd.Wait()
		logFile.Close()
		close(c.exited)
	}()
	return c, nil
}

// pid is the controller's process id.
func (c *controller) pid() int { return c.cmd.Process.Pid }

// waitLeading waits until the controller leads and its workers run
// (/readyz answers "ok", not "ok (standby)").
func (c *controller) waitLeading(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	client := http.Client{Timeout: 2 * time.Second}
	for time.Now().Before(deadline) {
		select {
		case <-c.exited:
			return fmt.Errorf("the controller exited (%v); log %s:\n%s", c.waitErr, c.logFilePath, framework.TailBytes(c.logFilePath, 2000))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		resp, err := client.Get(c.healthURL)
		if err != nil {
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && strings.TrimSpace(string(body)) == "ok" {
			return nil
		}
	}
	return fmt.Errorf("the controller did not lead within %s; log %s", limit, c.logFilePath)
}

// stop ends the controller with SIGTERM, then SIGKILL after grace.
func (c *controller) stop(grace time.Duration) {
	_ = syscall.Kill(-c.pid(), syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(grace):
		_ = syscall.Kill(-c.pid(), syscall.SIGKILL)
		<-c.exited
	}
}

// freePorts returns n free ports on 127.0.0.1.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
