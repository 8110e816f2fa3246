// Command kubevirt-crds writes KubeVirt's CustomResourceDefinitions, and the
// objects that install virt-api and virt-controller, as YAML files, from
// KubeVirt's own generators: the functions virt-operator itself calls
// (kubevirt.io/kubevirt/pkg/virt-operator/resource/generate/components and
// .../rbac), at the KubeVirt version this tools module requires.
//
// hack/build-kubevirt.sh runs it with -out set to the cache folder:
//
//	<out>/crds/<singular>.yaml     every CRD virt-operator installs
//	<out>/install/NN-<kind>-<name>.yaml
//	                               RBAC (ServiceAccounts, ClusterRoles,
//	                               Roles, bindings) of virt-api and
//	                               virt-controller and KubeVirt's aggregated
//	                               ClusterRoles, the virt-api Service, its
//	                               mutating and validating webhook
//	                               configurations, its APIService and the two
//	                               Deployments, numbered in an order that can
//	                               be applied one by one
//	<out>/node/NN-<kind>-<name>.yaml
//	                               virt-handler's DaemonSet (the node's
//	                               part: hack/build-kubevirt-node.sh builds
//	                               its images and those of virt-launcher)
//
// Nothing is applied to a cluster: a later step installs them.
//
// With -certs-out instead, it writes, at install time, the certificate
// Secrets and CA bundle ConfigMaps virt-operator would create
// (writeCertificates): test/framework/kubevirt runs it for each install.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	apiregv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	virtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"kubevirt.io/kubevirt/pkg/virt-operator/resource/generate/components"
	"kubevirt.io/kubevirt/pkg/virt-operator/resource/generate/rbac"
	operatorutil "kubevirt.io/kubevirt/pkg/virt-operator/util"
)

// crdGenerators lists every CRD generator of the components package, in the
// order virt-operator's install strategy creates them.
var crdGenerators = []func() (*extv1.CustomResourceDefinition, error){
	components.NewVirtualMachineInstanceCrd,
	components.NewPresetCrd,
	components.NewReplicaSetCrd,
	components.NewVirtualMachineCrd,
	components.NewVirtualMachineInstanceMigrationCrd,
	components.NewVirtualMachineSnapshotCrd,
	components.NewVirtualMachineSnapshotContentCrd,
	components.NewVirtualMachineRestoreCrd,
	components.NewVirtualMachineInstancetypeCrd,
	components.NewVirtualMachineClusterInstancetypeCrd,
	components.NewVirtualMachinePoolCrd,
	components.NewMigrationPolicyCrd,
	components.NewVirtualMachinePreferenceCrd,
	components.NewVirtualMachineClusterPreferenceCrd,
	components.NewVirtualMachineExportCrd,
	components.NewVirtualMachineCloneCrd,
	components.NewVirtualMachineBackupCrd,
	components.NewVirtualMachineBackupTrackerCrd,
	components.NewKubeVirtCrd,
}

func main() {
	out := flag.String("out", "", "folder to write crds/ and install/ into (required)")
	namespace := flag.String("namespace", "kubevirt", "namespace virt-api and virt-controller are installed in")
	registry := flag.String("image-registry", "localhost/kubevirt", "image registry the Deployments name")
	tag := flag.String("image-tag", "", "image tag the Deployments name (the KubeVirt version)")
	certsOut := flag.String("certs-out", "", "instead of -out: folder to write the certificate Secrets and CA bundle ConfigMaps into")
	certsFor := flag.Duration("certs-duration", 48*time.Hour, "with -certs-out: how long the certificates are valid")
	flag.Parse()
	if *certsOut != "" {
		err := os.MkdirAll(*certsOut, 0o700)
		if err == nil {
			err = writeCertificates(*certsOut, *namespace, *certsFor)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "kubevirt-crds: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if *out == "" || *tag == "" {
		fmt.Fprintln(os.Stderr, "kubevirt-crds: -out and -image-tag are required")
		os.Exit(2)
	}
	if err := run(*out, *namespace, *registry, *tag); err != nil {
		fmt.Fprintf(os.Stderr, "kubevirt-crds: %v\n", err)
		os.Exit(1)
	}
}

func run(out, namespace, registry, tag string) error {
	if err := apiregv1.AddToScheme(scheme.Scheme); err != nil {
		return fmt.Errorf("registering apiregistration/v1: %w", err)
	}
	if err := extv1.AddToScheme(scheme.Scheme); err != nil {
		return fmt.Errorf("registering apiextensions/v1: %w", err)
	}
	crdDir := filepath.Join(out, "crds")
	installDir := filepath.Join(out, "install")
	nodeDir := filepath.Join(out, "node")
	for _, dir := range []string{crdDir, installDir, nodeDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", dir, err)
		}
	}
	for _, gen := range crdGenerators {
		crd, err := gen()
		if err != nil {
			return fmt.Errorf("generating a CRD: %w", err)
		}
		if err := write(filepath.Join(crdDir, crd.Spec.Names.Singular+".yaml"), crd); err != nil {
			return err
		}
	}
	objects, err := installObjects(namespace, registry, tag)
	if err != nil {
		return err
	}
	if err := writeNumbered(installDir, objects); err != nil {
		return err
	}
	return writeNumbered(nodeDir, []runtime.Object{
		components.NewHandlerDaemonSet(deploymentConfig(namespace, registry, tag), "", "", ""),
	})
}

// writeNumbered writes objects into dir as NN-<kind>-<name>.yaml, NN their
// order.
func writeNumbered(dir string, objects []runtime.Object) error {
	for i, obj := range objects {
		kind, name, err := kindAndName(obj)
		if err != nil {
			return err
		}
		file := fmt.Sprintf("%02d-%s-%s.yaml", i, strings.ToLower(kind), strings.ReplaceAll(name, ":", "-"))
		if err := write(filepath.Join(dir, file), obj); err != nil {
			return err
		}
	}
	return nil
}

// deploymentConfig is what virt-operator renders KubeVirt's components
// from for a KubeVirt CR naming registry and tag in namespace.
func deploymentConfig(namespace, registry, tag string) *operatorutil.KubeVirtDeploymentConfig {
	kv := &virtv1.KubeVirt{
		ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: namespace},
		Spec:       virtv1.KubeVirtSpec{ImageRegistry: registry, ImageTag: tag},
	}
	return operatorutil.GetTargetConfigFromKV(kv)
}

// installObjects returns what installs virt-api and virt-controller in
// namespace, in an order that can be applied one by one: the
// PriorityClass their pods name and RBAC first, then the Service, the
// webhooks and APIService that send to it, and the Deployments last.
func installObjects(namespace, registry, tag string) ([]runtime.Object, error) {
	objs := []runtime.Object{components.NewKubeVirtPriorityClassCR()}
	objs = append(objs, rbac.GetAllCluster()...)
	objs = append(objs, rbac.GetAllApiServer(namespace)...)
	// With the NAD rule: virt-operator adds it when Multus' CRD exists,
	// and the build ships that CRD (crds/network-attachment-definition.yaml).
	objs = append(objs, rbac.GetAllController(namespace, true)...)
	// virt-handler's ServiceAccount and RBAC (not its DaemonSet): the
	// test stand-in playing virt-handler acts as it, and virt-api keeps
	// instance status changes only from KubeVirt's own accounts.
	objs = append(objs, rbac.GetAllHandler(namespace)...)
	objs = append(objs,
		components.NewApiServerService(namespace),
		components.NewVirtAPIMutatingWebhookConfiguration(namespace),
		components.NewVirtAPIValidatingWebhookConfiguration(namespace),
	)
	for _, svc := range components.NewVirtAPIAPIServices(namespace) {
		objs = append(objs, svc)
	}
	config := deploymentConfig(namespace, registry, tag)
	objs = append(objs,
		components.NewApiServerDeployment(config, "", "", ""),
		components.NewControllerDeployment(config, "", "", ""),
	)
	return objs, nil
}

// kindAndName fills in obj's apiVersion and kind from the scheme where the
// generator left them empty, and returns its kind and name.
func kindAndName(obj runtime.Object) (string, string, error) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Empty() {
		kinds, _, err := scheme.Scheme.ObjectKinds(obj)
		if err != nil || len(kinds) == 0 {
			return "", "", fmt.Errorf("no kind for %T: %w", obj, errors.Join(err, errors.New("not in the scheme")))
		}
		gvk = kinds[0]
		obj.GetObjectKind().SetGroupVersionKind(gvk)
	}
	meta, ok := obj.(metav1.Object)
	if !ok {
		return "", "", fmt.Errorf("%T has no object metadata", obj)
	}
	return gvk.Kind, meta.GetName(), nil
}

// write stores obj as YAML in path, readable by all.
func write(path string, obj any) error { return writeMode(path, obj, 0o644) }

// writeMode stores obj as YAML in path with the permissions perm.
func writeMode(path string, obj any, perm os.FileMode) error {
	data, err := yaml.Marshal(obj)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", filepath.Base(path), err)
	}
	if err := os.WriteFile(path, data, perm); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
