package framework

import (
	"archive/tar"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// These tests need neither root nor a node; the image test needs the
// binary of hack/build-coredns.sh in $COREDNS_DIR.

func TestKubeletNamesTheClusterDNSWhenOn(t *testing.T) {
	n := testNode(t)
	n.dns = &clusterDNS{ip: ClusterDNSIP}
	b, err := kubeletConfig(n, "/ca.crt", "/k.crt", "/k.key")
	require.NoError(t, err, "rendering")
	var cfg map[string]any
	require.NoError(t, yaml.Unmarshal(b, &cfg), "the configuration:\n%s", b)
	assert.Equal(t, []any{ClusterDNSIP}, cfg["clusterDNS"], "clusterDNS")
	assert.Equal(t, "cluster.local", cfg["clusterDomain"], "clusterDomain")
	assert.Equal(t, "", cfg["resolvConf"], "resolvConf, want none (no DNS outside the machine) with cluster DNS too")
}

func TestClusterDNSServiceIsInTheServiceRange(t *testing.T) {
	_, cidr, err := net.ParseCIDR(serviceCIDR)
	require.NoError(t, err, "the service range")
	ip := net.ParseIP(ClusterDNSIP)
	assert.True(t, cidr.Contains(ip), "%s in %s", ClusterDNSIP, serviceCIDR)
	assert.Equal(t, byte(10), ip.To4()[3], "the tenth address, as clusters give kube-dns")

	svc := newCoreDNSObjects("img").service
	assert.Equal(t, "kube-system", svc.Namespace, "namespace")
	assert.Equal(t, ClusterDNSService, svc.Name, "name")
	assert.Equal(t, ClusterDNSIP, svc.Spec.ClusterIP, "cluster IP")
	require.Len(t, svc.Spec.Ports, 2, "ports")
	dep := newCoreDNSObjects("img").deployment
	ports := map[string]corev1.ContainerPort{}
	for _, p := range dep.Spec.Template.Spec.Containers[0].Ports {
		ports[p.Name] = p
	}
	for _, p := range svc.Spec.Ports {
		assert.EqualValues(t, 53, p.Port, "service port %s", p.Name)
		target, ok := ports[p.TargetPort.StrVal]
		require.True(t, ok, "service port %s targets %v, a port the container does not name", p.Name, p.TargetPort)
		assert.Equal(t, p.Protocol, target.Protocol, "protocol of %s", p.Name)
		assert.EqualValues(t, coreDNSPort, target.ContainerPort, "container port of %s", p.Name)
	}
	assert.Equal(t, svc.Spec.Selector, dep.Spec.Template.Labels, "the Service selects CoreDNS's pods")
}

func TestCoreDNSPodIsRestricted(t *testing.T) {
	o := newCoreDNSObjects("platform.example/vm-migration/coredns:v1")
	spec := o.deployment.Spec.Template.Spec
	assert.EqualValues(t, 1, *o.deployment.Spec.Replicas, "replicas")
	assert.Equal(t, CoreDNSName, spec.ServiceAccountName, "service account")
	assert.Equal(t, corev1.DNSDefault, spec.DNSPolicy, "CoreDNS's own DNS, want the node's, not itself")
	assert.True(t, *spec.SecurityContext.RunAsNonRoot, "runAsNonRoot")
	assert.NotZero(t, *spec.SecurityContext.RunAsUser, "a numeric non-root user")
	assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, spec.SecurityContext.SeccompProfile.Type, "seccomp")
	c := spec.Containers[0]
	assert.False(t, *c.SecurityContext.AllowPrivilegeEscalation, "allowPrivilegeEscalation")
	assert.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop, "dropped capabilities")
	assert.Empty(t, c.SecurityContext.Capabilities.Add, "added capabilities, want none (it listens on 1053)")
	assert.Equal(t, "/ready", c.ReadinessProbe.HTTPGet.Path, "readiness")
	assert.EqualValues(t, 8181, c.ReadinessProbe.HTTPGet.Port.IntVal, "readiness port")
	assert.Equal(t, "/health", c.LivenessProbe.HTTPGet.Path, "liveness")
	assert.EqualValues(t, 8080, c.LivenessProbe.HTTPGet.Port.IntVal, "liveness port")
	assert.Equal(t, coreDNSConfigDir, c.VolumeMounts[0].MountPath, "the Corefile's folder")

	var verbs []string
	for _, r := range o.clusterRole.Rules {
		for _, res := range r.Resources {
			verbs = append(verbs, res+":"+strings.Join(r.Verbs, ","))
		}
	}
	assert.ElementsMatch(t, []string{"services:list,watch", "pods:list,watch", "namespaces:list,watch", "endpointslices:list,watch"}, verbs, "CoreDNS's permissions")
	assert.Equal(t, o.clusterRole.Name, o.binding.RoleRef.Name, "the binding's role")
	assert.Equal(t, o.serviceAccount.Name, o.binding.Subjects[0].Name, "the binding's subject")
}

func TestCorefileAnswersOnlyTheCluster(t *testing.T) {
	c := corefile()
	for _, want := range []string{
		"cluster.local:1053 in-addr.arpa:1053 ip6.arpa:1053 {",
		"kubernetes cluster.local in-addr.arpa ip6.arpa {",
		"pods insecure", "fallthrough in-addr.arpa ip6.arpa",
		"cache 30", "errors", "health :8080", "ready :8181", "loop",
		".:1053 {", "rcode NXDOMAIN",
	} {
		assert.Contains(t, c, want, "the Corefile:\n%s", c)
	}
	assert.NotContains(t, c, "forward", "nothing outside the machine is reachable")
	assert.Equal(t, c, newCoreDNSObjects("img").configMap.Data["Corefile"], "the ConfigMap holds the Corefile")
}

func TestCoreDNSOffWithoutItsFolder(t *testing.T) {
	t.Setenv(EnvCoreDNSDir, "")
	dns, err := prepareClusterDNS()
	require.NoError(t, err, "without %s", EnvCoreDNSDir)
	assert.Nil(t, dns, "cluster DNS without %s", EnvCoreDNSDir)
	assert.NoError(t, checkCoreDNS(), "nothing is missing when cluster DNS is off")
	t.Setenv(EnvCoreDNSDir, t.TempDir())
	assert.ErrorContains(t, checkCoreDNS(), "holds no coredns binary", "a folder without the binary")
}

// TestCoreDNSImage builds the image from the binary of $COREDNS_DIR into
// an image cache of the test's and reads it back: the static binary
// alone at /coredns, its Corefile's folder, a numeric non-root user, the
// entrypoint; a second build finds it cached.
func TestCoreDNSImage(t *testing.T) {
	binary := coreDNSPath()
	if binary == "" {
		t.Skipf("%s is not set (hack/build-coredns.sh)", EnvCoreDNSDir)
	}
	t.Setenv(EnvImageCache, t.TempDir())
	ref := coreDNSRepository + ":" + coreDNSVersion(filepath.Dir(binary))
	img, err := buildCoreDNSImage(binary, ref)
	require.NoError(t, err, "building the image")
	assert.False(t, img.Cached, "first build")
	again, err := buildCoreDNSImage(binary, ref)
	require.NoError(t, err, "building it again")
	assert.True(t, again.Cached, "second build, want the cached tarball")
	assert.Equal(t, img.Tarball, again.Tarball, "the cached tarball")

	tag, err := name.NewTag(ref)
	require.NoError(t, err)
	image, err := tarball.ImageFromPath(img.Tarball, &tag)
	require.NoError(t, err, "reading %s", img.Tarball)
	cfg, err := image.ConfigFile()
	require.NoError(t, err, "the image's config")
	assert.Equal(t, []string{"/coredns", "-conf", "/etc/coredns/Corefile"}, cfg.Config.Entrypoint, "entrypoint")
	assert.Equal(t, "65532:65532", cfg.Config.User, "user")
	layers, err := image.Layers()
	require.NoError(t, err)
	require.Len(t, layers, 1, "layers")
	rc, err := layers[0].Uncompressed()
	require.NoError(t, err)
	defer rc.Close()
	entries := map[string]int64{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "reading the layer")
		entries[h.Name] = h.Mode
	}
	fi, err := os.Stat(binary)
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"coredns": 0o755, "etc/": 0o755, "etc/coredns/": 0o755, "tmp/": 0o1777}, entries, "the layer's files (binary %d bytes)", fi.Size())
}
