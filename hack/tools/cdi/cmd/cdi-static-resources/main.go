// Command cdi-static-resources writes the resources CDI's operator creates
// around CDI's own Deployments, as CDI's operator generators in
// pkg/operator/resources/{cluster,namespaced} produce them, as YAML files:
//
//   - cluster-rbac.yaml: the ClusterRoles and ClusterRoleBindings of
//     cdi-apiserver, cdi-deployment (the controller) and cdi-uploadproxy
//     (the generator groups apiserver-rbac, controller-rbac and
//     uploadproxy-rbac), and CDI's aggregated admin/edit/view roles with
//     the config reader every authenticated user is bound to, through
//     which cdi-uploadproxy reads the CDIConfig (aggregate-roles);
//   - namespaced-rbac.yaml: their ServiceAccounts, Roles and RoleBindings
//     (the ServiceAccount, Role and RoleBinding objects of the namespaced
//     groups apiserver, controller and uploadproxy; the Deployments and
//     Services of those groups are left out: test/framework/cdi writes its
//     own);
//   - registrations.yaml: the APIService v1beta1.upload.cdi.kubevirt.io
//     and the webhook configurations (the group apiserver-registrations),
//     without a caBundle, which the installer adds from the CA it makes.
//
// hack/build-cdi-images.sh runs it at build time into its cache folder;
// nothing it writes is kept in git.
//
//	go run ./cmd/cdi-static-resources -namespace cdi -out DIR
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"kubevirt.io/containerized-data-importer/pkg/operator/resources/cluster"
	"kubevirt.io/containerized-data-importer/pkg/operator/resources/namespaced"
)

// clusterGroups are the generator groups of cluster-scoped RBAC written.
var clusterGroups = []string{"apiserver-rbac", "controller-rbac", "uploadproxy-rbac", "aggregate-roles"}

// namespacedGroups are the generator groups whose namespaced RBAC is written.
var namespacedGroups = []string{"apiserver", "controller", "uploadproxy"}

// namespacedKinds are the kinds kept from namespacedGroups.
var namespacedKinds = map[string]bool{"ServiceAccount": true, "Role": true, "RoleBinding": true}

func main() {
	namespace := flag.String("namespace", "cdi", "namespace CDI is installed in")
	out := flag.String("out", "", "folder to write the YAML files into")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "cdi-static-resources: -out is required")
		os.Exit(2)
	}
	if err := run(*namespace, *out); err != nil {
		fmt.Fprintln(os.Stderr, "cdi-static-resources:", err)
		os.Exit(1)
	}
}

func run(namespace, out string) error {
	cargs := &cluster.FactoryArgs{Namespace: namespace}
	var clusterRBAC []client.Object
	for _, g := range clusterGroups {
		objs, err := cluster.CreateStaticResourceGroup(g, cargs)
		if err != nil {
			return fmt.Errorf("generating the cluster group %s: %w", g, err)
		}
		clusterRBAC = append(clusterRBAC, objs...)
	}
	// The namespaced generators also build the Deployments, which need
	// image names; these placeholders end up in nothing written.
	nargs := &namespaced.FactoryArgs{
		Namespace: namespace, Verbosity: "1", PullPolicy: "IfNotPresent",
		ControllerImage: "unused", ImporterImage: "unused", ClonerImage: "unused",
		OvirtPopulatorImage: "unused", APIServerImage: "unused", UploadProxyImage: "unused",
		UploadServerImage: "unused", DeployClusterResources: "true", OperatorVersion: "unused",
	}
	var namespacedRBAC []client.Object
	for _, g := range namespacedGroups {
		objs, err := namespaced.CreateResourceGroup(g, nargs)
		if err != nil {
			return fmt.Errorf("generating the namespaced group %s: %w", g, err)
		}
		for _, o := range objs {
			if namespacedKinds[o.GetObjectKind().GroupVersionKind().Kind] {
				namespacedRBAC = append(namespacedRBAC, o)
			}
		}
	}
	registrations, err := cluster.CreateDynamicResourceGroup("apiserver-registrations", cargs)
	if err != nil {
		return fmt.Errorf("generating the API server registrations: %w", err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", out, err)
	}
	for name, objs := range map[string][]client.Object{
		"cluster-rbac.yaml":    clusterRBAC,
		"namespaced-rbac.yaml": namespacedRBAC,
		"registrations.yaml":   registrations,
	} {
		if err := write(filepath.Join(out, name), objs); err != nil {
			return err
		}
	}
	return nil
}

// write writes objs as one YAML stream, sorted by kind and name so that a
// run gives the same bytes every time.
func write(path string, objs []client.Object) error {
	sort.SliceStable(objs, func(i, j int) bool {
		ki, kj := objs[i].GetObjectKind().GroupVersionKind().Kind, objs[j].GetObjectKind().GroupVersionKind().Kind
		if ki != kj {
			return ki < kj
		}
		return objs[i].GetName() < objs[j].GetName()
	})
	var buf bytes.Buffer
	for _, o := range objs {
		gvk := o.GetObjectKind().GroupVersionKind()
		if gvk.Kind == "" || gvk.Version == "" {
			return fmt.Errorf("%s: the generator gave %T %s no apiVersion and kind", path, o, o.GetName())
		}
		b, err := yaml.Marshal(o)
		if err != nil {
			return fmt.Errorf("encoding %s %s: %w", gvk.Kind, o.GetName(), err)
		}
		buf.WriteString("---\n")
		buf.Write(b)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
