package framework

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
)

// Environment variables the framework reads.
const (
	// EnvTestbinDir names the directory holding kube-apiserver, etcd and
	// kube-controller-manager. Default: <repo>/_output/testbin.
	EnvTestbinDir = "TESTBIN_DIR"
	// EnvCI, when "true" (or "1"), turns missing binaries into a failure
	// instead of a skip.
	EnvCI = "CI"
	// EnvKeep, when set, keeps the temporary directory (logs, etcd data,
	// kubeconfig) after the suite, and prints its path.
	EnvKeep = "TESTENV_KEEP"
)

// Binary names looked up in the testbin directory.
const (
	BinaryEtcd              = "etcd"
	BinaryKubeAPIServer     = "kube-apiserver"
	BinaryControllerManager = "kube-controller-manager"
)

// tempDirPrefix names the environment's temporary directories, so a later
// run can remove the ones a crashed run left behind.
const tempDirPrefix = "vmm-testenv-"

// startTimeout bounds the start of the whole control plane.
const startTimeout = 2 * time.Minute

// options configure Run.
type options struct {
	crdDirs           []string
	controllerManager bool
	controllers       []string
	managerArgs       []string
	node              bool
	privileged        bool
	attachments       bool
}

// Option configures the environment Run starts.
type Option func(*options)

// WithCRDs installs the CustomResourceDefinitions found in the YAML and JSON
// files of dirs, and waits until each is Established and served.
func WithCRDs(dirs ...string) Option {
	return func(o *options) { o.crdDirs = append(o.crdDirs, dirs...) }
}

// WithControllerManager also starts kube-controller-manager, running the
// named controllers (all default ones when none are named). The Job
// controller and the garbage collector need it; without a scheduler and a
// kubelet, Pods stay Pending.
func WithControllerManager(controllers ...string) Option {
	return func(o *options) {
		o.controllerManager = true
		o.controllers = append(o.controllers, controllers...)
	}
}

// WithControllerManagerArgs adds flags to kube-controller-manager's
// command line (for example --kube-api-qps for a benchmark whose load
// must not wait on the controller manager's client rate limit).
func WithControllerManagerArgs(args ...string) Option {
	return func(o *options) { o.managerArgs = append(o.managerArgs, args...) }
}

// WithNode also runs a real node: kube-controller-manager (with at least
// the controllers workloads need), kube-scheduler, containerd, the kubelet
// and kube-proxy, in namespaces of the node's own (see the package doc).
// Pods run for real from images imported with ImportImage. It needs root,
// the node binaries (hack/build-testbin.sh) and the Debian packages
// hack/install-node-deps.sh installs.
func WithNode() Option {
	return func(o *options) { o.node = true }
}

// WithNetworkAttachments attaches pods to the networks their
// k8s.v1.cni.cncf.io/networks annotation names, as Multus does on a
// cluster that has it: the node's pod network chain ends with the stand-in
// test/framework/cmd/vmm-network-attachments, which runs each named
// NetworkAttachmentDefinition's plugin (Debian's CNI plugins) in the pod.
// KubeVirt's virt-handler needs it for an instance with a Multus network.
func WithNetworkAttachments() Option {
	return func(o *options) { o.attachments = true }
}

// WithPrivilegedPods lets the node's API server admit privileged
// containers (--allow-privileged=true), which it refuses otherwise: for
// KubeVirt's virt-handler DaemonSet, privileged as on every cluster that
// runs KubeVirt; the node's /run and /var/lib are then shared mounts in
// its mount namespace (virt-handler's Bidirectional volumes). Namespaces
// still enforce their PodSecurity labels.
func WithPrivilegedPods() Option {
	return func(o *options) { o.privileged = true }
}

// Start starts a control plane outside a test binary (a benchmark's
// driver): the binaries come from $TESTBIN_DIR or <repo>/_output/testbin,
// and a missing one is an error. The caller stops it with Stop.
func Start(opts ...Option) (*Environment, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	removeStaleTempDirs()
	binDir, err := testbinDir()
	if err != nil {
		return nil, err
	}
	if err := checkBinaries(binDir, o.controllerManager); err != nil {
		return nil, fmt.Errorf("%w; run hack/build-testbin.sh (or make testbin), or set %s", err, EnvTestbinDir)
	}
	if o.node {
		if err := checkNodePrerequisites(binDir); err != nil {
			return nil, err
		}
	}
	return start(binDir, o)
}

// Environment is a running control plane shared by the tests of a package.
type Environment struct {
	dir            string
	binDir         string
	config         *rest.Config
	kubeconfigPath string
	adminToken     string
	saKeyPath      string
	caPath         string
	spawner        *spawner
	processes      []*process
	etcdURL        string
	node           *node
	stopOnce       sync.Once
}

var (
	current    *Environment
	skipReason string
)

// Run starts the control plane, runs the package's tests, tears the control
// plane down and exits with the tests' code. Call it from TestMain.
//
// When a binary is missing, the tests skip with a message saying how to
// build them, unless CI is set, where that is a failure.
func Run(m *testing.M, opts ...Option) {
	os.Exit(run(m, opts...))
}

func run(m *testing.M, opts ...Option) int {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	removeStaleTempDirs()

	binDir, err := testbinDir()
	if err == nil {
		err = checkBinaries(binDir, o.controllerManager)
	}
	if err == nil && o.node {
		err = checkNodePrerequisites(binDir)
	}
	if err != nil {
		if isCI() {
			fmt.Fprintf(os.Stderr, "framework: %v (CI=%s: missing binaries are a failure)\n", err, os.Getenv(EnvCI))
			return 1
		}
		skipReason = fmt.Sprintf("%v; run hack/build-testbin.sh (or make testbin), or set %s", err, EnvTestbinDir)
		fmt.Fprintf(os.Stderr, "framework: skipping tests that need a control plane: %s\n", skipReason)
		return m.Run()
	}

	env, err := start(binDir, o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "framework: starting the control plane: %v\n", err)
		return 1
	}
	current = env

	// An interrupt (Ctrl-C on go test, a CI runner stopping the job) tears
	// the control plane down before the binary exits.
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		sig, ok := <-signals
		if !ok {
			return
		}
		fmt.Fprintf(os.Stderr, "framework: %v: stopping the control plane\n", sig)
		env.Stop()
		os.Exit(130)
	}()
	defer func() {
		signal.Stop(signals)
		close(signals)
	}()
	// A panic in TestMain's own goroutine still stops the control plane;
	// a panic in a test ends the binary from another goroutine, and then the
	// parent-death signal stops the processes.
	defer env.Stop()

	code := m.Run()
	if code != 0 {
		env.printLogTails(os.Stderr)
	}
	return code
}

// Env returns the shared environment Run started. It skips t when the
// binaries are missing (outside CI), and fails it when Run was not called.
func Env(t testing.TB) *Environment {
	t.Helper()
	if current != nil {
		return current
	}
	if skipReason != "" {
		t.Skip(skipReason)
	}
	require.FailNow(t, "framework: no environment: call framework.Run from TestMain")
	return nil
}

// Config returns a copy of the admin rest.Config (a bearer token in the
// system:masters group).
func (e *Environment) Config() *rest.Config {
	return rest.CopyConfig(e.config)
}

// KubeconfigPath is the path of a kubeconfig file for the admin user, for
// kubectl and for processes under test.
func (e *Environment) KubeconfigPath() string {
	return e.kubeconfigPath
}

// Dir is the environment's temporary directory: logs, etcd data, keys.
func (e *Environment) Dir() string {
	return e.dir
}

// CAFile is the path of the API server's serving CA bundle.
func (e *Environment) CAFile() string {
	return e.caPath
}

// Stop kills the control plane's processes by process group and removes
// the temporary directory (unless TESTENV_KEEP is set). It is safe to call
// more than once.
func (e *Environment) Stop() {
	e.stopOnce.Do(func() {
		if e.node != nil {
			if err := e.node.stop(); err != nil {
				fmt.Fprintf(os.Stderr, "framework: stopping the node: %v\n", err)
			}
		}
		// Reverse start order: controller manager, API server, etcd.
		for i := len(e.processes) - 1; i >= 0; i-- {
			e.processes[i].stop(e.stopGrace(e.processes[i]))
		}
		e.spawner.close()
		if os.Getenv(EnvKeep) != "" {
			fmt.Fprintf(os.Stderr, "framework: kept %s\n", e.dir)
			return
		}
		if err := os.RemoveAll(e.dir); err != nil {
			fmt.Fprintf(os.Stderr, "framework: removing %s: %v\n", e.dir, err)
		}
	})
}

// PIDs returns the process ids of the running control-plane processes.
func (e *Environment) PIDs() map[string]int {
	pids := map[string]int{}
	for _, p := range e.processes {
		pids[p.name] = p.pid()
	}
	return pids
}

func (e *Environment) printLogTails(w *os.File) {
	ps := e.processes
	if e.node != nil {
		ps = append(append([]*process{}, ps...), e.node.processes()...)
	}
	for _, p := range ps {
		fmt.Fprintf(w, "---- last lines of %s (%s) ----\n%s\n", p.name, p.logPath, p.tail(20))
	}
}

// start brings the control plane up, retrying once when a process dies
// early (a free port taken by someone else between probe and bind).
func start(binDir string, o options) (*Environment, error) {
	var errs []error
	for attempt := 1; attempt <= 2; attempt++ {
		env, err := startOnce(binDir, o)
		if err == nil {
			return env, nil
		}
		errs = append(errs, fmt.Errorf("attempt %d: %w", attempt, err))
	}
	return nil, errors.Join(errs...)
}

func startOnce(binDir string, o options) (env *Environment, err error) {
	dir, err := os.MkdirTemp("", tempDirPrefix)
	if err != nil {
		return nil, fmt.Errorf("creating temporary directory: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		return nil, fmt.Errorf("writing owner pid: %w", err)
	}
	env = &Environment{dir: dir, binDir: binDir, spawner: newSpawner()}
	defer func() {
		if err != nil {
			env.printLogTails(os.Stderr)
			env.Stop()
		}
	}()

	timeout := startTimeout
	if o.node {
		timeout += nodeStartTimeout + dnsStartTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if o.node {
		// The API server's flags name the node's network and CA.
		if err := env.prepareNode(ctx, o.privileged, o.attachments); err != nil {
			return env, err
		}
	}
	if err := env.startEtcd(ctx); err != nil {
		return env, err
	}
	if err := env.startAPIServer(ctx); err != nil {
		return env, err
	}
	if o.controllerManager || o.node {
		controllers := o.controllers
		if o.node && len(controllers) > 0 {
			controllers = append(append([]string{}, controllers...), nodeControllers...)
		}
		if err := env.startControllerManager(ctx, controllers, o.managerArgs); err != nil {
			return env, err
		}
	}
	if o.node {
		if err := env.startNode(ctx); err != nil {
			return env, err
		}
	}
	if len(o.crdDirs) > 0 {
		if err := env.InstallCRDs(ctx, o.crdDirs...); err != nil {
			return env, err
		}
	}
	return env, nil
}

func isCI() bool {
	v := strings.ToLower(os.Getenv(EnvCI))
	return v == "true" || v == "1" || v == "yes"
}

// testbinDir is $TESTBIN_DIR, or <repo>/_output/testbin.
func testbinDir() (string, error) {
	if d := os.Getenv(EnvTestbinDir); d != "" {
		return d, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "_output", "testbin"), nil
}

func checkBinaries(dir string, controllerManager bool) error {
	names := []string{BinaryEtcd, BinaryKubeAPIServer}
	if controllerManager {
		names = append(names, BinaryControllerManager)
	}
	var missing []string
	for _, n := range names {
		fi, err := os.Stat(filepath.Join(dir, n))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("control-plane binaries missing from %s: %s", dir, strings.Join(missing, ", "))
	}
	return nil
}

// removeStaleTempDirs removes the temporary directories of earlier runs
// whose test binary is gone (a panic or a timeout skips the cleanup; the
// processes themselves died with it through the parent-death signal).
func removeStaleTempDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), tempDirPrefix+"*"))
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "owner.pid"))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(d)
		}
	}
	// A node's processes die with its namespaces; its cgroup folders stay
	// until removed.
	removeStaleCgroupRoots()
}

// RepoRoot is the root of the repository holding the module
// platform.example/vm-migration, found by walking up from the working
// directory (a test runs in its package's directory).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("getting working directory: %w", err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && isOurModule(string(b)) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("repository root not found: no go.mod of module platform.example/vm-migration above the working directory")
		}
		dir = parent
	}
}

func isOurModule(gomod string) bool {
	for _, line := range strings.Split(gomod, "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == "module" {
			return f[1] == "platform.example/vm-migration"
		}
	}
	return false
}

// RepoPath joins rel to the repository root. It returns rel unchanged when
// the root cannot be found, so the failure shows where the path is used.
func RepoPath(rel string) string {
	root, err := RepoRoot()
	if err != nil {
		return rel
	}
	return filepath.Join(root, filepath.FromSlash(rel))
}
