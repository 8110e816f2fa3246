package cli

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/utils/ptr"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// Dry-run modes of create, as kubectl names them.
const (
	dryRunNone   = "none"
	dryRunClient = "client"
	dryRunServer = "server"
)

// createOptions are the flags of create.
type createOptions struct {
	*env
	print *genericclioptions.PrintFlags

	url, credentialsSecret, datacenter                  string
	vmName, vmPath, vmBIOSUUID, vmInstanceUUID, vmMoRef string
	insecureSkipVerify                                  bool
	targetName, storageClass, stagingStorageClass       string
	networkMaps, storageMaps                            []string
	conversionImage                                     string
	skipConversion, approveRequired, planOnly, noStart  bool
	dryRun                                              string
}

func newCreateCommand(e *env) *cobra.Command {
	o := &createOptions{env: e, print: genericclioptions.NewPrintFlags("created").WithTypeSetter(scheme)}
	cmd := &cobra.Command{
		Use:   "create NAME --url URL --credentials-secret SECRET --vm VM [flags]",
		Short: "Create a migration from flags",
		Example: `  kubectl vmm create web-01 --url https://vcenter.example.com/sdk --credentials-secret vcenter \
    --vm web-01 --network-map "VM Network=pod" --network-map backend=default/backend \
    --storage-class standard --storage-map ssd-datastore=fast --approve-required
  kubectl vmm create web-01 ... --plan-only          # render the plan, touch nothing
  kubectl vmm create web-01 ... --dry-run=client -o yaml`,
		Args: exactlyOneName,
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd.Context(), args[0]) },
	}
	o.addFlags(cmd)
	return cmd
}

func (o *createOptions) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.url, "url", "", "vCenter or ESXi SDK endpoint, https://HOST/sdk (required)")
	f.StringVar(&o.credentialsSecret, "credentials-secret", "", "Secret in the namespace with username, password, endpoints (the hosts it may be used for) and optionally ca.crt or thumbprint (required)")
	f.StringVar(&o.datacenter, "datacenter", "", "datacenter holding the VM (default: the only one)")
	f.BoolVar(&o.insecureSkipVerify, "insecure-skip-verify", false, "do not verify the endpoint's certificate (labs only)")
	f.StringVar(&o.vmName, "vm", "", "source VM by name (exactly one of --vm, --vm-path, --vm-uuid, --vm-instance-uuid, --vm-moref)")
	f.StringVar(&o.vmPath, "vm-path", "", "source VM by inventory path, /DC/vm/folder/name")
	f.StringVar(&o.vmBIOSUUID, "vm-uuid", "", "source VM by BIOS UUID")
	f.StringVar(&o.vmInstanceUUID, "vm-instance-uuid", "", "source VM by vCenter instance UUID")
	f.StringVar(&o.vmMoRef, "vm-moref", "", "source VM by managed object reference, vm-42")
	f.StringVar(&o.targetName, "target-name", "", "name of the KubeVirt VirtualMachine (default: from the source VM's name)")
	f.StringArrayVar(&o.networkMaps, "network-map", nil, "SOURCE=pod | SOURCE=ignore | SOURCE=[NAMESPACE/]NAD (Multus); repeat per source network")
	f.StringVar(&o.storageClass, "storage-class", "", "storage class of the target disks no --storage-map names (default: the cluster's)")
	f.StringArrayVar(&o.storageMaps, "storage-map", nil, "DATASTORE=STORAGECLASS for the disks on one source datastore; repeat per datastore")
	f.StringVar(&o.stagingStorageClass, "staging-storage-class", "", "storage class of the staging volumes (default: the cluster's)")
	f.StringVar(&o.conversionImage, "conversion-image", "", "virt-v2v image of the conversion (default: the controller's)")
	f.BoolVar(&o.skipConversion, "skip-conversion", false, "skip the guest conversion (the guest already has virtio drivers)")
	f.BoolVar(&o.approveRequired, "approve-required", false, "wait for kubectl vmm approve before stopping the source VM")
	f.BoolVar(&o.planOnly, "plan-only", false, "only validate and store the plan (kubectl vmm plan NAME); the source is not touched")
	f.BoolVar(&o.noStart, "no-start", false, "leave the new VirtualMachine halted")
	f.StringVar(&o.dryRun, "dry-run", dryRunNone, `"none", "client" (print only) or "server" (validated by the API server, not stored)`)
	f.Lookup("dry-run").NoOptDefVal = dryRunClient
	o.print.AddFlags(cmd)
}

func (o *createOptions) run(ctx context.Context, name string) error {
	ns, err := o.namespace()
	if err != nil {
		return err
	}
	m, err := o.build(name, ns)
	if err != nil {
		return err
	}
	if o.dryRun == dryRunClient {
		return o.printCreated(m, " (dry run)")
	}
	clients, err := o.factory.Clients()
	if err != nil {
		return err
	}
	opts := metav1.CreateOptions{FieldManager: "kubectl-vmm"}
	if o.dryRun == dryRunServer {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	created, err := clients.Migration.MigrationV1alpha1().VirtualMachineMigrations(ns).Create(ctx, m, opts)
	if err != nil {
		return fmt.Errorf("creating %s %q: %w", resourceName, name, err)
	}
	suffix := ""
	if o.dryRun == dryRunServer {
		suffix = " (server dry run)"
	}
	return o.printCreated(created, suffix)
}

func (o *createOptions) printCreated(m *v1alpha1.VirtualMachineMigration, suffix string) error {
	if *o.print.OutputFormat == "" {
		_, err := fmt.Fprintf(o.streams.Out, "%s/%s created%s\n", resourceName, m.Name, suffix)
		return err
	}
	p, err := o.print.ToPrinter()
	if err != nil {
		return err
	}
	obj, err := withoutEmptyFields(m)
	if err != nil {
		return err
	}
	return p.PrintObj(obj, o.streams.Out)
}

// withoutEmptyFields turns a migration into an unstructured object without
// its empty status, null creation time and empty spec objects, so that a
// dry run prints only what the flags said.
func withoutEmptyFields(m *v1alpha1.VirtualMachineMigration) (*unstructured.Unstructured, error) {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(m)
	if err != nil {
		return nil, fmt.Errorf("converting the migration for printing: %w", err)
	}
	u := &unstructured.Unstructured{Object: content}
	if m.Status.Phase == "" {
		unstructured.RemoveNestedField(u.Object, "status")
	}
	if m.CreationTimestamp.IsZero() {
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	}
	if spec, ok := u.Object["spec"].(map[string]any); ok {
		pruneEmpty(spec)
	}
	return u, nil
}

// pruneEmpty removes empty objects, depth first.
func pruneEmpty(obj map[string]any) {
	for k, v := range obj {
		if child, ok := v.(map[string]any); ok {
			pruneEmpty(child)
			if len(child) == 0 {
				delete(obj, k)
			}
		}
	}
}

// build turns the flags into a migration, or says which flag is wrong.
func (o *createOptions) build(name, ns string) (*v1alpha1.VirtualMachineMigration, error) {
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return nil, fmt.Errorf("migration name %q: %s", name, strings.Join(errs, "; "))
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	m := &v1alpha1.VirtualMachineMigration{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "VirtualMachineMigration"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.VirtualMachineMigrationSpec{
			Source: v1alpha1.SourceSpec{
				URL: o.url, CredentialsSecretRef: v1alpha1.SecretReference{Name: o.credentialsSecret},
				InsecureSkipVerify: o.insecureSkipVerify, Datacenter: o.datacenter,
				VM: v1alpha1.VMSelector{Name: o.vmName, InventoryPath: o.vmPath, BIOSUUID: o.vmBIOSUUID, InstanceUUID: o.vmInstanceUUID, MoRef: o.vmMoRef},
			},
			Target:     v1alpha1.TargetSpec{Name: o.targetName},
			Staging:    v1alpha1.StagingSpec{StorageClassName: o.stagingStorageClass},
			Conversion: v1alpha1.ConversionSpec{Skip: o.skipConversion, Image: o.conversionImage},
			Policy:     v1alpha1.PolicySpec{RequireApproval: o.approveRequired},
			PlanOnly:   o.planOnly,
		},
	}
	if o.noStart {
		m.Spec.Target.Start = ptr.To(false)
	}
	var err error
	if m.Spec.Target.Networks, err = parseNetworkMaps(o.networkMaps); err != nil {
		return nil, err
	}
	if m.Spec.Target.Storage, err = parseStorage(o.storageClass, o.storageMaps); err != nil {
		return nil, err
	}
	return m, nil
}

// Patterns the API enforces, checked here too so that a bad flag is named
// before anything is sent.
var (
	uuidPattern  = regexp.MustCompile(`^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$`)
	moRefPattern = regexp.MustCompile(`^(vm-)?[0-9]+$`)
	nadPattern   = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]*[a-z0-9])?/)?[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
)

func (o *createOptions) validate() error {
	switch o.dryRun {
	case dryRunNone, dryRunClient, dryRunServer:
	default:
		return fmt.Errorf("--dry-run must be none, client or server, got %q", o.dryRun)
	}
	if err := validateURL(o.url); err != nil {
		return err
	}
	if o.credentialsSecret == "" {
		return fmt.Errorf("--credentials-secret is required: the Secret holding username and password for %s", o.url)
	}
	if errs := validation.IsDNS1123Subdomain(o.credentialsSecret); len(errs) > 0 {
		return fmt.Errorf("--credentials-secret %q: %s", o.credentialsSecret, strings.Join(errs, "; "))
	}
	if err := o.validateVM(); err != nil {
		return err
	}
	if o.targetName != "" {
		if errs := validation.IsDNS1123Label(o.targetName); len(errs) > 0 {
			return fmt.Errorf("--target-name %q: %s", o.targetName, strings.Join(errs, "; "))
		}
	}
	for flag, class := range map[string]string{"--storage-class": o.storageClass, "--staging-storage-class": o.stagingStorageClass} {
		if err := validateClass(flag, class); err != nil {
			return err
		}
	}
	if o.skipConversion && o.conversionImage != "" {
		return fmt.Errorf("--skip-conversion and --conversion-image cannot go together")
	}
	if strings.ContainsAny(o.conversionImage, " \t\n") {
		return fmt.Errorf("--conversion-image %q must not contain spaces", o.conversionImage)
	}
	return nil
}

func validateURL(raw string) error {
	if raw == "" {
		return fmt.Errorf("--url is required: the vCenter or ESXi SDK endpoint, for example https://vcenter.example.com/sdk")
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return fmt.Errorf("--url %q is not a URL: %w", raw, err)
	case u.Scheme != "https" || u.Hostname() == "":
		return fmt.Errorf("--url %q must be an https URL with a host, for example https://vcenter.example.com/sdk", raw)
	case u.User != nil:
		return fmt.Errorf("--url must not carry credentials: put them in the --credentials-secret Secret")
	}
	return nil
}

func (o *createOptions) validateVM() error {
	set := 0
	for _, v := range []string{o.vmName, o.vmPath, o.vmBIOSUUID, o.vmInstanceUUID, o.vmMoRef} {
		if v != "" {
			set++
		}
	}
	switch {
	case set != 1:
		return fmt.Errorf("name the source VM with exactly one of --vm, --vm-path, --vm-uuid, --vm-instance-uuid or --vm-moref (%d given)", set)
	case len(o.vmName) > 80:
		return fmt.Errorf("--vm %q is longer than vSphere's 80 characters", o.vmName)
	case o.vmPath != "" && !strings.HasPrefix(o.vmPath, "/"):
		return fmt.Errorf("--vm-path %q must be an inventory path starting with /, for example /DC1/vm/web-01", o.vmPath)
	case o.vmBIOSUUID != "" && !uuidPattern.MatchString(o.vmBIOSUUID):
		return fmt.Errorf("--vm-uuid %q is not a UUID", o.vmBIOSUUID)
	case o.vmInstanceUUID != "" && !uuidPattern.MatchString(o.vmInstanceUUID):
		return fmt.Errorf("--vm-instance-uuid %q is not a UUID", o.vmInstanceUUID)
	case o.vmMoRef != "" && !moRefPattern.MatchString(o.vmMoRef):
		return fmt.Errorf("--vm-moref %q must look like vm-42", o.vmMoRef)
	}
	return nil
}

func validateClass(flag, class string) error {
	if class == "" {
		return nil
	}
	if errs := validation.IsDNS1123Subdomain(class); len(errs) > 0 {
		return fmt.Errorf("%s %q is not a storage class name: %s", flag, class, strings.Join(errs, "; "))
	}
	return nil
}

// parseNetworkMaps reads SOURCE=pod|ignore|[NAMESPACE/]NAD flags.
func parseNetworkMaps(values []string) ([]v1alpha1.NetworkMapping, error) {
	var out []v1alpha1.NetworkMapping
	seen := map[string]bool{}
	for _, v := range values {
		i := strings.LastIndex(v, "=")
		if i <= 0 || i == len(v)-1 {
			return nil, fmt.Errorf("--network-map %q must be SOURCE=pod, SOURCE=ignore or SOURCE=[NAMESPACE/]NAD", v)
		}
		src, dst := v[:i], v[i+1:]
		if seen[src] {
			return nil, fmt.Errorf("--network-map names source network %q twice", src)
		}
		seen[src] = true
		nm := v1alpha1.NetworkMapping{Source: src}
		switch strings.ToLower(dst) {
		case "pod":
			nm.Type = v1alpha1.NetworkTypePod
		case "ignore":
			nm.Type = v1alpha1.NetworkTypeIgnore
		default:
			if !nadPattern.MatchString(dst) {
				return nil, fmt.Errorf("--network-map %q: %q is neither pod, ignore nor a NetworkAttachmentDefinition as NAME or NAMESPACE/NAME", v, dst)
			}
			nm.Type, nm.MultusNetworkName = v1alpha1.NetworkTypeMultus, dst
		}
		out = append(out, nm)
	}
	return out, nil
}

// parseStorage reads the default storage class and DATASTORE=CLASS flags.
func parseStorage(defaultClass string, values []string) (v1alpha1.StorageMapping, error) {
	var out v1alpha1.StorageMapping
	if defaultClass != "" {
		out.Default = &v1alpha1.StorageTarget{StorageClassName: defaultClass}
	}
	seen := map[string]bool{}
	for _, v := range values {
		i := strings.LastIndex(v, "=")
		if i <= 0 || i == len(v)-1 {
			return out, fmt.Errorf("--storage-map %q must be DATASTORE=STORAGECLASS", v)
		}
		ds, class := v[:i], v[i+1:]
		if seen[ds] {
			return out, fmt.Errorf("--storage-map names datastore %q twice", ds)
		}
		seen[ds] = true
		if err := validateClass("--storage-map "+ds, class); err != nil {
			return out, err
		}
		out.Datastores = append(out.Datastores, v1alpha1.DatastoreStorageMapping{Datastore: ds, Target: v1alpha1.StorageTarget{StorageClassName: class}})
	}
	return out, nil
}
