//go:build integration

package node

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"platform.example/vm-migration/test/framework"
	"platform.example/vm-migration/test/integration/node/probereport"
)

// needClusterDNS skips t when the node runs without cluster DNS
// (COREDNS_DIR unset), and fails it in CI, where the Makefile sets it.
func needClusterDNS(t *testing.T, env *framework.Environment) {
	t.Helper()
	if env.ClusterDNS() != "" {
		return
	}
	msg := fmt.Sprintf("the node runs without cluster DNS: set %s to the last line of hack/build-coredns.sh", framework.EnvCoreDNSDir)
	if v := strings.ToLower(os.Getenv(framework.EnvCI)); v == "true" || v == "1" || v == "yes" {
		require.FailNow(t, msg)
	}
	t.Skip(msg)
}

// runProbe runs the probe with env in ns until it ends, and returns its
// report.
func runProbe(t *testing.T, cs kubernetes.Interface, ns, name string, env []corev1.EnvVar) probereport.Report {
	t.Helper()
	pod := neverPullPod(ns, name, probeImage)
	pod.Spec.Containers[0].Env = env
	start := time.Now()
	_, err := cs.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
	require.NoError(t, err, "creating pod %s", name)
	done := waitPod(t, cs, ns, name, 2*time.Minute, "ends", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	})
	t.Logf("pod %s created to %s in %s", name, done.Status.Phase, time.Since(start).Round(time.Millisecond))
	require.Equal(t, corev1.PodSucceeded, done.Status.Phase, "pod %s; status %+v", name, done.Status)
	term := done.Status.ContainerStatuses[0].State.Terminated
	require.NotNil(t, term, "the terminated state of %s", name)
	var r probereport.Report
	require.NoError(t, json.Unmarshal([]byte(term.Message), &r), "the report of %s: %q", name, term.Message)
	return r
}

// echoService runs the probe as an HTTP server in ns behind the Service
// echo (port 80), and waits until its pod is Ready; it returns the
// Service's ClusterIP.
func echoService(t *testing.T, cs kubernetes.Interface, ns, answer string) string {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{"app": "echo"}
	pod := neverPullPod(ns, "echo", probeImage)
	pod.Labels = labels
	pod.Spec.RestartPolicy = corev1.RestartPolicyAlways
	c := &pod.Spec.Containers[0]
	c.Env = []corev1.EnvVar{{Name: "SERVE", Value: ":8080"}, {Name: "ANSWER", Value: answer}}
	c.Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}
	c.ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromString("http")}},
		PeriodSeconds: 1,
	}
	_, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err, "creating the echo pod")
	svc, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: ns},
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err, "creating the echo Service")
	waitPod(t, cs, ns, "echo", time.Minute, "Ready", func(p *corev1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	})
	return svc.Spec.ClusterIP
}

// TestClusterDNSResolvesServices: a restricted pod resolves, through
// CoreDNS behind the kube-dns Service, the kubernetes Service by its full
// name and a Service of its own namespace by its short name and by
// <svc>.<ns>.svc (and the full name), and reaches the HTTP server behind
// that Service by its short name; names that do not exist, in the cluster
// or outside it, are refused at once with NXDOMAIN.
func TestClusterDNSResolvesServices(t *testing.T) {
	env := framework.Env(t)
	needClusterDNS(t, env)
	cs := env.Kubernetes(t)
	importProbe(t, env)
	ns := restrictedNamespace(t, env, cs)
	t.Logf("cluster DNS %s (%s), ready %s after its objects were created", env.ClusterDNS(), env.ClusterDNSImage(), env.ClusterDNSReadyIn().Round(time.Millisecond))
	kubernetesSvc, err := cs.CoreV1().Services("default").Get(context.Background(), "kubernetes", metav1.GetOptions{})
	require.NoError(t, err, "reading the kubernetes Service")
	echoIP := echoService(t, cs, ns, "hello from the echo Service")

	names := []string{
		"kubernetes.default.svc.cluster.local",
		"echo",
		"echo." + ns + ".svc",
		"echo." + ns + ".svc.cluster.local",
		"no-such-service",
		"no-such-service." + ns + ".svc.cluster.local",
		"no-such-name.example",
	}
	r := runProbe(t, cs, ns, "resolver", []corev1.EnvVar{
		{Name: "EMPTYDIR", Value: "/tmp"},
		{Name: "LOOKUP", Value: strings.Join(names, ",")},
		{Name: "SERVICE_URL", Value: "http://echo/"},
	})
	require.Len(t, r.Lookups, len(names), "lookups in the report")
	got := map[string]probereport.Lookup{}
	for _, l := range r.Lookups {
		got[l.Name] = l
		t.Logf("lookup %s: %v %s (%d ms)", l.Name, l.Addresses, l.Error, l.Millis)
	}
	want := map[string]string{
		"kubernetes.default.svc.cluster.local": kubernetesSvc.Spec.ClusterIP,
		"echo":                                 echoIP,
		"echo." + ns + ".svc":                  echoIP,
		"echo." + ns + ".svc.cluster.local":    echoIP,
	}
	for name, ip := range want {
		assert.Empty(t, got[name].Error, "lookup of %s", name)
		assert.Equal(t, []string{ip}, got[name].Addresses, "addresses of %s", name)
	}
	for _, name := range []string{"no-such-service", "no-such-service." + ns + ".svc.cluster.local", "no-such-name.example"} {
		assert.True(t, got[name].NotFound, "lookup of %s: %q, want NXDOMAIN", name, got[name].Error)
		assert.Less(t, got[name].Millis, int64(2000), "lookup of %s took %d ms, want an answer at once", name, got[name].Millis)
	}
	assert.Equal(t, "hello from the echo Service", r.ServiceAnswer, "GET http://echo/ from the pod")
}

// TestClusterDNSInPodResolvConf: the kubelet gives a pod the cluster DNS
// address as its only nameserver, the search domains of its namespace and
// the cluster, and ndots:5, as a cluster does.
func TestClusterDNSInPodResolvConf(t *testing.T) {
	env := framework.Env(t)
	needClusterDNS(t, env)
	cs := env.Kubernetes(t)
	importProbe(t, env)
	ns := restrictedNamespace(t, env, cs)
	r := runProbe(t, cs, ns, "resolv-conf", []corev1.EnvVar{{Name: "EMPTYDIR", Value: "/tmp"}})
	t.Logf("the pod's /etc/resolv.conf:\n%s", r.ResolvConf)
	var nameservers, search, options []string
	for _, line := range strings.Split(r.ResolvConf, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "nameserver":
			nameservers = append(nameservers, f[1:]...)
		case "search":
			search = append(search, f[1:]...)
		case "options":
			options = append(options, f[1:]...)
		}
	}
	assert.Equal(t, []string{framework.ClusterDNSIP}, nameservers, "nameservers")
	assert.Equal(t, []string{ns + ".svc.cluster.local", "svc.cluster.local", "cluster.local"}, search, "search domains")
	assert.Contains(t, options, "ndots:5", "options")
}

// TestClusterDNSRunsAsACluster: CoreDNS runs as a cluster runs it: its
// Deployment in kube-system Available with one replica of the image built
// here, behind the kube-dns Service at the cluster DNS address, as
// ServiceAccount coredns; its pod is one PodSecurity restricted admits
// (a server-side dry run of it in a restricted namespace).
func TestClusterDNSRunsAsACluster(t *testing.T) {
	env := framework.Env(t)
	needClusterDNS(t, env)
	cs := env.Kubernetes(t)
	ctx := context.Background()
	dep, err := cs.AppsV1().Deployments(metav1.NamespaceSystem).Get(ctx, framework.CoreDNSName, metav1.GetOptions{})
	require.NoError(t, err, "CoreDNS's Deployment")
	available := false
	for _, c := range dep.Status.Conditions {
		available = available || c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue
	}
	assert.True(t, available, "CoreDNS's Deployment Available; status %+v", dep.Status)
	assert.EqualValues(t, 1, dep.Status.AvailableReplicas, "available replicas")
	assert.Equal(t, env.ClusterDNSImage(), dep.Spec.Template.Spec.Containers[0].Image, "CoreDNS's image")
	assert.Equal(t, framework.CoreDNSName, dep.Spec.Template.Spec.ServiceAccountName, "CoreDNS's ServiceAccount")
	svc, err := cs.CoreV1().Services(metav1.NamespaceSystem).Get(ctx, framework.ClusterDNSService, metav1.GetOptions{})
	require.NoError(t, err, "the kube-dns Service")
	assert.Equal(t, framework.ClusterDNSIP, svc.Spec.ClusterIP, "the kube-dns Service's ClusterIP")

	ns := restrictedNamespace(t, env, cs)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "coredns-copy", Namespace: ns}, Spec: *dep.Spec.Template.Spec.DeepCopy()}
	// ServiceAccount admission wants the account in the pod's namespace,
	// and PriorityClass admission keeps system-cluster-critical to
	// kube-system: neither is PodSecurity's concern.
	pod.Spec.ServiceAccountName = "default"
	pod.Spec.PriorityClassName = ""
	_, err = cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	assert.NoError(t, err, "a copy of CoreDNS's pod in a namespace enforcing PodSecurity restricted")
}
