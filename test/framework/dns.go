package framework

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// EnvCoreDNSDir names the folder holding the coredns binary
// hack/build-coredns.sh builds (its last output line). When it is set, the
// node runs cluster DNS: CoreDNS in kube-system behind the kube-dns
// Service, named by the kubelet's clusterDNS. When it is unset, the node
// runs without cluster DNS, and pods resolve no Service names.
const EnvCoreDNSDir = "COREDNS_DIR"

// Cluster DNS as pods see it.
const (
	// ClusterDNSIP is the kube-dns Service's fixed ClusterIP, the tenth
	// address of the service range, and the kubelet's clusterDNS.
	ClusterDNSIP = "10.0.0.10"
	// ClusterDomain is the cluster's DNS domain: Services are
	// <name>.<namespace>.svc.cluster.local.
	ClusterDomain = "cluster.local"
	// ClusterDNSService is the name of the Service in kube-system that
	// carries ClusterDNSIP.
	ClusterDNSService = "kube-dns"
	// CoreDNSName names CoreDNS's Deployment, ServiceAccount and
	// ConfigMap in kube-system.
	CoreDNSName = "coredns"
)

// coreDNSBinary is the binary's name in $COREDNS_DIR.
const coreDNSBinary = "coredns"

// coreDNSRepository is the CoreDNS image's repository; the tag is the
// version hack/build-coredns.sh records in BUILD-INFO.
const coreDNSRepository = "platform.example/vm-migration/coredns"

// CoreDNS's ports inside its pod: DNS on an unprivileged port (the
// Service maps 53 to it), so the container needs no capability.
const (
	coreDNSPort       = 1053
	coreDNSHealthPort = 8080
	coreDNSReadyPort  = 8181
)

// coreDNSConfigDir is where the Corefile's ConfigMap is mounted.
const coreDNSConfigDir = "/etc/coredns"

// coreDNSLabels select CoreDNS's pods, as clusters label them.
var coreDNSLabels = map[string]string{"k8s-app": "kube-dns"}

// dnsStartTimeout bounds CoreDNS's start, from its objects' creation to
// the Deployment Available and its Service routed by kube-proxy.
const dnsStartTimeout = 2 * time.Minute

// clusterDNS is the node's CoreDNS: its image and how long it took to
// serve.
type clusterDNS struct {
	ip      string
	image   string
	tarball string
	readyIn time.Duration
}

// dnsOffOnce says once per process that the node runs without cluster DNS.
var dnsOffOnce sync.Once

// coreDNSPath is $COREDNS_DIR/coredns, or empty when the variable is
// unset.
func coreDNSPath() string {
	dir := os.Getenv(EnvCoreDNSDir)
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, coreDNSBinary)
}

// checkCoreDNS says what is missing when $COREDNS_DIR is set but holds no
// coredns binary.
func checkCoreDNS() error {
	p := coreDNSPath()
	if p == "" {
		return nil
	}
	if fi, err := os.Stat(p); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%s=%s holds no coredns binary (hack/build-coredns.sh builds it; unset %s to run the node without cluster DNS)",
			EnvCoreDNSDir, os.Getenv(EnvCoreDNSDir), EnvCoreDNSDir)
	}
	return nil
}

// prepareClusterDNS builds (or finds cached) the CoreDNS image when
// $COREDNS_DIR is set; without it, it says once that the node runs
// without cluster DNS and returns nil.
func prepareClusterDNS() (*clusterDNS, error) {
	binary := coreDNSPath()
	if binary == "" {
		dnsOffOnce.Do(func() {
			fmt.Fprintf(os.Stderr, "framework: %s is not set: the node runs without cluster DNS (pods resolve no Service names); "+
				"set it to the last line of hack/build-coredns.sh to run CoreDNS\n", EnvCoreDNSDir)
		})
		return nil, nil
	}
	version := coreDNSVersion(filepath.Dir(binary))
	img, err := buildCoreDNSImage(binary, coreDNSRepository+":"+version)
	if err != nil {
		return nil, fmt.Errorf("building the CoreDNS image: %w", err)
	}
	return &clusterDNS{ip: ClusterDNSIP, image: img.Reference, tarball: img.Tarball}, nil
}

// coreDNSVersion is the version BUILD-INFO records ("coredns v1.15.0" on
// its first line), or "local" when it says none.
func coreDNSVersion(dir string) string {
	f, err := os.Open(filepath.Join(dir, "BUILD-INFO"))
	if err != nil {
		return "local"
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	if s.Scan() {
		if words := strings.Fields(s.Text()); len(words) == 2 && words[0] == coreDNSBinary {
			return words[1]
		}
	}
	return "local"
}

// coreDNSLayout is the CoreDNS image: the static binary at /coredns, run
// by a numeric non-root user with the Corefile of its ConfigMap.
var coreDNSLayout = staticImage{
	path: coreDNSBinary,
	args: []string{"-conf", coreDNSConfigDir + "/Corefile"},
	dirs: []string{strings.TrimPrefix(coreDNSConfigDir, "/")},
}

// buildCoreDNSImage lays the coredns binary out as coreDNSLayout, cached
// by content in the image cache like the Go images.
func buildCoreDNSImage(binary, reference string) (*BuiltImage, error) {
	cache, err := ImageCacheDir()
	if err != nil {
		return nil, err
	}
	tag, err := name.NewTag(reference)
	if err != nil {
		return nil, fmt.Errorf("image reference %q: %w", reference, err)
	}
	tarballPath, cached, err := cachedStaticImage(cache, binary, coreDNSBinary, coreDNSLayout, tag)
	if err != nil {
		return nil, err
	}
	return &BuiltImage{Reference: tag.String(), Tarball: tarballPath, Binary: binary, Cached: cached}, nil
}

// corefile is CoreDNS's configuration: the kubernetes plugin answers for
// the cluster domain and the reverse zones (pods' A records from their
// addresses; reverse names outside the cluster fall through to nothing,
// SERVFAIL); every other name gets NXDOMAIN at once from the template
// plugin, since nothing outside the machine is reachable (no forward).
func corefile() string {
	return fmt.Sprintf(`%[1]s:%[2]d in-addr.arpa:%[2]d ip6.arpa:%[2]d {
    errors
    health :%[3]d
    ready :%[4]d
    kubernetes %[1]s in-addr.arpa ip6.arpa {
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }
    cache 30
    loop
}
.:%[2]d {
    errors
    template ANY ANY {
        rcode NXDOMAIN
    }
}
`, ClusterDomain, coreDNSPort, coreDNSHealthPort, coreDNSReadyPort)
}

// coreDNSObjects are what a cluster's DNS add-on installs in kube-system.
type coreDNSObjects struct {
	serviceAccount *corev1.ServiceAccount
	clusterRole    *rbacv1.ClusterRole
	binding        *rbacv1.ClusterRoleBinding
	configMap      *corev1.ConfigMap
	deployment     *appsv1.Deployment
	service        *corev1.Service
}

// coreDNSRoleName is the ClusterRole and ClusterRoleBinding's name.
const coreDNSRoleName = "system:coredns"

// newCoreDNSObjects builds CoreDNS's objects for image.
func newCoreDNSObjects(image string) coreDNSObjects {
	ns := metav1.NamespaceSystem
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: coreDNSLabels}
	}
	list := []string{"list", "watch"}
	return coreDNSObjects{
		serviceAccount: &corev1.ServiceAccount{ObjectMeta: meta(CoreDNSName)},
		clusterRole: &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: coreDNSRoleName, Labels: coreDNSLabels},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"services", "pods", "namespaces"}, Verbs: list},
				{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: list},
			},
		},
		binding: &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: coreDNSRoleName, Labels: coreDNSLabels},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: coreDNSRoleName},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: CoreDNSName, Namespace: ns}},
		},
		configMap:  &corev1.ConfigMap{ObjectMeta: meta(CoreDNSName), Data: map[string]string{"Corefile": corefile()}},
		deployment: coreDNSDeployment(image),
		service: &corev1.Service{
			ObjectMeta: meta(ClusterDNSService),
			Spec: corev1.ServiceSpec{
				Selector:  coreDNSLabels,
				ClusterIP: ClusterDNSIP,
				Ports: []corev1.ServicePort{
					{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: intstr.FromString("dns")},
					{Name: "dns-tcp", Protocol: corev1.ProtocolTCP, Port: 53, TargetPort: intstr.FromString("dns-tcp")},
				},
			},
		},
	}
}

// coreDNSDeployment is one CoreDNS replica that PodSecurity restricted
// admits: non-root, no capability (it listens on 1053), no privilege
// escalation, a read-only root, seccomp RuntimeDefault. Its own DNS is
// the node's (dnsPolicy Default), not itself.
func coreDNSDeployment(image string) *appsv1.Deployment {
	probe := func(path string, port int) corev1.ProbeHandler {
		return corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(int32(port)), Scheme: corev1.URISchemeHTTP}}
	}
	user := int64(65532)
	container := corev1.Container{
		Name:            CoreDNSName,
		Image:           image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Ports: []corev1.ContainerPort{
			{Name: "dns", ContainerPort: coreDNSPort, Protocol: corev1.ProtocolUDP},
			{Name: "dns-tcp", ContainerPort: coreDNSPort, Protocol: corev1.ProtocolTCP},
		},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("170Mi")},
		},
		VolumeMounts:   []corev1.VolumeMount{{Name: "config", MountPath: coreDNSConfigDir, ReadOnly: true}},
		ReadinessProbe: &corev1.Probe{ProbeHandler: probe("/ready", coreDNSReadyPort), PeriodSeconds: 2, TimeoutSeconds: 2},
		LivenessProbe: &corev1.Probe{ProbeHandler: probe("/health", coreDNSHealthPort),
			InitialDelaySeconds: 10, PeriodSeconds: 10, TimeoutSeconds: 5, FailureThreshold: 5},
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: CoreDNSName, Namespace: metav1.NamespaceSystem, Labels: coreDNSLabels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: coreDNSLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: coreDNSLabels},
				Spec: corev1.PodSpec{
					ServiceAccountName: CoreDNSName,
					PriorityClassName:  "system-cluster-critical",
					DNSPolicy:          corev1.DNSDefault,
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr.To(true),
						RunAsUser:      &user,
						RunAsGroup:     &user,
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{container},
					Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
						LocalObjectReference: corev1.LocalObjectReference{Name: CoreDNSName},
						Items:                []corev1.KeyToPath{{Key: "Corefile", Path: "Corefile"}},
					}}}},
				},
			},
		},
	}
}

// install creates the objects, in dependency order; one that exists
// already is kept.
func (o coreDNSObjects) install(ctx context.Context, cs kubernetes.Interface) error {
	ns := metav1.NamespaceSystem
	steps := []struct {
		what   string
		create func() error
	}{
		{"service account", func() error {
			_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, o.serviceAccount, metav1.CreateOptions{})
			return err
		}},
		{"cluster role", func() error {
			_, err := cs.RbacV1().ClusterRoles().Create(ctx, o.clusterRole, metav1.CreateOptions{})
			return err
		}},
		{"cluster role binding", func() error {
			_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, o.binding, metav1.CreateOptions{})
			return err
		}},
		{"config map", func() error {
			_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, o.configMap, metav1.CreateOptions{})
			return err
		}},
		{"service", func() error {
			_, err := cs.CoreV1().Services(ns).Create(ctx, o.service, metav1.CreateOptions{})
			return err
		}},
		{"deployment", func() error {
			_, err := cs.AppsV1().Deployments(ns).Create(ctx, o.deployment, metav1.CreateOptions{})
			return err
		}},
	}
	for _, s := range steps {
		if err := s.create(); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating CoreDNS's %s: %w", s.what, err)
		}
	}
	return nil
}

// startClusterDNS installs CoreDNS (its image already imported) and
// waits until its Deployment is Available and kube-proxy routes the
// kube-dns Service to it.
func (e *Environment) startClusterDNS(ctx context.Context, cs kubernetes.Interface, n *node) error {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, dnsStartTimeout)
	defer cancel()
	if err := newCoreDNSObjects(n.dns.image).install(ctx, cs); err != nil {
		return err
	}
	if err := waitCoreDNSAvailable(ctx, cs, n); err != nil {
		return err
	}
	if err := waitServiceRouted(ctx, n, "kube-system/kube-dns:dns cluster IP", "kube-system/kube-dns:dns-tcp cluster IP"); err != nil {
		return err
	}
	n.dns.readyIn = time.Since(start)
	return nil
}

// waitCoreDNSAvailable waits for CoreDNS's Deployment to be Available;
// on failure it says what its pods were doing.
func waitCoreDNSAvailable(ctx context.Context, cs kubernetes.Interface, n *node) error {
	err := waitFor(ctx, n.kubelet, "CoreDNS's Deployment Available", func() (bool, error) {
		d, err := cs.AppsV1().Deployments(metav1.NamespaceSystem).Get(ctx, CoreDNSName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if d.Status.ObservedGeneration < d.Generation || d.Status.AvailableReplicas < 1 {
			return false, nil
		}
		for _, c := range d.Status.Conditions {
			if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err == nil {
		return nil
	}
	lctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return errors.Join(err, fmt.Errorf("CoreDNS's pods: %s", coreDNSPodStates(lctx, cs)))
}

// coreDNSPodStates says, in one line, where each CoreDNS pod stands.
func coreDNSPodStates(ctx context.Context, cs kubernetes.Interface) string {
	pods, err := cs.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
	if err != nil {
		return err.Error()
	}
	if len(pods.Items) == 0 {
		return "none (see kube-controller-manager's log)"
	}
	var states []string
	for _, p := range pods.Items {
		s := fmt.Sprintf("%s %s", p.Name, p.Status.Phase)
		for _, c := range p.Status.Conditions {
			if c.Status != corev1.ConditionTrue && c.Message != "" {
				s += fmt.Sprintf(" %s: %s", c.Type, c.Message)
			}
		}
		for _, c := range p.Status.ContainerStatuses {
			switch {
			case c.State.Waiting != nil:
				s += fmt.Sprintf(" waiting %s %s", c.State.Waiting.Reason, c.State.Waiting.Message)
			case c.State.Terminated != nil:
				s += fmt.Sprintf(" terminated %s (exit %d)", c.State.Terminated.Reason, c.State.Terminated.ExitCode)
			}
			s += fmt.Sprintf(" ready=%t restarts=%d", c.Ready, c.RestartCount)
		}
		states = append(states, s)
	}
	return strings.Join(states, "; ")
}

// ClusterDNS is the cluster DNS address pods are given (the kube-dns
// Service's ClusterIP), or empty when the node runs without cluster DNS
// ($COREDNS_DIR unset) or there is no node.
func (e *Environment) ClusterDNS() string {
	if e.node == nil || e.node.dns == nil {
		return ""
	}
	return e.node.dns.ip
}

// ClusterDNSImage is the reference of the CoreDNS image on the node, or
// empty without cluster DNS.
func (e *Environment) ClusterDNSImage() string {
	if e.node == nil || e.node.dns == nil {
		return ""
	}
	return e.node.dns.image
}

// ClusterDNSReadyIn is how long CoreDNS took from its objects' creation
// to its Service answering through kube-proxy; zero without cluster DNS.
func (e *Environment) ClusterDNSReadyIn() time.Duration {
	if e.node == nil || e.node.dns == nil {
		return 0
	}
	return e.node.dns.readyIn
}
