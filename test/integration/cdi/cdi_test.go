//go:build integration

package cdi

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"platform.example/vm-migration/test/framework"
	"platform.example/vm-migration/test/framework/cdi"
	"platform.example/vm-migration/test/framework/localpath"
	"platform.example/vm-migration/test/standins"
)

// imageSize is the size of the disk image the HTTP server serves: raw
// bytes, a whole number of MiB so that the claim's size is exactly the
// image's and CDI's importer does not grow it.
const imageSize = 8 << 20

var dataVolumes = schema.GroupVersionResource{Group: "cdi.kubevirt.io", Version: "v1beta1", Resource: "datavolumes"}

var (
	installOnce sync.Once
	installErr  error
	storageCfg  standins.Config
)

// installCDI imports CDI's images into the node, starts the storage
// stand-in (local volumes on the node) and installs CDI, once per suite.
func installCDI(t *testing.T, env *framework.Environment) {
	t.Helper()
	imagesDir := os.Getenv(cdi.EnvImagesDir)
	installOnce.Do(func() {
		ctx := context.Background()
		storageCfg = standins.Config{RestConfig: env.Config(), Root: filepath.Join(env.Dir(), "cdi-volumes"), LocalVolumeNode: env.NodeName(),
			RealProvisioners: []string{localpath.Provisioner}}
		storage, err := standins.NewStorage(storageCfg)
		if err != nil {
			installErr = err
			return
		}
		if installErr = storage.EnsureStorageClass(ctx); installErr != nil {
			return
		}
		// The stand-in runs until the suite's environment stops.
		go func() { _ = storage.Run(context.Background()) }()

		if _, installErr = cdi.InstallOnNode(ctx, env, imagesDir, os.Getenv(cdi.EnvCDIDir), 3*time.Minute, t.Logf); installErr != nil {
			return
		}
		installErr = installLocalPath(ctx, t, env)
	})
	require.NoError(t, installErr, "installing CDI on the node")
}

// cdiEnv skips the test without the CDI images, else returns the suite's
// environment with CDI installed.
func cdiEnv(t *testing.T) *framework.Environment {
	t.Helper()
	if os.Getenv(cdi.EnvImagesDir) == "" {
		t.Skipf("%s is not set: run make test-cdi (it builds CDI and its images)", cdi.EnvImagesDir)
	}
	env := framework.Env(t)
	installCDI(t, env)
	return env
}

// rangeServer serves image at /disk.img on the host address (which pods
// reach by IP: the node has no cluster DNS), with Range support
// (http.ServeContent), as nbdkit's curl plugin needs; it records the
// clients' addresses and counts the requests for a byte range.
type rangeServer struct {
	url     string
	mu      sync.Mutex
	clients map[string]int
	ranges  int
}

func serveImage(t *testing.T, env *framework.Environment, image []byte) *rangeServer {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(env.HostAddress(), "0"))
	require.NoError(t, err, "listening on the host address %s", env.HostAddress())
	s := &rangeServer{url: "http://" + l.Addr().String() + "/disk.img", clients: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/disk.img", func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		s.mu.Lock()
		s.clients[host]++
		if r.Header.Get("Range") != "" {
			s.ranges++
		}
		s.mu.Unlock()
		http.ServeContent(w, r, "disk.img", time.Unix(0, 0), bytes.NewReader(image))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

func (s *rangeServer) rangeRequests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ranges
}

func (s *rangeServer) requests() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.clients {
		out[k] = v
	}
	return out
}

// dataVolume is a DataVolume importing url into a Filesystem claim of the
// storage stand-in's class.
func dataVolume(ns, name, url, size string) *unstructured.Unstructured {
	return dataVolumeOf(ns, name, url, size, standins.DefaultStorageClass)
}

// dataVolumeOf is a DataVolume importing url into a Filesystem claim of
// class, bound at once (CDI's importer pod is the claim's first consumer
// where the class waits for one).
func dataVolumeOf(ns, name, url, size, class string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cdi.kubevirt.io/v1beta1",
		"kind":       "DataVolume",
		"metadata": map[string]any{"name": name, "namespace": ns,
			"annotations": map[string]any{"cdi.kubevirt.io/storage.bind.immediate.requested": "true"}},
		"spec": map[string]any{
			"source": map[string]any{"http": map[string]any{"url": url}},
			"pvc": map[string]any{
				"accessModes":      []any{"ReadWriteOnce"},
				"volumeMode":       "Filesystem",
				"storageClassName": class,
				"resources":        map[string]any{"requests": map[string]any{"storage": size}},
			},
		},
	}}
}

// TestHTTPImportThroughRealImporterPod: CDI's controller sees a DataVolume
// with an HTTP source, creates its claim (bound by the storage stand-in to
// a local volume on the node) and runs its importer pod from the image
// built here. As CDI v1.65 does for every HTTP source, the first importer
// pod has nbdkit's curl plugin read the image by Range requests (qemu-img
// checks its size against the claim) and asks for scratch space; the
// controller adds a scratch claim (the stand-in binds it too) and a second
// importer pod downloads into it and converts to disk.img. The DataVolume
// Succeeds and disk.img in the claim has the source's bytes.
func TestHTTPImportThroughRealImporterPod(t *testing.T) {
	env := cdiEnv(t)
	cs := env.Kubernetes(t)
	dc := env.Dynamic(t)
	ns := env.Namespace(t)
	ctx := context.Background()

	image := make([]byte, imageSize)
	_, err := rand.Read(image)
	require.NoError(t, err, "making the source image")
	want := sha256.Sum256(image)
	srv := serveImage(t, env, image)

	start := time.Now()
	_, err = dc.Resource(dataVolumes).Namespace(ns).Create(ctx, dataVolume(ns, "imported", srv.url, "8Mi"), metav1.CreateOptions{})
	require.NoError(t, err, "creating the DataVolume")
	dv := waitDataVolume(t, dc, cs, ns, "imported", 4*time.Minute)
	t.Logf("DataVolume Succeeded %s after creation; HTTP requests by client: %v, %d of them for a range", time.Since(start).Round(time.Millisecond), srv.requests(), srv.rangeRequests())

	_, podNet, err := net.ParseCIDR(env.PodCIDR())
	require.NoError(t, err, "the node's pod CIDR %q", env.PodCIDR())
	var fromPods int
	for host, n := range srv.requests() {
		if ip := net.ParseIP(host); ip != nil && podNet.Contains(ip) {
			fromPods += n
		}
	}
	assert.Positive(t, fromPods, "requests to the image server from a pod of the node (%s): %v", env.PodCIDR(), srv.requests())
	assert.Positive(t, srv.rangeRequests(), "Range requests (nbdkit's curl plugin) to the image server")
	claim, _, _ := unstructured.NestedString(dv.Object, "status", "claimName")
	if claim == "" {
		claim = "imported"
	}
	dir, err := standins.ClaimDir(ctx, storageCfg, ns, claim)
	require.NoError(t, err, "the claim's folder")
	f, err := os.Open(filepath.Join(dir, "disk.img"))
	require.NoError(t, err, "disk.img in the claim")
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	require.NoError(t, err, "reading disk.img")
	assert.Equal(t, int64(imageSize), n, "disk.img's size")
	assert.Equal(t, hex.EncodeToString(want[:]), hex.EncodeToString(h.Sum(nil)), "sha256 of disk.img, want the source's")

	// CDI cleans up after itself: the importer pods and the scratch claim
	// go; the framework's Stop takes the rest (containers, the node's
	// folders, the stand-in's volumes under the environment's folder).
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(pods.Items) > 0 {
			return false, nil
		}
		claims, err := cs.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(claims.Items) == 1 && claims.Items[0].Name == claim, nil
	})
	assert.NoError(t, err, "CDI removed its importer pods and scratch claim:\n%s", describeNamespace(cs, ns))
}

// TestRealWebhookRefusesInvalidDataVolume: CDI's own validating webhook
// (cdi-apiserver, called by the API server through the cdi-api Service's
// endpoint) refuses a DataVolume whose HTTP source is not http(s), in
// CDI's words.
func TestRealWebhookRefusesInvalidDataVolume(t *testing.T) {
	env := cdiEnv(t)
	dc := env.Dynamic(t)
	ns := env.Namespace(t)
	_, err := dc.Resource(dataVolumes).Namespace(ns).Create(context.Background(),
		dataVolume(ns, "refused", "ftp://198.18.0.1/disk.img", "8Mi"), metav1.CreateOptions{})
	require.Error(t, err, "creating a DataVolume with an ftp:// source")
	assert.Contains(t, err.Error(), `admission webhook "datavolume-validate.cdi.kubevirt.io" denied the request`, "who refused")
	assert.Contains(t, err.Error(), "Invalid source URL scheme: ftp://198.18.0.1/disk.img", "CDI's reason")
}

// waitDataVolume waits for a DataVolume to Succeed; on failure or timeout
// it says what the DataVolume, its pods and its events said.
func waitDataVolume(t *testing.T, dc dynamic.Interface, cs kubernetes.Interface, ns, name string, timeout time.Duration) *unstructured.Unstructured {
	t.Helper()
	var last *unstructured.Unstructured
	var phases []string
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		dv, err := dc.Resource(dataVolumes).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = dv
		phase, _, _ := unstructured.NestedString(dv.Object, "status", "phase")
		if len(phases) == 0 || phases[len(phases)-1] != phase {
			phases = append(phases, phase)
		}
		return phase == "Succeeded" || phase == "Failed", nil
	})
	phase := ""
	if last != nil {
		phase, _, _ = unstructured.NestedString(last.Object, "status", "phase")
	}
	if err != nil || phase != "Succeeded" {
		t.Fatalf("DataVolume %s/%s: phases %v, want Succeeded (%v)\nstatus: %v\n%s", ns, name, phases, err,
			statusOf(last), describeNamespace(cs, ns))
	}
	t.Logf("DataVolume %s phases: %s; restarts %v", name, strings.Join(phases, " -> "), nestedValue(last, "status", "restartCount"))
	t.Logf("events of %s:\n%s", ns, describeEvents(cs, ns))
	return last
}

func statusOf(u *unstructured.Unstructured) any {
	if u == nil {
		return nil
	}
	return u.Object["status"]
}

// describeNamespace lists the pods and events of ns, for failures.
func describeNamespace(cs kubernetes.Interface, ns string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var b strings.Builder
	if pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, p := range pods.Items {
			fmt.Fprintf(&b, "pod %s: %s %v\n", p.Name, p.Status.Phase, p.Status.ContainerStatuses)
			if logs, err := cs.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{TailLines: ptrTo(int64(30))}).DoRaw(ctx); err == nil {
				fmt.Fprintf(&b, "  logs:\n%s\n", logs)
			}
		}
	}
	b.WriteString(describeEvents(cs, ns))
	return b.String()
}

// describeEvents lists the events of ns, oldest first.
func describeEvents(cs kubernetes.Interface, ns string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	events, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "(listing events: " + err.Error() + ")"
	}
	sort.Slice(events.Items, func(i, j int) bool {
		return events.Items[i].LastTimestamp.Before(&events.Items[j].LastTimestamp)
	})
	var b strings.Builder
	for _, e := range events.Items {
		fmt.Fprintf(&b, "  %s %s %s: %s %s\n", e.LastTimestamp.Format("15:04:05"), e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
	}
	return b.String()
}

func nestedValue(u *unstructured.Unstructured, fields ...string) any {
	if u == nil {
		return nil
	}
	v, _, _ := unstructured.NestedFieldNoCopy(u.Object, fields...)
	return v
}

func ptrTo[T any](v T) *T { return &v }
