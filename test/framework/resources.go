package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// crdEstablishTimeout bounds the wait for CRDs to be Established and served.
const crdEstablishTimeout = 30 * time.Second

// fieldManager is the field manager of objects the framework applies.
const fieldManager = "vm-migration-test-framework"

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// Kubernetes returns an admin clientset, failing t on error.
func (e *Environment) Kubernetes(t testing.TB) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(e.Config())
	require.NoError(t, err, "creating clientset")
	return cs
}

// Dynamic returns an admin dynamic client, failing t on error.
func (e *Environment) Dynamic(t testing.TB) dynamic.Interface {
	t.Helper()
	dc, err := dynamic.NewForConfig(e.Config())
	require.NoError(t, err, "creating dynamic client")
	return dc
}

// Namespace creates a fresh namespace for t, named after the test, and
// deletes it when t ends. Without kube-controller-manager the namespace
// stays Terminating; its name is never reused.
func (e *Environment) Namespace(t testing.TB) string {
	t.Helper()
	cs := e.Kubernetes(t)
	name := namespaceName(t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   name,
		Labels: map[string]string{"test.platform.example/framework": "true"},
	}}
	_, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	require.NoError(t, err, "creating namespace %s", name)
	if e.node != nil {
		// Pods need the namespace's default ServiceAccount (ServiceAccount
		// admission) and its root CA ConfigMap (the projected token volume),
		// which kube-controller-manager creates.
		require.NoError(t, waitForNamespaceReady(ctx, cs, name), "namespace %s", name)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// Already gone is fine.
		if err := cs.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); !apierrors.IsNotFound(err) {
			assert.NoError(t, err, "deleting namespace %s", name)
		}
	})
	return name
}

// waitForNamespaceReady waits until a namespace has its default
// ServiceAccount and kube-root-ca.crt ConfigMap.
func waitForNamespaceReady(ctx context.Context, cs kubernetes.Interface, name string) error {
	return wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if _, err := cs.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return false, nil
		}
		_, err := cs.CoreV1().ConfigMaps(name).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err == nil, nil
	})
}

// namespaceName is a DNS-1123 label made of the test's name and a random
// suffix.
func namespaceName(testName string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(testName) {
		switch {
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
			dash = false
		case !dash && b.Len() > 0:
			b.WriteByte('-')
			dash = true
		}
	}
	base := strings.Trim(b.String(), "-")
	if len(base) > 50 {
		base = strings.Trim(base[:50], "-")
	}
	if base == "" {
		base = "test"
	}
	return base + "-" + rand.String(6)
}

// ServiceAccountConfig returns a rest.Config that authenticates as the
// ServiceAccount namespace/name with a token the API server issues for it
// (TokenRequest), so requests go through real authentication and RBAC.
func (e *Environment) ServiceAccountConfig(ctx context.Context, namespace, name string) (*rest.Config, error) {
	cs, err := kubernetes.NewForConfig(e.Config())
	if err != nil {
		return nil, fmt.Errorf("creating clientset: %w", err)
	}
	expiry := int64(3600)
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("requesting a token for service account %s/%s: %w", namespace, name, err)
	}
	cfg := e.Config()
	cfg.BearerToken = tr.Status.Token
	cfg.UserAgent = "vm-migration-test-as-" + name
	return cfg, nil
}

// InstallCRDs creates (or updates) every CustomResourceDefinition in the
// YAML and JSON files of dirs, and waits until each is Established and its
// resources are served by discovery. Other objects in the files are ignored.
func (e *Environment) InstallCRDs(ctx context.Context, dirs ...string) error {
	var crds []*unstructured.Unstructured
	for _, dir := range dirs {
		files, err := manifestFiles(dir)
		if err != nil {
			return err
		}
		for _, f := range files {
			objs, err := ReadObjects(f)
			if err != nil {
				return err
			}
			for _, o := range objs {
				if o.GetKind() == "CustomResourceDefinition" {
					crds = append(crds, o)
				}
			}
		}
	}
	if len(crds) == 0 {
		return fmt.Errorf("no CustomResourceDefinition found in %s", strings.Join(dirs, ", "))
	}
	dc, err := dynamic.NewForConfig(e.Config())
	if err != nil {
		return fmt.Errorf("creating dynamic client: %w", err)
	}
	for _, crd := range crds {
		if _, err := dc.Resource(crdGVR).Apply(ctx, crd.GetName(), crd, metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
			return fmt.Errorf("applying CRD %s: %w", crd.GetName(), err)
		}
	}
	return e.waitForCRDs(ctx, dc, crds)
}

func (e *Environment) waitForCRDs(ctx context.Context, dc dynamic.Interface, crds []*unstructured.Unstructured) error {
	disco, err := discovery.NewDiscoveryClientForConfig(e.Config())
	if err != nil {
		return fmt.Errorf("creating discovery client: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, crdEstablishTimeout)
	defer cancel()
	for _, crd := range crds {
		name := crd.GetName()
		var lastState string
		err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
			got, err := dc.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				lastState = err.Error()
				return false, nil
			}
			established, reason := crdConditions(got)
			lastState = reason
			if !established {
				return false, nil
			}
			return crdServed(disco, got), nil
		})
		if err != nil {
			return fmt.Errorf("waiting for CRD %s to be established and served (last seen: %s): %w", name, lastState, err)
		}
	}
	return nil
}

// crdConditions reports whether the CRD is Established with its names
// accepted, and otherwise why not.
func crdConditions(crd *unstructured.Unstructured) (bool, string) {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	status := map[string]string{}
	messages := []string{}
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		t, _ := m["type"].(string)
		s, _ := m["status"].(string)
		msg, _ := m["message"].(string)
		status[t] = s
		messages = append(messages, fmt.Sprintf("%s=%s (%s)", t, s, msg))
	}
	if status["Established"] == "True" && status["NamesAccepted"] == "True" {
		return true, ""
	}
	if len(messages) == 0 {
		return false, "no conditions yet"
	}
	return false, strings.Join(messages, "; ")
}

func crdServed(disco discovery.DiscoveryInterface, crd *unstructured.Unstructured) bool {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		m, ok := v.(map[string]any)
		if !ok || m["served"] != true {
			continue
		}
		name, _ := m["name"].(string)
		list, err := disco.ServerResourcesForGroupVersion(group + "/" + name)
		if err != nil {
			return false
		}
		found := false
		for _, r := range list.APIResources {
			if r.Name == plural {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// Apply server-side applies every object in the YAML or JSON file at path
// (multi-document files included; documents without a kind, and kustomize
// files, are skipped). A namespaced object without a namespace goes to
// defaultNamespace. It returns the applied objects.
func (e *Environment) Apply(ctx context.Context, path, defaultNamespace string) ([]*unstructured.Unstructured, error) {
	objs, err := ReadObjects(path)
	if err != nil {
		return nil, err
	}
	return e.ApplyObjects(ctx, objs, defaultNamespace)
}

// ApplyObjects server-side applies objs, in order; see Apply.
func (e *Environment) ApplyObjects(ctx context.Context, objs []*unstructured.Unstructured, defaultNamespace string) ([]*unstructured.Unstructured, error) {
	cfg := e.Config()
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating dynamic client: %w", err)
	}
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating discovery client: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))
	var applied []*unstructured.Unstructured
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			mapper.Reset()
			if mapping, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
				return applied, fmt.Errorf("mapping %s %s: %w", gvk, o.GetName(), err)
			}
		}
		var ri dynamic.ResourceInterface = dc.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			ns := o.GetNamespace()
			if ns == "" {
				ns = defaultNamespace
				o.SetNamespace(ns)
			}
			ri = dc.Resource(mapping.Resource).Namespace(ns)
		}
		got, err := ri.Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
		if err != nil {
			return applied, fmt.Errorf("applying %s %s: %w", gvk.Kind, objectKey(o), err)
		}
		applied = append(applied, got)
	}
	return applied, nil
}

func objectKey(o *unstructured.Unstructured) string {
	return types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}.String()
}

// ReadObjects decodes every Kubernetes object in the YAML or JSON file at
// path. Empty documents, documents without apiVersion and kind, and kustomize
// Kustomization files are skipped.
func ReadObjects(path string) ([]*unstructured.Unstructured, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	objs, err := DecodeObjects(b)
	if err != nil {
		return nil, fmt.Errorf("decoding %s: %w", path, err)
	}
	return objs, nil
}

// DecodeObjects decodes every Kubernetes object in a YAML or JSON stream;
// see ReadObjects.
func DecodeObjects(b []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var objs []*unstructured.Unstructured
	for i := 0; ; i++ {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		if m == nil {
			continue
		}
		o := &unstructured.Unstructured{Object: m}
		if o.GetAPIVersion() == "" || o.GetKind() == "" || strings.HasPrefix(o.GetAPIVersion(), "kustomize.config.k8s.io/") {
			continue
		}
		objs = append(objs, o)
	}
}

// manifestFiles lists the .yaml, .yml and .json files directly in dir, or
// dir itself when it is a file, sorted.
func manifestFiles(dir string) ([]string, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("reading manifests: %w", err)
	}
	if !fi.IsDir() {
		return []string{dir}, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading manifests: %w", err)
	}
	var files []string
	for _, e := range entries {
		switch strings.ToLower(filepath.Ext(e.Name())) {
		case ".yaml", ".yml", ".json":
			if !e.IsDir() {
				files = append(files, filepath.Join(dir, e.Name()))
			}
		}
	}
	sort.Strings(files)
	return files, nil
}
